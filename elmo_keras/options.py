"""bilm-tf's `options.json`: the one owner of the format, read and written, both ways.

Plain Python (no TensorFlow). An options dict describes a biLM architecture with bilm-tf's keys:

```
{"lstm": {"dim": 4096, "projection_dim": 512, "n_layers": 2, "cell_clip": 3, "proj_clip": 3,
          "use_skip_connections": true},
 "char_cnn": {"embedding": {"dim": 16}, "filters": [[1, 32], ...], "n_highway": 2,
              "n_characters": 262, "max_characters_per_token": 50, "activation": "relu"}}
```

`options_to_bilm_kwargs` turns it into `elmo_keras.models.BiLM` keyword arguments and
`bilm_kwargs_to_options` goes back. Every value is checked: integer fields must be integers
(`64.7` is an error, not 64), an unknown key inside a section is an error (a misspelt optional
key would silently take its default), and an error names the file, the key, the expected and
the received value. `n_characters` is 262 (the inference convention); bilm-tf's training value
261 gets an error that explains it.
"""

import json
import math
import numbers
import pathlib

from elmo_keras.file_io.files import write_text
from elmo_keras.text.char_ids import MAX_CHARACTERS_PER_TOKEN, N_CHARACTERS
from elmo_keras.validation import check_regular_file

ACTIVATIONS = ("relu", "tanh")
# Every key bilm-tf's sections may hold; anything else is refused.
SECTION_KEYS = {
    "lstm": {"dim", "projection_dim", "n_layers", "cell_clip", "proj_clip", "use_skip_connections"},
    "char_cnn": {
        "embedding",
        "filters",
        "n_highway",
        "n_characters",
        "max_characters_per_token",
        "activation",
    },
    "char_cnn.embedding": {"dim"},
}

# The published "Original" model's character filters, (width, count): 2048 in all. The default
# of `CharCNN`, `BiLM` and the published training configurations.
DEFAULT_FILTERS = ((1, 32), (2, 32), (3, 64), (4, 128), (5, 256), (6, 512), (7, 1024))


# The largest value each size may take: far above every published model (lstm.dim 4096,
# projection 512, 2 layers, 2 highways, embedding 16, 50 characters, 2048 filters), and low
# enough that a mistyped size is one clear error instead of a failed multi-GB allocation.
LIMITS = {
    "lstm.dim": 65_536,
    "lstm.projection_dim": 16_384,
    "lstm.n_layers": 64,
    "char_cnn.embedding.dim": 4_096,
    "char_cnn.n_highway": 64,
    "char_cnn.max_characters_per_token": 1_000,
    "char_cnn.filters": 65_536,  # their counts added up
}


