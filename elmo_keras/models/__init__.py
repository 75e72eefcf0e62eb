"""ELMo models: `BiLM` (character ids -> layer activations). Imports TensorFlow and Keras."""

from elmo_keras.models.bilm import BiLM

__all__ = ["BiLM"]
