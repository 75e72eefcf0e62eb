"""ELMo's layers: `CharCNN`, `Highway`, `ProjectedLSTMCell`, `ProjectedBiLSTM`, `ScalarMix`.

Importing this module imports TensorFlow and Keras.
"""

from elmo_keras.layers.char_cnn import CharCNN
from elmo_keras.layers.elmo_embedding import ElmoEmbedding
from elmo_keras.layers.highway import Highway
from elmo_keras.layers.projected_bilstm import ProjectedBiLSTM, ProjectedLSTMCell
from elmo_keras.layers.scalar_mix import ScalarMix

__all__ = [
    "CharCNN",
    "ElmoEmbedding",
    "Highway",
    "ProjectedBiLSTM",
    "ProjectedLSTMCell",
    "ScalarMix",
]
