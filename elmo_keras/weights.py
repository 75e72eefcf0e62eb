"""Published ELMo weights: bilm-tf's `options.json` + hdf5 layout, read and written.

Plain functions, no classes: `read_options`, `write_options`, `options_to_bilm_kwargs`,
`load_bilm`, `load_weights`, `save_weights`. The layout (REFERENCE.md section 3):

```
char_embed                                   (n_characters - 1, char_dim)
CNN/W_cnn_{i}, CNN/b_cnn_{i}                 (1, width, char_dim, count), (count,)
CNN_high_{k}/W_carry, W_transform, b_carry, b_transform
CNN_proj/W_proj, CNN_proj/b_proj             (n_filters, projection_dim), (projection_dim,)
RNN_{d}/RNN/MultiRNNCell/Cell{l}/LSTMCell/W_0    (input_dim + projection_dim, 4 * units)
RNN_{d}/RNN/MultiRNNCell/Cell{l}/LSTMCell/B      (4 * units,)
RNN_{d}/RNN/MultiRNNCell/Cell{l}/LSTMCell/W_P_0  (units, projection_dim)
```

TensorFlow's LSTMCell orders the gate blocks i, j (candidate), f, o; our cells use Keras' i, f,
c, o: loading and saving permute the column blocks (a permutation, so exact both ways). The
forget bias of 1.0 is not stored in `B` and our cells add it at run time too, so biases are
copied unchanged and load -> save -> load is bit-exact.
"""

import json
import os
import pathlib
import tempfile

import numpy as np

# Keras gate block k is TensorFlow block _GATE_PERMUTATION[k]; the permutation is its own inverse.
_GATE_PERMUTATION = (0, 2, 1, 3)


def _reorder_gates(array, axis=-1):
    blocks = np.split(array, 4, axis=axis)
    return np.concatenate([blocks[k] for k in _GATE_PERMUTATION], axis=axis)


def _require(mapping, key, where):
    if key not in mapping:
        raise ValueError(f"{where} is missing the key '{key}'. Received keys: {sorted(mapping)}")
    return mapping[key]


def read_options(path):
    """Reads a bilm-tf `options.json` and returns it as a dict, validated."""
    path = pathlib.Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise FileNotFoundError(f"options file not found: {path}") from None
    try:
        options = json.loads(text)
    except json.JSONDecodeError as error:
        raise ValueError(f"options file {path} is not valid JSON: {error}") from None
    options_to_bilm_kwargs(options, source=str(path))
    return options


def write_options(options, path):
    """Writes an options dict as bilm-tf's `options.json` (atomically)."""
    _atomic_write_text(pathlib.Path(path), json.dumps(options, indent=2, sort_keys=True) + "\n")


