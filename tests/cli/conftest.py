"""Fixtures of the command-line tests: the fixture model's arguments and an input file."""

import pytest

from tests.cli.embed_helpers import SENTENCES


@pytest.fixture
def model_args(allennlp_fixture):
    return [
        "--options",
        str(allennlp_fixture / "options.json"),
        "--weights",
        str(allennlp_fixture / "lm_weights.hdf5"),
    ]


@pytest.fixture
def input_file(tmp_path):
    path = tmp_path / "sentences.txt"
    path.write_text("\n".join(SENTENCES) + "\n", encoding="utf-8")
    return path
