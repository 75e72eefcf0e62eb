"""Named training configurations, in bilm-tf's options format (pure Python).

A configuration is a dict with bilm-tf's keys: `lstm` and `char_cnn` (the architecture, as in
`options.json`) plus the training keys `dropout`, `unroll_steps`, `batch_size`,
`n_negative_samples_batch`, `all_clip_norm_val`, `learning_rate`, `optimizer`, `n_epochs`.
`n_tokens_vocab` is filled in from the vocabulary. `char_cnn.n_characters` is 262 (the inference
convention of this package; a bilm-tf training file's 261 is read as 262).
"""

import copy
import json
import os

ORIGINAL_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]

_TRAINING_DEFAULTS = {
    "bidirectional": True,
    "dropout": 0.1,
    "unroll_steps": 20,
    "batch_size": 128,
    "n_negative_samples_batch": 8192,
    "all_clip_norm_val": 10.0,
    "learning_rate": 0.2,
    "optimizer": "adagrad",
    "n_epochs": 10,
}


def _config(dim, projection_dim, n_highway, filters, char_dim=16, n_layers=2, max_chars=50,
            activation="relu", **training):
    config = {
        "lstm": {
            "dim": dim,
            "projection_dim": projection_dim,
            "n_layers": n_layers,
            "cell_clip": 3,
            "proj_clip": 3,
            "use_skip_connections": True,
        },
        "char_cnn": {
            "embedding": {"dim": char_dim},
            "filters": filters,
            "n_highway": n_highway,
            "n_characters": 262,
            "max_characters_per_token": max_chars,
            "activation": activation,
        },
    }
    config.update(copy.deepcopy(_TRAINING_DEFAULTS))
    config.update(training)
    return config


CONFIGS = {
    # For tests: a few thousand parameters besides the softmax.
    "tiny": _config(
        32, 16, 1, [[1, 8], [2, 8], [3, 16], [4, 16]], char_dim=8,
        batch_size=16, n_negative_samples_batch=64,
    ),
    # The README's CPU demo on WikiText-2: reduced char CNN, 512 cells, 128 projection. Adam:
    # in a few minutes on 2 cores it learns much faster than bilm-tf's Adagrad 0.2 (sampled
    # training perplexity 1241 vs 2911 after 250 steps, measured here).
    "cpu": _config(
        512, 128, 1, [[1, 32], [2, 32], [3, 64], [4, 128], [5, 128]], char_dim=16,
        batch_size=32, n_negative_samples_batch=2048, optimizer="adam", learning_rate=0.002,
    ),
    # The published sizes (Peters et al. 2018; bilm-tf's README).
    "small": _config(1024, 128, 1, ORIGINAL_FILTERS),
    "medium": _config(2048, 256, 1, ORIGINAL_FILTERS),
    "original": _config(4096, 512, 2, ORIGINAL_FILTERS),
}


def get_config(name_or_path):
    """A configuration by name (`tiny`, `cpu`, `small`, `medium`, `original`) or JSON file.

    A JSON file holds bilm-tf's options keys; missing training keys take the defaults above
    (bilm-tf's values). Returns a new dict.
    """
    if isinstance(name_or_path, dict):
        config = copy.deepcopy(name_or_path)
    elif name_or_path in CONFIGS:
        return copy.deepcopy(CONFIGS[name_or_path])
    elif isinstance(name_or_path, str | os.PathLike) and os.path.isfile(name_or_path):
        with open(name_or_path, encoding="utf-8") as f:
            try:
                config = json.load(f)
            except json.JSONDecodeError as error:
                raise ValueError(
                    f"`config` file {name_or_path} is not valid JSON: {error}"
                ) from None
    else:
        raise ValueError(
            f"`config` must be one of {sorted(CONFIGS)} or a JSON file of bilm-tf options. "
            f"Received: config={name_or_path!r}"
        )
    return normalize_config(config)


def normalize_config(config):
    """Fills training defaults and checks the architecture keys of a bilm-tf options dict."""
    if not isinstance(config, dict) or "lstm" not in config or "char_cnn" not in config:
        raise ValueError(
            "A configuration must be a dict with the bilm-tf keys `lstm` and `char_cnn`. "
            f"Received keys: {sorted(config) if isinstance(config, dict) else type(config)}"
        )
    out = copy.deepcopy(_TRAINING_DEFAULTS)
    out.update(copy.deepcopy(config))
    lstm, cnn = out["lstm"], out["char_cnn"]
    for key in ("dim", "projection_dim"):
        if key not in lstm:
            raise ValueError(f"`lstm.{key}` is missing from the configuration.")
    lstm.setdefault("n_layers", 2)
    lstm.setdefault("cell_clip", 3)
    lstm.setdefault("proj_clip", 3)
    lstm.setdefault("use_skip_connections", True)
    for key in ("embedding", "filters", "n_highway"):
        if key not in cnn:
            raise ValueError(f"`char_cnn.{key}` is missing from the configuration.")
    cnn.setdefault("max_characters_per_token", 50)
    cnn.setdefault("activation", "relu")
    if cnn.get("n_characters", 262) == 261:
        cnn["n_characters"] = 262  # bilm-tf's training count; this package adds the padding id
    cnn["n_characters"] = cnn.get("n_characters", 262)
    if out["optimizer"] not in ("adagrad", "adam"):
        raise ValueError(
            f"`optimizer` must be 'adagrad' or 'adam'. Received: optimizer={out['optimizer']!r}"
        )
    return out


def architecture_options(config):
    """The architecture part of a configuration: what `options.json` holds for inference."""
    return {"lstm": copy.deepcopy(config["lstm"]), "char_cnn": copy.deepcopy(config["char_cnn"])}
