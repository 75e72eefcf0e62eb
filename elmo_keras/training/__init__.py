"""Pretraining the ELMo biLM: data, configurations, the TensorFlow and JAX trainers, WikiText-2.

`configs`, `datasets`, `training_run` and `baselines` are light; the rest imports Keras (and
TensorFlow or JAX, as the backend is) on first use. Public entry points: `train` with a
`TrainingRun`, `quickstart`, `export_checkpoint`, `Trainer`, `JaxTrainer`, `make_strategy`,
`get_config`, `CONFIGS`, `wikitext2`, `build_vocabulary`, `evaluate_model`, `save_language_model`,
`load_language_model`, `unigram_perplexity`.

The modules, grouped by what they are: `run` (the run: its settings, their checks, its saved
record, where its weights start, its folder and lock, the plan of a new, started or resumed
run), `feed` (text to sentences to
batches), `tf` (the TensorFlow trainer), `jax` (the JAX trainer), `common` (what both trainers
use: the loop, the steps' arithmetic, checkpoints, metrics, evaluation, devices). Here:
`backends` (a Keras backend's trainer, evaluation step and checkpoint format), `configs` (model
configurations), `datasets` (WikiText-2), `baselines`, `model_files` (the written model) and
`pipeline` (end to end). A run's settings are one `run.training_run.TrainingRun`, its saved
record one `run.run_record.RunRecord`, its configuration one `configs.TrainingConfig`.
"""

from elmo_keras.training.configs import CONFIGS, get_config
from elmo_keras.training.datasets import wikitext2

_LAZY = {
    "train": "elmo_keras.training.pipeline",
    "quickstart": "elmo_keras.training.pipeline",
    "export_checkpoint": "elmo_keras.training.pipeline",
    "TrainingRun": "elmo_keras.training.run.training_run",
    "Trainer": "elmo_keras.training.tf.trainer",
    "JaxTrainer": "elmo_keras.training.jax.jax_trainer",
    "make_strategy": "elmo_keras.training.common.distribute",
    "evaluate_model": "elmo_keras.training.common.evaluation",
    "save_language_model": "elmo_keras.training.model_files",
    "export_model": "elmo_keras.training.model_files",  # deprecated: save_language_model
    "load_language_model": "elmo_keras.training.model_files",
    "build_vocabulary": "elmo_keras.training.feed.data",
    "unigram_perplexity": "elmo_keras.training.baselines",
}

# These need no Keras: the settings, strategies by name, the vocabulary and its baseline.
_PLAIN_PYTHON = {"TrainingRun", "make_strategy", "build_vocabulary", "unigram_perplexity"}

__all__ = ["CONFIGS", "get_config", "wikitext2", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        if name not in _PLAIN_PYTHON:
            from elmo_keras.installs import require_keras_backend

            require_keras_backend()
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
