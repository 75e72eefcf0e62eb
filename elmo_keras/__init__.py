"""elmo-keras: ELMo (Peters et al. 2018) as Keras 3 layers on TensorFlow.

Importing this package is cheap and imports neither TensorFlow nor Keras: the layers and models
load on first use (`elmo_keras.layers.CharCNN`, `elmo_keras.models.BiLM`), and
`elmo_keras.runtime` (the ONNX Runtime client) never imports TensorFlow at all.
"""

__version__ = "0.1.0"