def options_to_bilm_kwargs(options, source="options"):
    """Translates a bilm-tf options dict into `BiLM` keyword arguments, with clear errors."""
    if not isinstance(options, dict):
        raise ValueError(f"{source} must be a JSON object. Received: {type(options).__name__}")
    lstm = _require(options, "lstm", source)
    cnn = _require(options, "char_cnn", source)
    n_characters = _require(cnn, "n_characters", f"{source} 'char_cnn'")
    if n_characters == 261:
        raise ValueError(
            f"{source} has char_cnn.n_characters=261, the value bilm-tf uses while training. "
            "A trained model is used with 262: id 0 becomes a padding token and the loader "
            "prepends a zero row to the 261 rows of 'char_embed'. Set \"n_characters\": 262 in "
            "the options file (the weight file stays as it is)."
        )
    if n_characters != 262:
        raise ValueError(
            f"{source} has char_cnn.n_characters={n_characters}; ELMo's character vocabulary "
            "is 262 ids at inference (256 bytes, 5 special ids, 1 padding id)."
        )
    filters = _require(cnn, "filters", f"{source} 'char_cnn'")
    projection_dim = _require(lstm, "projection_dim", f"{source} 'lstm'")
    n_filters = sum(int(n) for _, n in filters)
    if n_filters == projection_dim:
        raise ValueError(
            f"{source}: the filters add up to projection_dim ({projection_dim}), so bilm-tf "
            "stores no CNN_proj; this layout is not supported."
        )
    activation = cnn.get("activation", "relu")
    if activation not in ("relu", "tanh"):
        raise ValueError(
            f"{source} has char_cnn.activation={activation!r}; expected 'relu' or 'tanh'."
        )
    return {
        "lstm_units": int(_require(lstm, "dim", f"{source} 'lstm'")),
        "projection_dim": int(projection_dim),
        "n_layers": int(lstm.get("n_layers", 1)),
        "cell_clip": lstm.get("cell_clip") or None,
        "proj_clip": lstm.get("proj_clip") or None,
        "use_skip_connections": bool(lstm.get("use_skip_connections", False)),
        "char_embedding_dim": int(_require(cnn.get("embedding", {}), "dim", f"{source} "
                                           "'char_cnn.embedding'")),
        "filters": [[int(w), int(n)] for w, n in filters],
        "n_highway": int(cnn.get("n_highway", 0)),
        "n_characters": 262,
        "max_characters_per_token": int(cnn.get("max_characters_per_token", 50)),
        "activation": activation,
    }


def _lstm_prefix(direction, layer):
    return f"RNN_{direction}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"


def _published_arrays(bilm):
    """The model's weights as a dict {dataset name: array} in the published layout."""
    cnn = bilm.char_cnn
    arrays = {"char_embed": np.asarray(cnn.char_embedding.embeddings)[1:]}
    for i, conv in enumerate(cnn.convolutions):
        arrays[f"CNN/W_cnn_{i}"] = np.asarray(conv.kernel)[None]
        arrays[f"CNN/b_cnn_{i}"] = np.asarray(conv.bias)
    for k, highway in enumerate(cnn.highways):
        arrays[f"CNN_high_{k}/W_carry"] = np.asarray(highway.carry.kernel)
        arrays[f"CNN_high_{k}/b_carry"] = np.asarray(highway.carry.bias)
        arrays[f"CNN_high_{k}/W_transform"] = np.asarray(highway.transform.kernel)
        arrays[f"CNN_high_{k}/b_transform"] = np.asarray(highway.transform.bias)
    arrays["CNN_proj/W_proj"] = np.asarray(cnn.projection.kernel)
    arrays["CNN_proj/b_proj"] = np.asarray(cnn.projection.bias)
    for direction, cells in enumerate((bilm.bilstm.forward_cells, bilm.bilstm.backward_cells)):
        for layer, cell in enumerate(cells):
            prefix = _lstm_prefix(direction, layer)
            w = np.concatenate([np.asarray(cell.kernel), np.asarray(cell.recurrent_kernel)])
            arrays[f"{prefix}/W_0"] = _reorder_gates(w)
            arrays[f"{prefix}/B"] = _reorder_gates(np.asarray(cell.bias))
            arrays[f"{prefix}/W_P_0"] = np.asarray(cell.projection_kernel)
    return arrays


