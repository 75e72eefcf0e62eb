"""Text handling: tokenization, character ids and word vocabularies.

This package imports no TensorFlow: what it exports here is pure Python and NumPy, shared with
the ONNX Runtime client. The TensorFlow twins live in submodules imported on demand:
`elmo_keras.text.tf_char_ids` (`tokens_to_char_ids`, `dense_tokens_to_char_ids`) and
`elmo_keras.text.tf_tokenization` (`tokenize`).
"""

from elmo_keras.text.char_ids import (
    BOS_CHAR_ID,
    BOS_TOKEN,
    BOW_CHAR_ID,
    EOS_CHAR_ID,
    EOS_TOKEN,
    EOW_CHAR_ID,
    MAX_CHARACTERS_PER_TOKEN,
    MAX_TOKEN_BYTES,
    N_CHARACTERS,
    PAD_CHAR_ID,
    batch_to_char_ids,
    bos_char_ids,
    eos_char_ids,
    token_to_char_ids,
)
from elmo_keras.text.tokenization import (
    DEFAULT_TOKENIZATION_MODE,
    TOKENIZATION_MODES,
    tokenize_python,
)
from elmo_keras.text.vocabulary import UNK_TOKEN, Vocabulary

__all__ = [
    "BOS_CHAR_ID",
    "BOS_TOKEN",
    "BOW_CHAR_ID",
    "DEFAULT_TOKENIZATION_MODE",
    "EOS_CHAR_ID",
    "EOS_TOKEN",
    "EOW_CHAR_ID",
    "MAX_CHARACTERS_PER_TOKEN",
    "MAX_TOKEN_BYTES",
    "N_CHARACTERS",
    "PAD_CHAR_ID",
    "TOKENIZATION_MODES",
    "UNK_TOKEN",
    "Vocabulary",
    "batch_to_char_ids",
    "bos_char_ids",
    "eos_char_ids",
    "token_to_char_ids",
    "tokenize_python",
]


# The TensorFlow twins, loaded when first named (`elmo_keras.text.tf_char_ids`), so that this
# package stays free of TensorFlow for the ONNX Runtime client and the JAX backend.
_TENSORFLOW_SUBMODULES = ("tf_char_ids", "tf_tokenization", "tokenizer")  # tokenizer: 0.1-0.3 name


def __getattr__(name):
    if name in _TENSORFLOW_SUBMODULES:
        import importlib  # noqa: PLC0415

        from elmo_keras.installs import require_module  # noqa: PLC0415

        require_module("tensorflow", f"elmo_keras.text.{name}", "tensorflow")
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
