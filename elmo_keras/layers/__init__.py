"""ELMo's layers: `CharCNN`, `Highway`, `ProjectedLSTMCell`, `ProjectedBiLSTM`, `ScalarMix`.

Importing this module imports TensorFlow and Keras, whatever the Keras backend. `Highway`,
`ScalarMix` and `CharCNN` are written with `keras.ops` and run on any Keras 3 backend (JAX is
tested); `ProjectedLSTMCell` and `ProjectedBiLSTM` are TensorFlow code and raise a
`RuntimeError` when constructed under another backend (`require_tensorflow_backend`, see
docs/backends.md). `ElmoEmbedding` (a biLM plus its mixes, for task models) lives in
`elmo_keras.models`; `from elmo_keras.layers import ElmoEmbedding` keeps working and loads it on
first use, so this package itself never imports `models`.
"""

import importlib

from elmo_keras.layers.char_cnn import CharCNN
from elmo_keras.layers.highway import Highway
from elmo_keras.layers.projected_bilstm import ProjectedBiLSTM
from elmo_keras.layers.projected_lstm_cell import ProjectedLSTMCell, require_tensorflow_backend
from elmo_keras.layers.scalar_mix import ScalarMix

__all__ = [
    "CharCNN",
    "ElmoEmbedding",
    "Highway",
    "ProjectedBiLSTM",
    "ProjectedLSTMCell",
    "ScalarMix",
    "require_tensorflow_backend",
]


def __getattr__(name):
    # The one name served from a higher floor, for `from elmo_keras.layers import ElmoEmbedding`.
    if name == "ElmoEmbedding":
        return importlib.import_module("elmo_keras.models.elmo_embedding").ElmoEmbedding
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
