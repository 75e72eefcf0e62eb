"""ONNX Runtime client: ELMo embeddings from an exported `.onnx` model, without TensorFlow.

`OnnxEmbedder` prepares character ids in NumPy and runs the model in ONNX Runtime. Nothing in
this package imports TensorFlow or Keras.
"""

from elmo_keras.runtime.onnx_embedder import OnnxEmbedder

__all__ = ["OnnxEmbedder"]
