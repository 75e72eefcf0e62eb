"""ELMo models: `BiLM` (character ids -> layer activations), `ElmoEmbedding` (a biLM and its
mixes, as one layer of a task model) and `BiLMEmbedder` (many sentences, batched by length).

Imports TensorFlow and Keras.
"""

from elmo_keras.models.bilm import BiLM, load_bilm, load_bilm_preset
from elmo_keras.models.bilm_embedder import BiLMEmbedder
from elmo_keras.models.elmo_embedding import ElmoEmbedding

__all__ = ["BiLM", "BiLMEmbedder", "ElmoEmbedding", "load_bilm", "load_bilm_preset"]
