"""ELMo's layers: `CharCNN`, `Highway`, `ProjectedLSTMCell`, `ProjectedBiLSTM`, `ScalarMix`.

Every layer is written with `keras.ops` and runs on every Keras 3 backend (TensorFlow and JAX are
tested); importing this package imports Keras, and TensorFlow only when it is the backend. On
TensorFlow, `ProjectedBiLSTM` runs its inference packed by length through
`elmo_keras.layers.tf_fast_path`, the one TensorFlow-only module here. `ElmoEmbedding` (a biLM plus
its mixes, for task models) lives in `elmo_keras.models`; `from elmo_keras.layers import
ElmoEmbedding` keeps working and loads it on first use, so this package itself never imports
`models`.
"""

import importlib

from elmo_keras.backend import require_tensorflow_backend
from elmo_keras.installs import require_keras_backend

# ruff: noqa: E402 (the check runs before the first import of Keras, in the modules below)
require_keras_backend()  # no Keras or no backend: one line naming the extra, not Keras' error

from elmo_keras.layers.char_cnn import CharCNN
from elmo_keras.layers.highway import Highway
from elmo_keras.layers.projected_bilstm import ProjectedBiLSTM
from elmo_keras.layers.projected_lstm_cell import ProjectedLSTMCell
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
