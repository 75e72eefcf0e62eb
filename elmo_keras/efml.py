"""ELMoForManyLangs (EFML) model folders -> `BiLM` keyword arguments and weight arrays.

EFML (HIT-SCIR, 44 languages) saves a model as a folder:

- `config.json`: its trainer's options; `config_path` names the network config, found as given
  (relative to the folder), else by its file name inside the folder, else EFML's bundled
  config, which the published downloads rely on (`PUBLISHED_NETWORK`);
- `char.dic`, `word.dic`: `key<TAB>id` lines, read as EFML reads them (a line with one field is
  U+3000, the ideographic space, whose line `strip()` emptied);
- `token_embedder.pkl`, `encoder.pkl`: torch state dicts, read without torch
  (`elmo_keras.torch_pickle`).

The network maps onto `BiLM` exactly, with the conventions as options (`char_vocabulary`,
`word_vocabulary`, `word_embedding_dim`, `cell_forget_bias=0`) and the rest in the weights:

- char embedding -> `char_embed` (row 0, the padding token, stays zero: ids are shifted by 1);
- `convolutions.{i}` `(count, char_dim, width)` -> `CNN/W_cnn_{i}` `(1, width, char_dim, count)`;
- `highways._layers.{k}` `(2F, F)`: rows `[:F]` transform, `[F:]` a gate that applies to the
  carry (`y = g x + (1 - g) f(.)`); ours gates the transform, so `W_carry = -W_gate`,
  `b_carry = -b_gate` (`1 - sigmoid(z) = sigmoid(-z)`);
- `projection` over `[word_embedding; char_features]` -> `CNN_proj/W_proj` (word rows first),
  and the word embedding -> `word_embed`;
- AllenNLP's `LstmCellWithProjection` (gates i, f, g, o: Keras' order; no forget bias added at
  run time) -> bilm-tf's `W_0 = [input; h]` (gates i, j, f, o), `B`, `W_P_0`.
"""

import json
import os
import pathlib

import numpy as np

from elmo_keras.torch_pickle import read_state_dict

WEIGHT_FILES = ("token_embedder.pkl", "encoder.pkl")
# EFML's bundled network config (`cnn_50_100_512_4096_sample.json`), which its published
# models name but most of their archives do not hold.
PUBLISHED_NETWORK = {
    "encoder": {
        "name": "elmo",
        "projection_dim": 512,
        "cell_clip": 3,
        "proj_clip": 3,
        "dim": 4096,
        "n_layers": 2,
    },
    "token_embedder": {
        "name": "cnn",
        "activation": "relu",
        "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
        "n_highway": 2,
        "word_dim": 100,
        "char_dim": 50,
        "max_characters_per_token": 50,
    },
    "classifier": {"name": "sampled_softmax", "n_samples": 8192},
    "dropout": 0.1,
}
_GATES = (0, 2, 1, 3)  # Keras/AllenNLP gate block k is bilm-tf's block _GATES[k] (self-inverse)


def is_efml_folder(folder):
    """Whether `folder` is an EFML model folder (`config.json`, `char.dic`, both `.pkl` files)."""
    if not isinstance(folder, str | os.PathLike) or not os.path.isdir(folder):
        return False
    names = ("config.json", "char.dic", *WEIGHT_FILES)
    return all(os.path.isfile(os.path.join(folder, n)) for n in names)


def _read_json(path):
    try:
        with open(path, encoding="utf-8") as handle:
            value = json.load(handle)
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"{path} is not a readable JSON file: {error}") from None
    if not isinstance(value, dict):
        raise ValueError(f"{path} must hold a JSON object")
    return value


def read_dictionary(path):
    """EFML's `char.dic` / `word.dic` as a list of entries, entry `i` having id `i`."""
    try:
        text = pathlib.Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(f"{path} is not a readable dictionary: {error}") from None
    by_id = {}
    for number, line in enumerate(text.splitlines(), 1):  # codecs' readline splits so too
        fields = line.strip().split("\t")
        if fields == [""]:
            continue
        if len(fields) == 1:
            fields.insert(0, "\u3000")  # EFML: the line of a whitespace entry
        if len(fields) != 2 or not fields[1].isdigit():
            raise ValueError(f"{path}, line {number}: expected `key<TAB>id`, got {line!r:.60}")
        by_id[int(fields[1])] = fields[0]
    if sorted(by_id) != list(range(len(by_id))):
        raise ValueError(f"{path}: ids must run from 0 to {len(by_id) - 1} without gaps")
    return [by_id[i] for i in range(len(by_id))]


def network_config(folder):
    """The network config an EFML folder names, found as EFML finds it (module docstring)."""
    folder = pathlib.Path(folder)
    named = _read_json(folder / "config.json").get("config_path")
    if isinstance(named, str) and named:
        for candidate in (folder / named, folder / pathlib.PurePath(named).name):
            if candidate.is_file():
                return _read_json(candidate)
        if pathlib.PurePath(named).name.startswith("cnn_") and named.endswith("_sample.json"):
            return PUBLISHED_NETWORK
    raise ValueError(
        f"{folder / 'config.json'}: its `config_path` {named!r} names no network config in the "
        "folder nor one of EFML's bundled configs"
    )


def _check_network(network, source):
    encoder, embedder = network.get("encoder", {}), network.get("token_embedder", {})
    if encoder.get("name") != "elmo" or embedder.get("name") != "cnn":
        raise ValueError(
            f"{source}: only EFML's `elmo` encoder with the `cnn` token embedder is read. "
            f"Received: encoder {encoder.get('name')!r}, token_embedder {embedder.get('name')!r}"
        )
    if not embedder.get("char_dim"):
        raise ValueError(f"{source}: a model without characters (char_dim 0) is not read")


