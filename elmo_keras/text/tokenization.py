"""Sentence -> tokens in pure Python (no TensorFlow).

Two modes, shared with the TensorFlow tokenizer `elmo_keras.text.tf_tokenization.tokenize`, which
gives exactly the same tokens:

- `"whitespace"`: split on whitespace, as `str.split()` does (for text that is already
  tokenized, the format of the 1B Word Benchmark the published models were trained on).
- `"punctuation"`: split on whitespace, and also make every punctuation or symbol character a
  token of its own; any other characters (letters, digits, marks, ...) stay together in runs.
  `"Hello, world!"` -> `["Hello", ",", "world", "!"]`; `"U.S."` -> `["U", ".", "S", "."]`;
  `"don't"` -> `["don", "'", "t"]`; `"3.5%"` -> `["3", ".", "5", "%"]`.

Whitespace is the set of characters for which `str.isspace()` is true; punctuation and symbols
are the Unicode general categories P* and S* (from the Unicode version in
`_unicode_tables.UNICODE_VERSION`, fixed in this package so that every Python and every RE2 build
agree).
"""

import re

from elmo_keras.text import _unicode_tables

TOKENIZATION_MODES = ("whitespace", "punctuation")
# The split of every entry point that takes untokenized text: `ElmoEmbedding(input_type=
# "sentences")`, `Embedder.embed_text`, `elmo-keras embed` and `beam-embed`, the SavedModel's
# `default` signature. `"whitespace"` (TF-Hub's module's split) is available by name everywhere.
DEFAULT_TOKENIZATION_MODE = "punctuation"


def character_class(codepoints_or_ranges, escape=lambda c: f"\\U{c:08X}"):
    """The inside of a regex character class for code points and (start, end) ranges.

    `escape` writes one code point; the default is Python's `\\U` form, and the TensorFlow
    tokenizer passes RE2's `\\x{...}` form, so both patterns come from the same tables.
    """
    parts = []
    for item in codepoints_or_ranges:
        start, end = item if isinstance(item, tuple) else (item, item)
        parts.append(escape(start) if start == end else f"{escape(start)}-{escape(end)}")
    return "".join(parts)


_WHITESPACE_CLASS = character_class(_unicode_tables.WHITESPACE)
_PUNCTUATION_CLASS = character_class(_unicode_tables.PUNCTUATION_RANGES)
_TOKEN_RE = {
    "whitespace": re.compile(f"[^{_WHITESPACE_CLASS}]+"),
    "punctuation": re.compile(
        f"[{_PUNCTUATION_CLASS}]|[^{_WHITESPACE_CLASS}{_PUNCTUATION_CLASS}]+"
    ),
}


def check_mode(mode):
    if mode not in TOKENIZATION_MODES:
        raise ValueError(f"`mode` must be one of {TOKENIZATION_MODES}. Received: mode={mode!r}")
    return mode


def tokenize_python(sentence, mode=DEFAULT_TOKENIZATION_MODE):
    """Splits one untokenized sentence into tokens.

    Args:
        sentence: str. The sentence.
        mode: str. `"punctuation"` splits on whitespace and makes each punctuation or symbol
            character its own token; `"whitespace"` only splits on whitespace (`str.split()`).
            Defaults to `"punctuation"`.

    Returns:
        A list of str.

    Example:

    >>> tokenize_python("Hello, world! It's 3.5°C.")
    ['Hello', ',', 'world', '!', 'It', "'", 's', '3', '.', '5', '°', 'C', '.']
    >>> tokenize_python("Already tokenized , text .", mode="whitespace")
    ['Already', 'tokenized', ',', 'text', '.']
    """
    check_mode(mode)
    if not isinstance(sentence, str):
        raise ValueError(
            f"`sentence` must be a str. Received: sentence={sentence!r} "
            f"of type {type(sentence).__name__}"
        )
    return _TOKEN_RE[mode].findall(sentence)
