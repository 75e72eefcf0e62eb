"""`SettingError`: a training setting's wrong value, or settings that do not go together.

Its message is a template with `{field}` placeholders for the `TrainingRun` fields it names, so
that one error reads with the field (`` `batch_size` ``) in Python and with the flag
(`--batch-size`) on the command line (`SettingError.message(FLAGS)`). `SettingsConflict` lists
the settings that disagree with a saved run or an `init_from` source. Pure Python.
"""


def escaped(text):
    """`text` for a `SettingError` template: its braces are not placeholders."""
    return str(text).replace("{", "{{").replace("}", "}}")


class SettingError(ValueError):
    """A setting's wrong value, or settings that do not go together, in one line.

    Args:
        template: str. The message, with `{field}` placeholders naming `TrainingRun` fields.
        conflicts: list of `(field, text)` appended after the template (`SettingsConflict`).
    """

    def __init__(self, template, conflicts=()):
        self.template = template
        self.conflicts = list(conflicts)
        super().__init__(self.message())

    def message(self, names=None):
        """The message with `names` (`{field: label}`, e.g. `FLAGS`) for the fields."""
        labels = _Labels(names or {})
        text = self.template.format_map(labels)
        if self.conflicts:
            listed = "; ".join(f"{labels[field]} {what}" for field, what in self.conflicts)
            text = f"{text}: {listed}"
        return text


class SettingsConflict(SettingError):
    """Settings that disagree with the saved run (`resume`) or the `init_from` source: the
    template, then every conflict as `(field, text)`."""


class _Labels(dict):
    def __init__(self, names):
        super().__init__()
        self.names = names

    def __missing__(self, field):
        if field.endswith("__bare"):  # `name=value` in "Received: ...": no backticks
            field = field.removesuffix("__bare")
            return self.names.get(field, field)
        return self.names.get(field, f"`{field}`")
