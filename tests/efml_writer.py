"""Writes ELMoForManyLangs-format folders and torch state-dict files without torch (tests only).

An independent writer, from torch's documented formats, for tests and benchmarks: the reader
(`elmo_keras.torch_pickle`) is tested on files it did not make, and full-size EFML-shaped
models (random weights) can be written without torch. The state-dict pickle is written opcode
by opcode (torch's globals cannot be pickled without torch installed).
"""

import json
import pathlib
import pickle
import struct
import zipfile

import numpy as np

LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
STORAGE_TYPES = {np.dtype(np.float32): "FloatStorage", np.dtype(np.int64): "LongStorage"}


def _global(module, name):
    return b"c" + module.encode() + b"\n" + name.encode() + b"\n"


def _str(text):
    data = text.encode("utf-8")
    return b"X" + struct.pack("<I", len(data)) + data


def _int(value):
    return b"J" + struct.pack("<i", value)


def _ints(values):
    return b"(" + b"".join(_int(v) for v in values) + b"t"


def state_dict_pickle(arrays, location="cpu", legacy=False):
    """The pickle torch writes for `{name: array}` (storage keys "0", "1", ...)."""
    out = [b"\x80\x02", _global("collections", "OrderedDict"), b")R("]
    for key, (name, array) in enumerate(arrays.items()):
        strides = [int(np.prod(array.shape[k + 1 :])) for k in range(array.ndim)]
        storage = [_str("storage"), _global("torch", STORAGE_TYPES[array.dtype]), _str(str(key))]
        storage += [_str(location), _int(array.size), b"N" if legacy else b""]
        out += [_str(name), _global("torch._utils", "_rebuild_tensor_v2"), b"(("]
        out += [*storage, b"tQ", _int(0), _ints(array.shape), _ints(strides), b"\x89"]
        out += [_global("collections", "OrderedDict"), b")RtR"]
    out.append(b"u.")
    return b"".join(out)


def write_state_dict(path, arrays, legacy=False, location="cpu"):
    """Writes `{name: array}` as `torch.save` does: the zip format, or the legacy one."""
    arrays = {k: np.array(v, order="C") for k, v in arrays.items()}
    main = state_dict_pickle(arrays, location, legacy)
    if not legacy:
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("archive/data.pkl", main)
            archive.writestr("archive/byteorder", "little")
            archive.writestr("archive/version", "3\n")
            for key, array in enumerate(arrays.values()):
                archive.writestr(f"archive/data/{key}", array.tobytes())
        return
    info = {"protocol_version": 1001, "little_endian": True, "type_sizes": {"int": 4}}
    with open(path, "wb") as handle:
        for value in (LEGACY_MAGIC, 1001, info):
            handle.write(pickle.dumps(value, protocol=2))
        handle.write(main)
        handle.write(pickle.dumps([str(k) for k in range(len(arrays))], protocol=2))
        for array in arrays.values():
            handle.write(struct.pack("<q", array.size) + array.tobytes())


def efml_state_dicts(network, n_chars, n_words, seed=0):
    """Random `(token_embedder, encoder)` state dicts with EFML's names and shapes."""
    rng = np.random.default_rng(seed)
    embedder, encoder = network["token_embedder"], network["encoder"]

    def rand(*shape, scale=0.1):
        return (scale * rng.standard_normal(shape)).astype(np.float32)

    features = sum(n for _, n in embedder["filters"])
    token = {}
    if embedder["word_dim"]:
        token["word_emb_layer.embedding.weight"] = rand(n_words, embedder["word_dim"])
    token["char_emb_layer.embedding.weight"] = rand(n_chars, embedder["char_dim"])
    for i, (width, count) in enumerate(embedder["filters"]):
        token[f"convolutions.{i}.weight"] = rand(count, embedder["char_dim"], width)
        token[f"convolutions.{i}.bias"] = rand(count)
    for k in range(embedder["n_highway"]):
        token[f"highways._layers.{k}.weight"] = rand(2 * features, features, scale=0.02)
        token[f"highways._layers.{k}.bias"] = rand(2 * features)
    projection, cell = encoder["projection_dim"], encoder["dim"]
    token["projection.weight"] = rand(projection, embedder["word_dim"] + features, scale=0.02)
    token["projection.bias"] = rand(projection)
    lstm = {}
    for layer in range(encoder["n_layers"]):
        for side in ("forward", "backward"):
            key = f"{side}_layer_{layer}"
            lstm[f"{key}.input_linearity.weight"] = rand(4 * cell, projection, scale=0.02)
            lstm[f"{key}.state_linearity.weight"] = rand(4 * cell, projection, scale=0.02)
            lstm[f"{key}.state_linearity.bias"] = rand(4 * cell)
            lstm[f"{key}.state_projection.weight"] = rand(projection, cell, scale=0.02)
    return token, lstm


def write_efml_folder(folder, network, characters, words, seed=0, legacy=True, config_path=None):
    """An EFML model folder with random weights; `config_path` as `config.json` names it
    (default: the network config written beside it)."""
    folder = pathlib.Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    name = "cnn_network_sample.json"
    (folder / name).write_text(json.dumps(network), encoding="utf-8")
    config = {"config_path": config_path or name, "model": folder.name}
    (folder / "config.json").write_text(json.dumps(config), encoding="utf-8")
    for file, entries in (("char.dic", characters), ("word.dic", words)):
        lines = "".join(f"{entry}\t{i}\n" for i, entry in enumerate(entries))
        (folder / file).write_text(lines, encoding="utf-8")
    token, lstm = efml_state_dicts(network, len(characters), len(words), seed)
    write_state_dict(folder / "token_embedder.pkl", token, legacy=legacy)
    write_state_dict(folder / "encoder.pkl", lstm, legacy=legacy)
    return folder
