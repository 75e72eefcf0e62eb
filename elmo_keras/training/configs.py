"""Named training configurations, in bilm-tf's options format (pure Python).

A configuration is a dict with bilm-tf's keys: `lstm` and `char_cnn` (the architecture, as in
`options.json`) plus the training keys `dropout`, `unroll_steps`, `batch_size`,
`n_negative_samples_batch`, `all_clip_norm_val`, `learning_rate`, `optimizer`, `n_epochs`.
`n_tokens_vocab` is filled in from the vocabulary. `char_cnn.n_characters` is 262 (the inference
convention of this package; a bilm-tf training file's 261 is read as 262). The architecture keys
are checked by `elmo_keras.options.options_to_bilm_kwargs`, the training keys here.
"""

import copy
import dataclasses
import json
import os

from elmo_keras.options import DEFAULT_FILTERS, options_to_bilm_kwargs
from elmo_keras.text.char_ids import N_CHARACTERS
from elmo_keras.validation import check_choice, check_int, check_number

OPTIMIZERS = ("adagrad", "adam")
# The published models' filters, as JSON lists.
_PUBLISHED_FILTERS = [list(pair) for pair in DEFAULT_FILTERS]

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


def _config(
    dim,
    projection_dim,
    n_highway,
    filters,
    char_dim=16,
    n_layers=2,
    max_chars=50,
    activation="relu",
    **training,
):
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
            "n_characters": N_CHARACTERS,
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
        32,
        16,
        1,
        [[1, 8], [2, 8], [3, 16], [4, 16]],
        char_dim=8,
        batch_size=16,
        n_negative_samples_batch=64,
    ),
    # The README's CPU demo on WikiText-2: reduced char CNN, 512 cells, 128 projection. Adam:
    # in a few minutes on 2 cores it learns much faster than bilm-tf's Adagrad 0.2 (sampled
    # training perplexity 1241 vs 2911 after 250 steps, measured here).
    "cpu": _config(
        512,
        128,
        1,
        [[1, 32], [2, 32], [3, 64], [4, 128], [5, 128]],
        char_dim=16,
        batch_size=32,
        n_negative_samples_batch=2048,
        optimizer="adam",
        learning_rate=0.002,
    ),
    # The published sizes (Peters et al. 2018; bilm-tf's README).
    "small": _config(1024, 128, 1, _PUBLISHED_FILTERS),
    "medium": _config(2048, 256, 1, _PUBLISHED_FILTERS),
    "original": _config(4096, 512, 2, _PUBLISHED_FILTERS),
}


def get_config(name_or_path):
    """A configuration by name (`tiny`, `cpu`, `small`, `medium`, `original`) or JSON file.

    A JSON file holds bilm-tf's options keys; missing training keys take the defaults above
    (bilm-tf's values). Returns a new dict.
    """
    config = _read(name_or_path)
    return config if _named(name_or_path) else normalize_config(config)


def _named(name_or_path):
    return not isinstance(name_or_path, dict) and name_or_path in CONFIGS


def _read(name_or_path):
    """A copy of a named configuration, of a dict, or a JSON file's, as it is (not checked)."""
    if isinstance(name_or_path, dict):
        return copy.deepcopy(name_or_path)
    if _named(name_or_path):
        return copy.deepcopy(CONFIGS[name_or_path])
    if isinstance(name_or_path, str | os.PathLike) and os.path.isfile(name_or_path):
        with open(name_or_path, encoding="utf-8") as f:
            try:
                return json.load(f)
            except json.JSONDecodeError as error:
                raise ValueError(
                    f"`config` file {name_or_path} is not valid JSON: {error}"
                ) from None
    raise ValueError(
        f"`config` must be one of {sorted(CONFIGS)} or a JSON file of bilm-tf options. "
        f"Received: config={name_or_path!r}"
    )


_LSTM_DEFAULTS = {"n_layers": 2, "cell_clip": 3, "proj_clip": 3, "use_skip_connections": True}
_CHAR_CNN_DEFAULTS = {
    "max_characters_per_token": 50,
    "activation": "relu",
    "n_characters": N_CHARACTERS,
}


# The largest global batch (rows) and window (tokens): bilm-tf ran 128 rows per GPU; a larger
# value is a typo, refused in one line rather than by a failed allocation.
MAX_BATCH_SIZE = 65_536
MAX_UNROLL_STEPS = 10_000


def _check_training_keys(config):
    check_int("batch_size", config["batch_size"], maximum=MAX_BATCH_SIZE)
    check_int("unroll_steps", config["unroll_steps"], maximum=MAX_UNROLL_STEPS)
    check_int("n_epochs", config["n_epochs"])
    check_number(
        "dropout", config.get("dropout", 0.0), minimum=0.0, maximum=1.0, include_maximum=False
    )
    check_number("learning_rate", config["learning_rate"], minimum=0.0)
    if config.get("n_negative_samples_batch") is not None:
        check_int("n_negative_samples_batch", config["n_negative_samples_batch"], minimum=0)
    if config.get("all_clip_norm_val") is not None:
        check_number("all_clip_norm_val", config["all_clip_norm_val"], minimum=0.0)
    check_choice("optimizer", config["optimizer"], OPTIMIZERS)


