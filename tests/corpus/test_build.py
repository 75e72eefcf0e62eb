"""`build_corpus` on tiny local archives: dedupe, evaluation-text exclusion, the sha256 pin."""

import json
import zipfile

import pytest

from elmo_keras.corpus import build_corpus, evaluation_index, overlap
from elmo_keras.corpus.__main__ import main
from elmo_keras.corpus.sources import Source
from elmo_keras.corpus.text import match_key, repair_news
from elmo_keras.data import Archive
from elmo_keras.download import DownloadError, file_sha256

PARAGRAPHS = [
    "The first paragraph says something new.",
    "THE FIRST paragraph -- says something new!",  # a duplicate after normalization
    "She went to the bank to open a savings account, they said.",  # holds a demo sentence
    "Seen from the eastern Atlantic Ocean, Mediterranean Sea and parts of the Black Sea today.",
    "Too short.",
    "Fianna F\ufffd\ufffdil is not in favour.",  # mojibake that cannot be repaired
    "A last, different paragraph about rivers and boats.",
]
EVALUATION = {
    "demo_sentences": ["She went to the bank to open a savings account ."],
    "wikitext2_valid_test": [
        "a species of clawed lobster from the eastern Atlantic Ocean , Mediterranean Sea and "
        "parts of the Black Sea . It is closely related"
    ],
}


def _read_fake(path):
    with zipfile.ZipFile(path) as archive:
        return [repair_news(line) for line in archive.read("text.txt").decode("utf-8").split("\n")]


def _fake_source(tmp_path, sha256=None):
    path = tmp_path / "fake-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("text.txt", "\n".join(PARAGRAPHS))
    pinned = sha256 or file_sha256(path)
    return Source("fake", Archive("fake==1.0", str(path), pinned), "CC0", _read_fake)


def test_build_keeps_one_copy_and_drops_evaluation_overlaps(tmp_path):
    report = build_corpus(tmp_path / "out", [_fake_source(tmp_path)], EVALUATION)
    lines = (tmp_path / "out" / "train.txt").read_text("utf-8").splitlines()
    lines += (tmp_path / "out" / "valid.txt").read_text("utf-8").splitlines()
    assert sorted(lines) == [
        "A last , different paragraph about rivers and boats .",
        "The first paragraph says something new .",
    ]
    counts = json.loads((tmp_path / "out" / "sources.json").read_text("utf-8"))
    assert counts == report
    assert report["sources"]["fake"]["counts"] == {
        "dropped_duplicate": 1,
        "dropped_evaluation:demo_sentences": 1,
        "dropped_evaluation:wikitext2_valid_test": 1,
        "dropped_mojibake": 1,
        "dropped_short": 1,
        "train_lines": 2,
        "train_tokens": 17,
    }
    assert report["sources"]["fake"]["licence"] == "CC0"


def test_overlap_needs_a_whole_short_sentence_or_thirteen_words_of_a_long_one():
    long_text = " ".join(f"w{i}" for i in range(20))
    index = evaluation_index({"short": ["one two three four five"], "long": [long_text]})
    assert overlap(match_key("x one two three four five y"), index) == "short"
    assert overlap(match_key("x one two three four y"), index) is None
    assert overlap(match_key(" ".join(f"w{i}" for i in range(5, 18))), index) == "long"
    assert overlap(match_key(" ".join(f"w{i}" for i in range(5, 17))), index) is None


def test_a_tampered_archive_is_refused_and_nothing_is_written(tmp_path):
    source = _fake_source(tmp_path, sha256="0" * 64)
    with pytest.raises(DownloadError) as error:
        build_corpus(tmp_path / "out", [source], EVALUATION)
    message = str(error.value)
    assert "\n" not in message and "fake==1.0" in message and "expected " + "0" * 64 in message
    assert not (tmp_path / "out").exists()


def test_the_command_reports_a_failure_in_one_line(monkeypatch, capsys, tmp_path):
    def refuse(*args, **kwargs):
        raise DownloadError("The archive fake==1.0 has sha256 1, expected 2; refusing to use it.")

    monkeypatch.setattr("elmo_keras.corpus.__main__.build_corpus", refuse)
    assert main(["build", "--output", str(tmp_path / "out")]) == 1
    assert capsys.readouterr().err == (
        "error: The archive fake==1.0 has sha256 1, expected 2; refusing to use it.\n"
    )
    with pytest.raises(SystemExit) as usage:
        main(["build"])
    assert usage.value.code == 2
