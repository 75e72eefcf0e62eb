"""Pretraining the ELMo biLM: data, configurations, the TensorFlow and JAX trainers, WikiText-2.

`configs`, `datasets`, `training_run` and `baselines` are light; the rest imports Keras (and
TensorFlow or JAX, as the backend is) on first use. Public entry points: `train` with a
`TrainingRun`, `quickstart`, `export_checkpoint`, `Trainer`, `JaxTrainer`, `make_strategy`,
`get_config`, `CONFIGS`, `wikitext2`, `build_vocabulary`, `evaluate_model`, `export_model`,
`load_language_model`, `unigram_perplexity`.

The modules, one concern each: `data` (text -> sentences), `tokenization` (`tokenize_lines`),
`line_index` (the whole-text shuffle's index of line offsets), `long_line` and
`streamed_sentence` (a line over 256 KiB streamed from its file), `file_changes` (a training
file changed under the run), `windows` (sentences -> batches, tf.data, prefetching),
`configs` (model configurations), `training_run` (the list of settings
and `TrainingRun`), `setting_error` (a setting's wrong value, named by field or flag),
`run_folder` (a run's saved settings and checkpoints), `init_source` (where
the weights start: `init_from`), `run_plan` (a new, started or resumed run resolved and
checked), `model_setup` (the model and optimizer a run starts with), `trainer_base` (the loop,
evaluation and output both trainers share), `trainer` (TensorFlow: the `tf.distribute` step),
`state` (its checkpointed variables), `distribute` (strategies, JAX devices, chief and
workers), `gradients` (freezing, clipping under a strategy), `jax_trainer` and `jax_steps` (the
JAX trainer and its compiled step), `checkpoints` (newest readable, orphans, write failures),
`array_checkpoints` (the JAX trainer's `.npz` checkpoints), `stopping`, `metrics`,
`event_file` (TensorBoard files without TensorFlow), `callbacks`, `evaluation`, `model_files`
(the written model), `pipeline` (end to end).
"""

from elmo_keras.training.configs import CONFIGS, get_config
from elmo_keras.training.datasets import wikitext2

_LAZY = {
    "train": "elmo_keras.training.pipeline",
    "quickstart": "elmo_keras.training.pipeline",
    "export_checkpoint": "elmo_keras.training.pipeline",
    "TrainingRun": "elmo_keras.training.training_run",
    "Trainer": "elmo_keras.training.trainer",
    "JaxTrainer": "elmo_keras.training.jax_trainer",
    "make_strategy": "elmo_keras.training.distribute",
    "evaluate_model": "elmo_keras.training.evaluation",
    "export_model": "elmo_keras.training.model_files",
    "load_language_model": "elmo_keras.training.model_files",
    "build_vocabulary": "elmo_keras.training.data",
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
