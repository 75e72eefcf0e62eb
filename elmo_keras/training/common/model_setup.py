"""The language model and optimizer a run starts with, the same on every backend.

Imports Keras, not TensorFlow or JAX: `state.TrainingState` (TensorFlow) calls these under its
strategy's scope, `jax_trainer.JaxTrainer` under its `keras.distribution`.
"""

import sys

import keras

from elmo_keras.models.bilm import BiLM
from elmo_keras.models.language_model import LanguageModel
from elmo_keras.training.configs import TrainingConfig


def make_optimizer(config):
    """bilm-tf's Adagrad (accumulators start at 1.0) or Adam, at the configuration's rate."""
    lr = float(config.learning_rate)
    if config.optimizer == "adagrad":
        return keras.optimizers.Adagrad(learning_rate=lr, initial_accumulator_value=1.0)
    return keras.optimizers.Adam(learning_rate=lr)


def seed_everything(seed):
    """`keras.utils.set_random_seed(seed)`, without importing TensorFlow on another backend.

    Keras seeds TensorFlow too whenever it is installed, importing it (seconds, and hundreds of
    MB) into a JAX process that never uses it; there it is skipped unless TensorFlow is
    already loaded. Python's, NumPy's and Keras' own generators are seeded either way.
    """
    if keras.config.backend() == "tensorflow" or "tensorflow" in sys.modules:
        keras.utils.set_random_seed(seed)
        return
    try:
        from keras.src.utils import module_utils  # noqa: PLC0415

        lazy = module_utils.tensorflow
        previous = lazy.__dict__["_available"]
    except (ImportError, AttributeError, KeyError):  # another Keras: seed as it does
        keras.utils.set_random_seed(seed)
        return
    lazy._available = False
    try:
        keras.utils.set_random_seed(seed)
    finally:
        lazy._available = previous


def make_language_model(config, vocabulary_size, seed=0, mixed_precision=None):
    """A built `LanguageModel` for a training configuration, its weights seeded by `seed`.

    Args:
        config: `TrainingConfig` (or what `TrainingConfig.parse` takes).
        vocabulary_size: int. Words of the softmax.
        seed: int. Seeds the initial weights (`keras.utils.set_random_seed`).
        mixed_precision: None or `"bfloat16"`: the biLM computes in bfloat16, its variables and
            the softmax stay float32.
    """
    config = TrainingConfig.parse(config)
    kwargs = {"dropout": float(config.dropout)}
    if mixed_precision:
        kwargs["dtype"] = "mixed_bfloat16"
    seed_everything(int(seed))
    bilm = BiLM.from_options(config, "the training configuration", **kwargs)
    model = LanguageModel(bilm, vocabulary_size, config.samples)
    model.build()
    return model
