"""ELMo models: `BiLM` (character ids -> layer activations), `ElmoEmbedding` (a biLM and its
mixes, as one layer of a task model), `TextModel` (a `keras.Model` whose `fit`, `predict` and
`evaluate` take NumPy string arrays and lists of str) and `BiLMEmbedder` (many sentences,
batched by length).

Imports Keras; TensorFlow only when it is the Keras backend (`BiLM`, `ElmoEmbedding` on
character ids and `BiLMEmbedder` run on JAX too). `load_bilm` and `load_bilm_preset` are
deprecated aliases of `BiLM.from_bilm_tf` and `BiLM.from_preset`.
"""

from elmo_keras.models.bilm import BiLM, load_bilm, load_bilm_preset
from elmo_keras.models.bilm_embedder import BiLMEmbedder
from elmo_keras.models.elmo_embedding import ElmoEmbedding
from elmo_keras.models.text_model import TextModel

__all__ = ["BiLM", "BiLMEmbedder", "ElmoEmbedding", "TextModel", "load_bilm", "load_bilm_preset"]