def _as_int(value):
    """`value` as an int, or None. JSON has one number type: 64.0 is 64, 64.7 is not an int."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        return None
    return int(value)


class _Reader:
    """Typed look-ups in one options dict, with errors that name the source and the key."""

    def __init__(self, source):
        self.source = source

    def fail(self, key, expected, value):
        raise ValueError(f"{self.source}: `{key}` must be {expected}. Received: {value!r}")

    def section(self, mapping, key, where=""):
        name = f"{where}{key}"
        if key not in mapping:
            raise ValueError(
                f"{self.source} is missing the key `{name}`. Received keys: {sorted(mapping)}"
            )
        value = mapping[key]
        if not isinstance(value, dict):
            self.fail(name, "a JSON object", value)
        unknown = sorted(set(value) - SECTION_KEYS[name])
        if unknown:  # a misspelt optional key would silently take its default
            raise ValueError(
                f"{self.source}: unknown key `{name}.{unknown[0]}` (misspelt?). The keys of "
                f"`{name}` are {sorted(SECTION_KEYS[name])}"
            )
        return value

    def integer(self, mapping, key, where, default=None, minimum=1):
        name = f"{where}{key}"
        if key not in mapping:
            if default is None:
                raise ValueError(
                    f"{self.source} is missing the key `{name}`. Received keys: {sorted(mapping)}"
                )
            return default
        value = _as_int(mapping[key])
        maximum = LIMITS.get(name)
        if value is None or value < minimum or (maximum is not None and value > maximum):
            expected = f"an integer >= {minimum}"
            if maximum is not None:
                expected = f"an integer in [{minimum}, {maximum:,}]"
            self.fail(name, expected, mapping[key])
        return value

    def clip(self, mapping, key, where):
        value = mapping.get(key)
        if value is None or value == 0:
            return None  # bilm-tf: a missing or zero clip means no clip
        if (
            isinstance(value, bool)
            or not isinstance(value, numbers.Real)
            or not math.isfinite(value)
            or value < 0
        ):
            self.fail(f"{where}{key}", "a finite number >= 0, or null", value)
        return float(value)

    def boolean(self, mapping, key, where, default):
        value = mapping.get(key, default)
        if not isinstance(value, bool):
            self.fail(f"{where}{key}", "true or false", value)
        return value


def options_to_bilm_kwargs(options, source="options", n_characters=N_CHARACTERS):
    """Checks a bilm-tf options dict and returns the matching `BiLM` keyword arguments.

    Args:
        options: dict. The parsed `options.json`.
        source: str. What to call the options in error messages (e.g. the file's path).
        n_characters: int. The character ids the model takes: bilm-tf's 262, or, for a model
            with its own character dictionary (ELMoForManyLangs), the dictionary's size + 1.

    Returns:
        A dict of `BiLM` keyword arguments.
    """
    read = _Reader(source)
    if not isinstance(options, dict):
        raise ValueError(f"{source} must be a JSON object. Received: {type(options).__name__}")
    lstm = read.section(options, "lstm")
    cnn = read.section(options, "char_cnn")
    expected, n_characters = (
        n_characters,
        read.integer(cnn, "n_characters", "char_cnn.", default=n_characters),
    )
    if expected != N_CHARACTERS:  # the model's own character dictionary
        if n_characters != expected:
            raise ValueError(
                f"{source} has char_cnn.n_characters={n_characters}; the model's character "
                f"dictionary gives {expected} ids (its characters and 1 padding id)."
            )
    elif n_characters == N_CHARACTERS - 1:
        raise ValueError(
            f"{source} has char_cnn.n_characters={n_characters}, the value bilm-tf uses while "
            f"training. A trained model is used with {N_CHARACTERS}: id 0 becomes a padding "
            f"token and the loader prepends a zero row to the {n_characters} rows of "
            f"'char_embed'. Set \"n_characters\": {N_CHARACTERS} in the options file (the "
            "weight file stays as it is)."
        )
    elif n_characters != N_CHARACTERS:
        raise ValueError(
            f"{source} has char_cnn.n_characters={n_characters}; ELMo's character vocabulary "
            f"is {N_CHARACTERS} ids at inference (256 bytes, 5 special ids, 1 padding id)."
        )
    raw_filters = cnn.get("filters")
    if (
        not isinstance(raw_filters, list)
        or not raw_filters
        or not all(isinstance(f, list) and len(f) == 2 for f in raw_filters)
    ):
        read.fail("char_cnn.filters", "a non-empty list of [width, count] pairs", raw_filters)
    filters = [[_as_int(w), _as_int(n)] for w, n in raw_filters]
    if any(v is None or v < 1 for pair in filters for v in pair):
        read.fail("char_cnn.filters", "[width, count] pairs of integers >= 1", raw_filters)
    if sum(n for _, n in filters) > LIMITS["char_cnn.filters"] or len(filters) > 64:
        read.fail(
            "char_cnn.filters",
            f"at most 64 pairs whose counts add up to at most {LIMITS['char_cnn.filters']:,}",
            raw_filters if len(raw_filters) <= 8 else f"{len(raw_filters)} pairs",
        )
    projection_dim = read.integer(lstm, "projection_dim", "lstm.")
    if sum(n for _, n in filters) == projection_dim:
        raise ValueError(
            f"{source}: the filters add up to projection_dim ({projection_dim}), so bilm-tf "
            "stores no CNN_proj; this layout is not supported."
        )
    activation = cnn.get("activation", "relu")
    if activation not in ACTIVATIONS:
        read.fail("char_cnn.activation", f"one of {ACTIVATIONS}", activation)
    embedding = read.section(cnn, "embedding", "char_cnn.")
    kwargs = {
        "lstm_units": read.integer(lstm, "dim", "lstm."),
        "projection_dim": projection_dim,
        "n_layers": read.integer(lstm, "n_layers", "lstm.", default=1),
        "cell_clip": read.clip(lstm, "cell_clip", "lstm."),
        "proj_clip": read.clip(lstm, "proj_clip", "lstm."),
        "use_skip_connections": read.boolean(lstm, "use_skip_connections", "lstm.", False),
        "char_embedding_dim": read.integer(embedding, "dim", "char_cnn.embedding."),
        "filters": filters,
        "n_highway": read.integer(cnn, "n_highway", "char_cnn.", default=0, minimum=0),
        "n_characters": N_CHARACTERS,
        "max_characters_per_token": read.integer(
            cnn,
            "max_characters_per_token",
            "char_cnn.",
            default=MAX_CHARACTERS_PER_TOKEN,
            minimum=3,
        ),
        "activation": activation,
    }
    return kwargs


def bilm_kwargs_to_options(kwargs):
    """The inverse of `options_to_bilm_kwargs`: `BiLM` arguments -> a bilm-tf options dict."""
    return {
        "lstm": {
            "dim": kwargs["lstm_units"],
            "projection_dim": kwargs["projection_dim"],
            "n_layers": kwargs["n_layers"],
            "cell_clip": kwargs["cell_clip"],
            "proj_clip": kwargs["proj_clip"],
            "use_skip_connections": kwargs["use_skip_connections"],
        },
        "char_cnn": {
            "embedding": {"dim": kwargs["char_embedding_dim"]},
            "filters": [list(f) for f in kwargs["filters"]],
            "n_highway": kwargs["n_highway"],
            "n_characters": kwargs["n_characters"],
            "max_characters_per_token": kwargs["max_characters_per_token"],
            "activation": kwargs["activation"],
        },
    }


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs):
    found = {}
    for key, value in pairs:
        if key in found:
            raise _DuplicateKey(key)
        found[key] = value
    return found


def parse_json(text, source):
    """Parses a model folder's JSON file (`options.json`, `config.json`) strictly: a key
    given twice in one object (JSON readers keep one of them silently), nesting deeper than
    Python's recursion limit and an integer of more digits than Python converts are each one
    `ValueError` naming `source`, as is invalid JSON."""
    try:
        return json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as error:
        raise ValueError(
            f"{source} gives the key {error.args[0]!r} twice in one object; JSON readers keep "
            "only one of them: give each key once"
        ) from None
    except RecursionError:
        raise ValueError(f"{source} is nested too deeply to be a model's JSON file") from None
    except json.JSONDecodeError as error:
        raise ValueError(f"{source} is not valid JSON: {error}") from None
    except ValueError as error:  # an integer beyond Python's digit limit
        reason = str(error).split(";")[0]
        raise ValueError(f"{source} holds a number Python does not read ({reason})") from None


def read_options(path, n_characters=N_CHARACTERS):
    """Reads a bilm-tf `options.json` and returns it as a dict, checked (`n_characters`: as
    `options_to_bilm_kwargs` takes it)."""
    path = pathlib.Path(path)
    check_regular_file(path, "options file", "a JSON file")  # a FIFO would wait forever
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as error:
        raise ValueError(f"options file {path} is not UTF-8 text: {error.reason}") from None
    options = parse_json(text, f"options file {path}")
    options_to_bilm_kwargs(options, source=f"options file {path}", n_characters=n_characters)
    return options


def write_options(options, path):
    """Writes an options dict as bilm-tf's `options.json` (atomically)."""
    write_text(path, json.dumps(options, indent=2, sort_keys=True) + "\n")
