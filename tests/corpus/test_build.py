"""`build_corpus` on tiny local archives: dedupe, evaluation-text exclusion, the sha256 pin."""

import hashlib
import json
import zipfile

import pytest

from elmo_keras.corpus import ORDERS, build_corpus, evaluation_index, overlap
from elmo_keras.corpus.__main__ import main
from elmo_keras.corpus.sources import Source
from elmo_keras.corpus.text import match_key, repair_news
from elmo_keras.file_io.archives import Archive
from elmo_keras.file_io.download import DownloadError, file_sha256

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


def _fake_source(tmp_path, sha256=None, name="fake", paragraphs=PARAGRAPHS):
    path = tmp_path / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("text.txt", "\n".join(paragraphs))
    pinned = sha256 or file_sha256(path)
    return Source(name, Archive(f"{name}==1.0", str(path), pinned), "CC0", _read_fake)


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


def _numbered(name, n=30):
    return [f"Paragraph number {i} of the {name} source says something." for i in range(n)]


def test_train_lines_are_mixed_across_sources_unless_the_source_order_is_asked(tmp_path):
    sources = [
        _fake_source(tmp_path, name="first", paragraphs=_numbered("first")),
        _fake_source(tmp_path, name="second", paragraphs=_numbered("second")),
    ]
    by_source = build_corpus(tmp_path / "sources", sources, EVALUATION, order="sources")
    mixed = build_corpus(tmp_path / "mixed", sources, EVALUATION)
    assert mixed["order"] == {"mixed": ORDERS["mixed"]}
    assert by_source["sources"] == mixed["sources"]
    in_source_order = (tmp_path / "sources" / "train.txt").read_text("utf-8").splitlines()
    shuffled = (tmp_path / "mixed" / "train.txt").read_text("utf-8").splitlines()
    labels = [line.split()[5] for line in in_source_order]  # first's lines, then second's
    assert labels == sorted(labels) and 25 < labels.count("first") <= 30
    # The mixed order, computed here with hashlib: the lines sorted by their 8-byte BLAKE2b.
    digest = {line: hashlib.blake2b(line.encode(), digest_size=8).hexdigest() for line in shuffled}
    assert shuffled == sorted(in_source_order, key=lambda line: (digest[line], line))
    first_half = [line.split()[5] for line in shuffled[: len(shuffled) // 2]]
    assert 5 < first_half.count("first") < 25  # both sources in the first half of the file
    with pytest.raises(ValueError, match=r"`order` must be one of \('mixed', 'sources'\)"):
        build_corpus(tmp_path / "bad", sources, EVALUATION, order="random")
    assert not (tmp_path / "bad").exists()


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


def test_the_command_passes_the_order_and_refuses_an_unknown_one(monkeypatch, capsys, tmp_path):
    calls = []

    def record(output, **kwargs):
        calls.append(kwargs["order"])
        return {"total": {"train_lines": 1, "train_tokens": 3, "valid_tokens": 0}}

    monkeypatch.setattr("elmo_keras.corpus.__main__.build_corpus", record)
    assert main(["build", "--output", str(tmp_path / "a")]) == 0
    assert main(["build", "--output", str(tmp_path / "b"), "--order", "sources"]) == 0
    assert calls == ["mixed", "sources"]
    with pytest.raises(SystemExit) as usage:
        main(["build", "--output", str(tmp_path / "c"), "--order", "random"])
    assert usage.value.code == 2
    assert "argument --order: invalid choice: 'random'" in capsys.readouterr().err


def test_overwrite_replaces_only_an_earlier_corpus(tmp_path):
    """Issue 39, point 1: `build --overwrite` replaced any folder (a training run's folder
    holding its text, the user's); only an earlier corpus (its three files, sources.json with
    its sources and rules) is replaced now, anything else is one line naming what it holds."""
    source = [_fake_source(tmp_path)]
    output = tmp_path / "out"
    build_corpus(output, source, EVALUATION)
    (output / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"out is not a corpus folder \(it holds notes.txt, "):
        build_corpus(output, source, EVALUATION, overwrite=True)
    assert (output / "notes.txt").read_text() == "mine"
    (output / "notes.txt").unlink()
    (output / "train.txt").write_text("old")
    build_corpus(output, source, EVALUATION, overwrite=True)
    assert sorted(p.name for p in output.iterdir()) == ["sources.json", "train.txt", "valid.txt"]
    assert (output / "train.txt").read_text() != "old"
