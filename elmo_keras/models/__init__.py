"""ELMo models: `BiLM` (character ids -> layer activations), `ElmoEmbedding` (a biLM and its
mixes, as one layer of a task model), `ElmoPreprocessor` (strings -> character ids),
`TextModel` (a `keras.Model` whose `fit`, `predict` and `evaluate` take NumPy string arrays and
lists of str) and `BiLMEmbedder` (many sentences, batched by length). `save_to_preset` /
`from_preset` write and read preset folders (`elmo_keras.models.preset_folder`).

Imports Keras; TensorFlow only when it is the Keras backend (`BiLM`, `ElmoEmbedding` on
character ids and `BiLMEmbedder` run on JAX too). `load_bilm` and `load_bilm_preset` are
deprecated aliases of `BiLM.from_bilm_tf` and `BiLM.from_preset`.
"""

from elmo_keras.installs import require_keras_backend

# ruff: noqa: E402 (the check runs before the first import of Keras, in the modules below)
require_keras_backend()  # no Keras or no backend: one line naming the extra, not Keras' error

from elmo_keras.models.bilm import BiLM
from elmo_keras.models.bilm_embedder import BiLMEmbedder
from elmo_keras.models.deprecated_loaders import load_bilm, load_bilm_preset
from elmo_keras.models.elmo_embedding import ElmoEmbedding
from elmo_keras.models.elmo_preprocessor import ElmoPreprocessor
from elmo_keras.models.text_model import TextModel

__all__ = [
    "BiLM",
    "BiLMEmbedder",
    "ElmoEmbedding",
    "ElmoPreprocessor",
    "TextModel",
    "load_bilm",
    "load_bilm_preset",
]