def normalize_config(config):
    """Fills the defaults of a bilm-tf options dict and checks every key; returns a new dict."""
    return _normalized(config)[0]


def _normalized(config):
    """`normalize_config`'s dict, and the `BiLM` arguments of its architecture."""
    if not isinstance(config, dict) or "lstm" not in config or "char_cnn" not in config:
        raise ValueError(
            "A configuration must be a dict with the bilm-tf keys `lstm` and `char_cnn`. "
            f"Received keys: {sorted(config) if isinstance(config, dict) else type(config)}"
        )
    out = copy.deepcopy(_TRAINING_DEFAULTS)
    out.update(copy.deepcopy(config))
    for section, defaults in (("lstm", _LSTM_DEFAULTS), ("char_cnn", _CHAR_CNN_DEFAULTS)):
        if isinstance(out[section], dict):
            out[section] = {**defaults, **out[section]}
    cnn = out["char_cnn"]
    if isinstance(cnn, dict) and cnn.get("n_characters") == N_CHARACTERS - 1:
        out["char_cnn"]["n_characters"] = N_CHARACTERS  # bilm-tf's training count
    kwargs = options_to_bilm_kwargs(architecture_options(out), "the training configuration")
    _check_training_keys(out)
    return out, kwargs


def architecture_options(config):
    """The architecture part of a configuration: what `options.json` holds for inference."""
    return {"lstm": copy.deepcopy(config["lstm"]), "char_cnn": copy.deepcopy(config["char_cnn"])}


_TRAINING_KEYS = tuple(_TRAINING_DEFAULTS)


@dataclasses.dataclass(frozen=True)
class TrainingConfig:
    """A training configuration, parsed and checked once (`parse`); what the trainers, the
    memory check and `BiLM.from_options` take. `to_options()` is bilm-tf's options dict.

    Attributes:
        architecture: dict. `lstm` and `char_cnn`, every key spelled out (`options.json`).
        bilm_kwargs: dict. The `BiLM` constructor's arguments of that architecture.
        dropout, unroll_steps, batch_size, n_negative_samples_batch, all_clip_norm_val,
            learning_rate, optimizer, n_epochs, bidirectional: the training keys.
        n_tokens_vocab: int or None. The vocabulary's size, once known.
        other: dict. Any other key of the options, written back as it was.
    """

    architecture: dict
    bilm_kwargs: dict
    bidirectional: bool
    dropout: float
    unroll_steps: int
    batch_size: int
    n_negative_samples_batch: int | None
    all_clip_norm_val: float | None
    learning_rate: float
    optimizer: str
    n_epochs: int
    n_tokens_vocab: int | None = None
    other: dict = dataclasses.field(default_factory=dict)

    @classmethod
    def parse(cls, config):
        """The `TrainingConfig` of a name, a JSON file or an options dict (`get_config`); a
        `TrainingConfig` is returned as it is."""
        if isinstance(config, TrainingConfig):
            return config
        options, kwargs = _normalized(_read(config))
        architecture = architecture_options(options)
        known = {"lstm", "char_cnn", "n_tokens_vocab", *_TRAINING_KEYS}
        return cls(
            architecture,
            kwargs,
            **{key: options[key] for key in _TRAINING_KEYS},
            n_tokens_vocab=options.get("n_tokens_vocab"),
            other={key: value for key, value in options.items() if key not in known},
        )

    def replace(self, **changes):
        """A copy with other training keys (checked), e.g. `replace(batch_size=64)`."""
        config = dataclasses.replace(self, **changes)
        _check_training_keys(config.to_options())
        return config

    @property
    def samples(self):
        """Sampled-softmax candidates (0: the full softmax)."""
        return int(self.n_negative_samples_batch or 0)

    def to_options(self):
        """bilm-tf's options dict of this configuration (a new dict)."""
        options = {key: getattr(self, key) for key in _TRAINING_KEYS}
        options.update(copy.deepcopy(self.architecture))
        options.update(copy.deepcopy(self.other))
        if self.n_tokens_vocab is not None:
            options["n_tokens_vocab"] = self.n_tokens_vocab
        return options


def __getattr__(name):
    if name == "ORIGINAL_FILTERS":  # the name before `elmo_keras.options.DEFAULT_FILTERS`
        import warnings

        warnings.warn(
            "`configs.ORIGINAL_FILTERS` is deprecated; use `elmo_keras.options.DEFAULT_FILTERS`.",
            DeprecationWarning,
            stacklevel=2,
        )
        return [list(pair) for pair in DEFAULT_FILTERS]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
