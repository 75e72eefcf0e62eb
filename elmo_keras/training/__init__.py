"""Pretraining the ELMo biLM: data, configurations, the distributed trainer, WikiText-2.

`configs`, `datasets`, `run_config` and `baselines` are light; the rest imports TensorFlow on
first use. Public entry points: `train` with a `TrainingRun`, `quickstart`,
`export_checkpoint`, `Trainer`, `make_strategy`, `get_config`, `CONFIGS`, `wikitext2`,
`build_vocabulary`, `evaluate_model`, `export_model`, `load_language_model`,
`unigram_perplexity`.

The modules, one concern each: `data` (text -> sentences), `windows` (sentences -> batches,
tf.data), `configs`, `run_config` (`TrainingRun`), `run_folder` (a run's saved settings and
checkpoints), `init_source` (where the weights start: `init_from`), `settings` (a new, started
or resumed run resolved and checked), `distribute` (strategies, chief and workers), `state`
(the checkpointed variables), `checkpoints` (newest readable, orphans, write failures),
`gradients` (freezing, clipping), `trainer` (the step and the loop), `stopping`, `metrics`,
`callbacks`, `evaluation`, `model_files` (the written model), `pipeline` (end to end).
"""

from elmo_keras.training.configs import CONFIGS, get_config
from elmo_keras.training.datasets import wikitext2

_LAZY = {
    "train": "elmo_keras.training.pipeline",
    "quickstart": "elmo_keras.training.pipeline",
    "export_checkpoint": "elmo_keras.training.pipeline",
    "TrainingRun": "elmo_keras.training.run_config",
    "Trainer": "elmo_keras.training.trainer",
    "make_strategy": "elmo_keras.training.distribute",
    "evaluate_model": "elmo_keras.training.evaluation",
    "export_model": "elmo_keras.training.model_files",
    "load_language_model": "elmo_keras.training.model_files",
    "build_vocabulary": "elmo_keras.training.data",
    "unigram_perplexity": "elmo_keras.training.baselines",
}

__all__ = ["CONFIGS", "get_config", "wikitext2", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
