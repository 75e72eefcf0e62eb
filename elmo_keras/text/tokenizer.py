"""Deprecated: the TensorFlow tokenizer is `elmo_keras.text.tf_tokenization` (renamed in 0.4).

Kept so that `from elmo_keras.text.tokenizer import tokenize` (0.1.0's README) still works; it
warns once with the new name.
"""

import warnings

from elmo_keras.text.tf_tokenization import tokenize

warnings.warn(
    "elmo_keras.text.tokenizer was renamed elmo_keras.text.tf_tokenization",
    DeprecationWarning,
    stacklevel=2,
)

__all__ = ["tokenize"]
