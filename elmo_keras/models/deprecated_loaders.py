"""The loaders of 0.1.0 that `BiLM`'s class methods replaced; each warns and delegates."""

import warnings

from elmo_keras.models.bilm import BiLM


def _deprecated(old, new):
    warnings.warn(
        f"`{old}` is deprecated and will be removed; use `{new}`.", DeprecationWarning, stacklevel=3
    )


def load_bilm(options_path, weights_path, check_finite=True, **kwargs):
    """Deprecated alias of `BiLM.from_bilm_tf(options_path, weights_path)`."""
    _deprecated("load_bilm", "BiLM.from_bilm_tf")
    return BiLM.from_bilm_tf(options_path, weights_path, check_finite=check_finite, **kwargs)


def load_bilm_preset(preset, cache_dir=None, progress=True, check_finite=True, **kwargs):
    """Deprecated alias of `BiLM.from_preset(preset)`."""
    _deprecated("load_bilm_preset", "BiLM.from_preset")
    return BiLM.from_preset(
        preset, cache_dir=cache_dir, progress=progress, check_finite=check_finite, **kwargs
    )
