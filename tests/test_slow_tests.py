"""The list of slow tests (`tests/slow_tests.py`) names tests that exist: a test renamed or
removed must leave the list too, or `make test-fast` would quietly run it again."""

import pytest

from tests.conftest import ROOT
from tests.slow_tests import SLOW, is_slow


@pytest.mark.parametrize("entry", SLOW)
def test_each_entry_names_an_existing_test(entry):
    path, _, name = entry.partition("::")
    source = (ROOT / path).read_text(encoding="utf-8")
    assert not name or f"def {name}(" in source, entry


def test_an_entry_marks_its_file_or_its_test_with_every_parameter():
    assert is_slow("tests/test_install.py::test_the_package_comes_from_the_wheel")
    assert is_slow("tests/cli/test_train.py::test_train_writes_the_run_folder")
    assert is_slow("tests/models/test_elmo_embedding.py::test_elmo_embedding_layer[tokens-x]")
    assert not is_slow("tests/cli/test_train.py::test_train")
    assert not is_slow("tests/cli/test_train.py::test_errors_are_one_line[a]")