def _assignments(bilm):
    """(dataset name, expected shape, function that assigns the file's array to the model)."""
    cnn = bilm.char_cnn
    plan = []

    def add(name, variable, convert=lambda a: a, shape=None):
        shape = tuple(shape if shape is not None else variable.shape)
        plan.append((name, shape, lambda a: variable.assign(convert(a).astype(variable.dtype))))

    emb = cnn.char_embedding.embeddings
    add(
        "char_embed",
        emb,
        lambda a: np.concatenate([np.zeros((1, a.shape[1]), a.dtype), a]),
        (emb.shape[0] - 1, emb.shape[1]),
    )
    for i, conv in enumerate(cnn.convolutions):
        add(f"CNN/W_cnn_{i}", conv.kernel, lambda a: a[0], (1,) + tuple(conv.kernel.shape))
        add(f"CNN/b_cnn_{i}", conv.bias)
    for k, highway in enumerate(cnn.highways):
        add(f"CNN_high_{k}/W_carry", highway.carry.kernel)
        add(f"CNN_high_{k}/b_carry", highway.carry.bias)
        add(f"CNN_high_{k}/W_transform", highway.transform.kernel)
        add(f"CNN_high_{k}/b_transform", highway.transform.bias)
    add("CNN_proj/W_proj", cnn.projection.kernel)
    add("CNN_proj/b_proj", cnn.projection.bias)
    for direction, cells in enumerate((bilm.bilstm.forward_cells, bilm.bilstm.backward_cells)):
        for layer, cell in enumerate(cells):
            prefix = _lstm_prefix(direction, layer)
            rows = cell.kernel.shape[0]
            w_shape = (rows + cell.recurrent_kernel.shape[0], cell.kernel.shape[1])

            def assign_w(a, cell=cell, rows=rows):
                a = _reorder_gates(a)
                cell.kernel.assign(a[:rows].astype(cell.kernel.dtype))
                cell.recurrent_kernel.assign(a[rows:].astype(cell.recurrent_kernel.dtype))

            plan.append((f"{prefix}/W_0", w_shape, assign_w))
            add(f"{prefix}/B", cell.bias, _reorder_gates)
            add(f"{prefix}/W_P_0", cell.projection_kernel)
    return plan


def load_weights(bilm, weights_path):
    """Loads a bilm-tf hdf5 weight file into a built `BiLM`.

    Every dataset is checked before anything is assigned: a missing dataset or a wrong shape
    raises a `ValueError` naming the dataset, the expected and the received shape.
    """
    import h5py

    weights_path = pathlib.Path(weights_path)
    if not weights_path.is_file():
        raise FileNotFoundError(f"weight file not found: {weights_path}")
    if not bilm.built:
        bilm.build()
    plan = _assignments(bilm)
    try:
        handle = h5py.File(weights_path, "r")
    except OSError as error:
        raise ValueError(
            f"weight file {weights_path} is not a readable hdf5 file: {error}"
        ) from None
    with handle:
        arrays = {}
        for name, shape, _ in plan:
            if name not in handle:
                raise ValueError(
                    f"weight file {weights_path} has no dataset '{name}' (expected shape "
                    f"{shape} for these options)"
                )
            array = handle[name][...]
            if array.shape != shape:
                hint = ""
                if name == "char_embed" and array.shape[0] == shape[0] + 1:
                    hint = " (this file already holds the padding row; bilm-tf files hold 261)"
                raise ValueError(
                    f"weight file {weights_path}: dataset '{name}' has shape {array.shape}, "
                    f"but the options need {shape}{hint}"
                )
            arrays[name] = array
    for name, _, assign in plan:
        assign(arrays[name])
    return bilm


def save_weights(bilm, weights_path):
    """Writes a `BiLM`'s weights as a bilm-tf hdf5 file (atomically: temp file, then rename)."""
    import h5py

    weights_path = pathlib.Path(weights_path)
    arrays = _published_arrays(bilm)
    weights_path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{weights_path.name}.", dir=weights_path.parent)
    os.close(fd)
    try:
        with h5py.File(tmp, "w") as handle:
            for name, array in arrays.items():
                handle.create_dataset(name, data=np.asarray(array, np.float32))
        os.replace(tmp, weights_path)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise


def load_bilm(options_path, weights_path, **kwargs):
    """Builds a `BiLM` from bilm-tf's `options.json` and loads its hdf5 weights."""
    from elmo_keras.models.bilm import BiLM

    bilm = BiLM.from_options(read_options(options_path), **kwargs)
    bilm.build()
    return load_weights(bilm, weights_path)


def _atomic_write_text(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        pathlib.Path(tmp).unlink(missing_ok=True)
        raise
