"""Tokenizing training text: `tokenize_lines`, and the checks of the `tokenization_mode` keyword
(and of its deprecated name, `tokenization=`) that every entry point taking it shares.

`tokenize_lines` uses tensorflow-text on the TensorFlow backend, its Python twin elsewhere.
"""

from elmo_keras.backend import keras_backend
from elmo_keras.text.tokenization import TOKENIZATION_MODES, tokenize_python
from elmo_keras.validation import check_choice, renamed_argument

# `renamed_argument(kwargs, *TOKENIZATION_RENAMED, ...)`: the old and the new keyword.
TOKENIZATION_RENAMED = ("tokenization", "tokenization_mode")


def no_other_arguments(kwargs, owner):
    """Raises the `TypeError` Python raises for an unknown keyword argument, if any is left."""
    if kwargs:
        raise TypeError(f"{owner}() got an unexpected keyword argument {next(iter(kwargs))!r}")


def tokenize_lines(lines, tokenization_mode="whitespace", **kwargs):
    """Tokenizes a list of lines; returns a list of lists of str.

    On the TensorFlow backend with tensorflow-text (`elmo_keras.text.tf_tokenization`), elsewhere
    with its Python twin (`elmo_keras.text.tokenization.tokenize_python`, no TensorFlow): the
    same tokens, except that tensorflow-text drops everything from a NUL character (U+0000) of
    a line on.

    Args:
        lines: list of str.
        tokenization_mode: `"whitespace"` or `"punctuation"` (see
            `elmo_keras.text.tokenization`). Defaults to `"whitespace"`. (`tokenization=` is its
            deprecated name.)
    """
    tokenization_mode = renamed_argument(
        kwargs, *TOKENIZATION_RENAMED, tokenization_mode, "whitespace", "tokenize_lines"
    )
    no_other_arguments(kwargs, "tokenize_lines")
    check_choice("tokenization_mode", tokenization_mode, TOKENIZATION_MODES)
    return tokenize_on(lines, tokenization_mode, keras_backend() if lines else None)


def tokenize_on(lines, tokenization_mode, backend):
    """`tokenize_lines` as on the Keras backend `backend` (a process that has not imported
    Keras: a feed's worker process)."""
    if not lines:
        return []
    if backend != "tensorflow":
        return [tokenize_python(line, tokenization_mode) for line in lines]
    from elmo_keras.text.tf_tokenization import tokenize

    ragged = tokenize(lines, mode=tokenization_mode, use_tensorflow_text=True)
    return [[token.decode("utf-8") for token in row] for row in ragged.to_list()]
