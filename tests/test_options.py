"""options.json sizes are bounded before anything is built (issue 30, point 9): a size that once
meant a 50-line allocation failure, or a build that never ended, is one line naming the file, the
key, the limit and the value."""

import json

import pytest

from elmo_keras.options import LIMITS, read_options


@pytest.mark.parametrize(
    "edit, message",
    [
        (
            lambda o: o["lstm"].update(dim=10**9),
            "`lstm.dim` must be an integer in [1, 65,536]. Received: 1000000000",
        ),
        (
            lambda o: o["lstm"].update(projection_dim=1e30),
            "`lstm.projection_dim` must be an integer in [1, 16,384]. Received: 1e+30",
        ),
        (
            lambda o: o["lstm"].update(n_layers=10**5),
            "`lstm.n_layers` must be an integer in [1, 64]. Received: 100000",
        ),
        (
            lambda o: o["char_cnn"]["embedding"].update(dim=10**9),
            "`char_cnn.embedding.dim` must be an integer in [1, 4,096]",
        ),
        (
            lambda o: o["char_cnn"].update(n_highway=10**6),
            "`char_cnn.n_highway` must be an integer in [0, 64]. Received: 1000000",
        ),
        (
            lambda o: o["char_cnn"].update(filters=[[1, 10**6]]),
            "`char_cnn.filters` must be at most 64 pairs whose counts add up to at most 65,536",
        ),
    ],
)
def test_sizes_beyond_the_limits_name_file_key_and_limit(tmp_path, fixtures_dir, edit, message):
    options = json.loads((fixtures_dir / "allennlp" / "options.json").read_text())
    edit(options)
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    with pytest.raises(ValueError) as error:
        read_options(path)
    text = str(error.value)
    assert str(path) in text and message in text and len(text.splitlines()) == 1


def test_the_published_sizes_are_far_inside_the_limits():
    """The Original model (4096 / 512 / 2 layers / 2 highways / 2048 filters) with room to grow."""
    assert LIMITS["lstm.dim"] >= 16 * 4096 and LIMITS["lstm.projection_dim"] >= 32 * 512
    assert LIMITS["char_cnn.filters"] >= 32 * 2048


@pytest.mark.parametrize(
    "text, message",
    [
        ("[" * 100_000 + "]" * 100_000, "is nested too deeply"),  # was a RecursionError
        ('{"lstm": {"dim": ' + "9" * 5000 + "}}", "holds a number Python does not read"),
        (
            '{"lstm": {"dim": 64, "dim": 4096}, "char_cnn": {}}',  # the last one won, silently
            "gives the key 'dim' twice in one object",
        ),
    ],
    ids=["deep", "digits", "duplicate"],
)
def test_json_that_python_reads_badly_is_one_line_naming_the_file(tmp_path, text, message):
    """Issue 39, point 17."""
    path = tmp_path / "options.json"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ValueError) as error:
        read_options(path)
    assert str(error.value).startswith(f"options file {path} ")
    assert message in str(error.value) and "\n" not in str(error.value)
