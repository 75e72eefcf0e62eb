"""Sentence -> tokens with TensorFlow ops (the graph twin of `tokenization.tokenize_python`).

Both tokenizers follow the same rule (see `elmo_keras.text.tokenization`) and build their patterns
from the same character tables, so they give exactly the same tokens on any Unicode text.

By default the split uses only core TensorFlow string ops (`StaticRegexReplace`,
`StringSplitV2`), so a SavedModel holding it loads with plain TensorFlow and converts to ONNX.
`use_tensorflow_text=True` does the same split with `tensorflow_text.regex_split` instead
(imported only then); it gives the same tokens except that `regex_split` silently drops
everything from the first NUL character (U+0000) of a sentence on (tensorflow-text 2.21).
"""

import tensorflow as tf

from elmo_keras.text import _unicode_tables
from elmo_keras.text.tokenization import DEFAULT_TOKENIZATION_MODE, character_class, check_mode


def _re2_escape(codepoint):
    return f"\\x{{{codepoint:X}}}"


_WHITESPACE_CLASS = character_class(_unicode_tables.WHITESPACE, _re2_escape)
_PUNCTUATION_CLASS = character_class(_unicode_tables.PUNCTUATION_RANGES, _re2_escape)
WHITESPACE_PATTERN = f"[{_WHITESPACE_CLASS}]+"
PUNCTUATION_PATTERN = f"[{_PUNCTUATION_CLASS}]"


def tokenize(sentences, mode=DEFAULT_TOKENIZATION_MODE, use_tensorflow_text=False):
    """Splits untokenized sentences into tokens, inside or outside a `tf.function`.

    Args:
        sentences: string tensor of shape `[B]` (or a scalar string), UTF-8.
        mode: str. `"punctuation"` splits on whitespace and makes each punctuation or symbol
            character (Unicode categories P* and S*) its own token; `"whitespace"` only splits on
            whitespace, as `str.split()` does. Defaults to `"punctuation"`.
        use_tensorflow_text: bool. Split with `tensorflow_text.regex_split` instead of core
            TensorFlow ops; same tokens, except that `regex_split` ignores everything after a
            NUL character, and the graph then needs `tensorflow_text`'s custom ops to load.
            Defaults to `False`.

    Returns:
        A string `tf.RaggedTensor` of shape `[B, (T)]` (a 1-D string tensor for a scalar input).

    Example:

    >>> import tensorflow as tf
    >>> tokenize(tf.constant(["Hello, world!", "Hi"])).to_list()
    [[b'Hello', b',', b'world', b'!'], [b'Hi']]
    """
    check_mode(mode)
    sentences = tf.convert_to_tensor(sentences, dtype=tf.string)
    if sentences.shape.rank is not None and sentences.shape.rank > 1:
        raise ValueError(
            "`sentences` must be a string tensor of shape [batch] or a scalar. "
            f"Received: sentences.shape={sentences.shape}"
        )
    if use_tensorflow_text:
        import tensorflow_text  # noqa: PLC0415 (optional dependency, imported only when used)

        if mode == "whitespace":
            return tensorflow_text.regex_split(sentences, WHITESPACE_PATTERN)
        return tensorflow_text.regex_split(
            sentences,
            f"{WHITESPACE_PATTERN}|{PUNCTUATION_PATTERN}",
            keep_delim_regex_pattern=PUNCTUATION_PATTERN,
        )
    text = tf.strings.regex_replace(sentences, WHITESPACE_PATTERN, " ")
    if mode == "punctuation":
        text = tf.strings.regex_replace(text, PUNCTUATION_PATTERN, r" \0 ")
    return tf.strings.split(text)