def bilm_kwargs(network, characters, words):
    """`BiLM` keyword arguments of an EFML network config and its dictionaries."""
    _check_network(network, "network config")
    encoder, embedder = network["encoder"], network["token_embedder"]
    word_dim = int(embedder.get("word_dim") or 0)
    return {
        "lstm_units": int(encoder["dim"]),
        "projection_dim": int(encoder["projection_dim"]),
        "n_layers": int(encoder["n_layers"]),
        "cell_clip": float(encoder["cell_clip"]) if encoder.get("cell_clip") else None,
        "proj_clip": float(encoder["proj_clip"]) if encoder.get("proj_clip") else None,
        "use_skip_connections": True,
        "char_embedding_dim": int(embedder["char_dim"]),
        "filters": [[int(w), int(n)] for w, n in embedder["filters"]],
        "n_highway": int(embedder["n_highway"]),
        "max_characters_per_token": int(embedder["max_characters_per_token"]),
        "activation": embedder["activation"],
        "char_vocabulary": characters,
        "word_vocabulary": words if word_dim else None,
        "word_embedding_dim": word_dim,
        "cell_forget_bias": 0.0,
    }


def _get(state, key, source):
    if key not in state:
        raise ValueError(f"{source} has no tensor {key!r}")
    return np.asarray(state[key], np.float32)


def _token_embedder_arrays(state, kwargs, source):
    arrays = {"char_embed": _get(state, "char_emb_layer.embedding.weight", source)}
    if kwargs["word_embedding_dim"]:
        arrays["word_embed"] = _get(state, "word_emb_layer.embedding.weight", source)
    for i in range(len(kwargs["filters"])):
        arrays[f"CNN/W_cnn_{i}"] = _get(state, f"convolutions.{i}.weight", source).T[None]
        arrays[f"CNN/b_cnn_{i}"] = _get(state, f"convolutions.{i}.bias", source)
    features = sum(n for _, n in kwargs["filters"])
    for k in range(kwargs["n_highway"]):
        weight = _get(state, f"highways._layers.{k}.weight", source)
        bias = _get(state, f"highways._layers.{k}.bias", source)
        arrays[f"CNN_high_{k}/W_transform"] = weight[:features].T
        arrays[f"CNN_high_{k}/b_transform"] = bias[:features]
        arrays[f"CNN_high_{k}/W_carry"] = -weight[features:].T
        arrays[f"CNN_high_{k}/b_carry"] = -bias[features:]
    arrays["CNN_proj/W_proj"] = _get(state, "projection.weight", source).T
    arrays["CNN_proj/b_proj"] = _get(state, "projection.bias", source)
    return arrays


def _reorder_gates(array):
    blocks = np.split(array, 4, axis=-1)
    return np.concatenate([blocks[k] for k in _GATES], axis=-1)


def _encoder_arrays(state, kwargs, source):
    arrays = {}
    for direction, side in enumerate(("forward", "backward")):
        for layer in range(kwargs["n_layers"]):
            key = f"{side}_layer_{layer}"
            prefix = f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
            kernel = np.concatenate(
                [
                    _get(state, f"{key}.input_linearity.weight", source).T,
                    _get(state, f"{key}.state_linearity.weight", source).T,
                ]
            )
            arrays[f"{prefix}/W_0"] = _reorder_gates(kernel)
            arrays[f"{prefix}/B"] = _reorder_gates(
                _get(state, f"{key}.state_linearity.bias", source)
            )
            arrays[f"{prefix}/W_P_0"] = _get(state, f"{key}.state_projection.weight", source).T
    return arrays


def weight_arrays(token_embedder, encoder, kwargs, source="the EFML folder"):
    """{bilm-tf dataset name: array} of EFML's two state dicts (module docstring)."""
    arrays = _token_embedder_arrays(token_embedder, kwargs, f"{source}/token_embedder.pkl")
    arrays.update(_encoder_arrays(encoder, kwargs, f"{source}/encoder.pkl"))
    return arrays


def text_settings(folder, network=None):
    """What turns text into ids for an EFML folder's model: `max_characters_per_token`,
    `char_vocabulary`, `word_vocabulary` (as `BiLM` and `ElmoPreprocessor` take them)."""
    folder = pathlib.Path(folder)
    network = network or network_config(folder)
    embedder = network["token_embedder"]
    words = read_dictionary(folder / "word.dic") if embedder.get("word_dim") else None
    return {
        "max_characters_per_token": int(embedder["max_characters_per_token"]),
        "char_vocabulary": read_dictionary(folder / "char.dic"),
        "word_vocabulary": words,
    }


def read_folder(folder, network=None):
    """An EFML folder as `(BiLM keyword arguments, {bilm-tf dataset name: array})`; `network`
    (a pinned network config) replaces the one the folder names."""
    folder = pathlib.Path(folder)
    network = network or network_config(folder)
    _check_network(network, str(folder))
    characters = read_dictionary(folder / "char.dic")
    words = None
    if network["token_embedder"].get("word_dim"):
        words = read_dictionary(folder / "word.dic")
    kwargs = bilm_kwargs(network, characters, words)
    states = [read_state_dict(folder / name) for name in WEIGHT_FILES]
    return kwargs, weight_arrays(*states, kwargs, source=str(folder))
