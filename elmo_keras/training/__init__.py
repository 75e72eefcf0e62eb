"""Pretraining the ELMo biLM: data, configurations, the distributed trainer, WikiText-2.

`configs`, `datasets` and `baselines` are light; the rest imports TensorFlow on first use.
Public entry points: `train`, `quickstart`, `export_checkpoint`, `Trainer`, `get_config`, `CONFIGS`, `wikitext2`,
`build_vocabulary`, `evaluate_model`, `export_model`, `load_language_model`.
"""

from elmo_keras.training.configs import CONFIGS, get_config
from elmo_keras.training.datasets import wikitext2

_LAZY = {
    "train": "elmo_keras.training.pipeline",
    "quickstart": "elmo_keras.training.pipeline",
    "export_checkpoint": "elmo_keras.training.pipeline",
    "Trainer": "elmo_keras.training.trainer",
    "make_strategy": "elmo_keras.training.trainer",
    "evaluate_model": "elmo_keras.training.trainer",
    "export_model": "elmo_keras.training.trainer",
    "load_language_model": "elmo_keras.training.trainer",
    "build_vocabulary": "elmo_keras.training.data",
    "unigram_perplexity": "elmo_keras.training.baselines",
}

__all__ = ["CONFIGS", "get_config", "wikitext2", *_LAZY]


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
