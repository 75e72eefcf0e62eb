"""The checks of the training settings: one small function per kind of value.

Each check is `check(name, value)`: it returns nothing, or raises a `SettingError` whose
message names the setting as a `{name}` placeholder (`setting_error`). `TrainingRun`'s fields
name their check in their metadata (`training_run.Setting.check`). Pure Python.
"""

import math
import os
import re

from elmo_keras.training.configs import CONFIGS
from elmo_keras.training.run.setting_error import SettingError, escaped
from elmo_keras.validation import check_choice, check_int, check_number


def _field_message(name, error):
    """A `validation` check's message with `{name}` placeholders for the setting."""
    text = escaped(error)
    text = text.replace(f"`{name}`", "{" + name + "}")
    return re.sub(rf"\b{re.escape(name)}=", "{" + name + "__bare}=", text)


def _validation(check):
    """A `validation` check (which raises `ValueError`) as a setting check."""

    def run(name, value):
        try:
            check(name, value)
        except ValueError as error:
            raise SettingError(_field_message(name, error)) from None

    return run


def positive_int(maximum=None):
    """An integer >= 1 (and <= `maximum`)."""
    return _validation(lambda name, value: check_int(name, value, maximum=maximum))


count = _validation(lambda name, value: check_int(name, value, minimum=0))


def _positive_number(name, value):
    check_number(name, value, minimum=0.0)
    if not 0 < value < math.inf:
        raise ValueError(f"`{name}` must be a number > 0. Received: {name}={value!r}")


positive_number = _validation(_positive_number)


def choice(choices):
    """One of `choices` (None among them where it is the default)."""
    return _validation(lambda name, value: check_choice(name, value, choices))


def strategy(choices):
    """A strategy name, or (in Python) a `tf.distribute.Strategy`."""
    by_name = choice(choices)
    return lambda name, value: by_name(name, value) if isinstance(value, str) else None


def _switch(expected, allow_none):
    def check(name, value):
        if not isinstance(value, bool) and not (allow_none and value is None):
            raise ValueError(f"`{name}` must be {expected}. Received: {name}={value!r}")

    return _validation(check)


switch = _switch("True or False", allow_none=False)
optional_switch = _switch("True, False or None", allow_none=True)


def _is_path(value):
    return isinstance(value, str | os.PathLike)


def _paths_check(allow_list):
    def check(name, value):
        ok = _is_path(value)
        if allow_list and isinstance(value, list | tuple):
            ok = bool(value) and all(_is_path(v) for v in value)
        if not ok:
            expected = "a path or glob" + (", or a non-empty list of them" if allow_list else "")
            raise SettingError("{" + name + "} must be " + expected + f". Received: {value!r}")

    return check


path = _paths_check(allow_list=False)
paths = _paths_check(allow_list=True)


def config(name, value):
    """A configuration name, a JSON file or a dict of bilm-tf options."""
    if isinstance(value, dict):
        return
    if not _is_path(value):
        raise SettingError(
            "{config} must be a configuration name, a JSON file or a dict. Received: "
            + escaped(repr(value))
        )
    if os.fspath(value) not in CONFIGS and not os.path.isfile(value):
        raise SettingError(
            "{config} must be one of " + ", ".join(CONFIGS) + f" or a JSON file; got {value!r}"
        )


def _own_dictionary(folder):
    """Whether `folder` is a `save_to_preset` folder of a biLM with its own character
    dictionary (an ELMoForManyLangs model, converted): the trainer makes byte ids."""
    from elmo_keras.models.preset_folder import bilm_config, read_config  # noqa: PLC0415

    try:
        config = read_config(folder) if os.path.isdir(folder) else None
        bilm = None if config is None else bilm_config(config, folder)["config"]
    except ValueError:  # someone else's or a broken file: the later checks say what it is
        return False
    return bilm is not None and bilm.get("char_vocabulary") is not None


def init_from(name, value):
    """A run folder, a preset name, or an (options, weights) pair of paths or URLs."""
    from elmo_keras.presets import PRESETS, efml_preset, is_efml_model  # noqa: PLC0415

    if isinstance(value, list | tuple):
        if len(value) == 2 and all(_is_path(v) for v in value):
            return
        raise SettingError(
            "{init_from} as a pair must hold two paths or URLs (options, weights). "
            f"Received: {value!r}"
        )
    if _is_path(value) and (is_efml_model(os.fspath(value)) or _own_dictionary(value)):
        raise SettingError(  # one line: not supported
            f"{{init_from}}: {os.fspath(value)} is an ELMoForManyLangs model; training from it is "
            "not supported (its training softmax is not published): embed with it instead"
        )
    if not _is_path(value) or (
        os.fspath(value).lower() not in PRESETS and not os.path.isdir(value)
    ):
        names = ", ".join(name for name in PRESETS if not efml_preset(name))
        raise SettingError(
            f"{{init_from}} must be a run folder or a preset ({names}), or in Python an "
            f"(options, weights) pair of paths or URLs; got {value!r}"
        )
