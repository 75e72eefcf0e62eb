"""What `inference.py` times: the model configurations, their files, and the modes.

A mode is a factory: it receives a `Context` (the loaded `bilm`, the options and weight paths, a
scratch `workdir`, the config name) and returns `f(char_ids: np.ndarray int32 [B, T, 50]) ->
outputs` (a dict with "activations", or an array, or a list of arrays). `MODES` lists them all:

- `eager`, `function`, `xla`: the Keras model, called directly or through `tf.function`;
- `savedmodel`, `onnx`, `onnx_int8`: the exported model, written once into `WORKDIR/export/`
  with `elmo_keras.export.export_model` (the code behind `elmo-keras export --format all
  --quantize`) and reused while the weight file is unchanged: converting the full configuration
  to ONNX takes minutes and about 12 GB of memory.
"""

import dataclasses
import hashlib
import json
import pathlib
import time

import numpy as np

CONFIGS = {
    # REFERENCE.md section 2: elmo_2x4096_512_2048cnn_2xhighway.
    "full": {
        "lstm": {
            "dim": 4096,
            "projection_dim": 512,
            "n_layers": 2,
            "cell_clip": 3.0,
            "proj_clip": 3.0,
            "use_skip_connections": True,
        },
        "char_cnn": {
            "embedding": {"dim": 16},
            "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
            "n_highway": 2,
            "n_characters": 262,
            "max_characters_per_token": 50,
            "activation": "relu",
        },
    },
    # Same structure (2 layers, residual, clips, 2 highway), tiny sizes: a smoke run.
    "tiny": {
        "lstm": {
            "dim": 64,
            "projection_dim": 16,
            "n_layers": 2,
            "cell_clip": 3.0,
            "proj_clip": 3.0,
            "use_skip_connections": True,
        },
        "char_cnn": {
            "embedding": {"dim": 4},
            "filters": [[1, 4], [2, 8], [3, 8]],
            "n_highway": 2,
            "n_characters": 262,
            "max_characters_per_token": 50,
            "activation": "relu",
        },
    },
}


# --------------------------------------------------------------------------------------------
# Model files
# --------------------------------------------------------------------------------------------


def write_random_model(config, directory, seed=0):
    """Random weights for `config`, written as `options.json` + `weights.hdf5` in `directory`
    (the published layout); reused when `directory` already holds the same config and seed."""
    import keras

    from elmo_keras.models.bilm import BiLM
    from elmo_keras.weights import save_weights, write_options

    directory = pathlib.Path(directory)
    options_path = directory / "options.json"
    weights_path = directory / "weights.hdf5"
    marker = directory / "config.json"
    stamp = {"config": config, "seed": seed}
    if (
        options_path.is_file()
        and weights_path.is_file()
        and marker.is_file()
        and json.loads(marker.read_text()) == stamp
    ):
        return options_path, weights_path
    keras.utils.set_random_seed(seed)
    bilm = BiLM.from_options(CONFIGS[config])
    bilm.build()
    write_options(CONFIGS[config], options_path)
    save_weights(bilm, weights_path)
    marker.write_text(json.dumps(stamp))
    return options_path, weights_path


def load(options_path, weights_path):
    """The benchmark loads through the real path: `load_bilm`."""
    from elmo_keras.weights import load_bilm

    return load_bilm(options_path, weights_path)


def materialize(outputs):
    """Forces the result to host memory: TF may return before a value is used."""
    if isinstance(outputs, dict):
        outputs = outputs.get("activations", next(iter(outputs.values())))
    if isinstance(outputs, list | tuple):
        return [np.asarray(o) for o in outputs]
    return np.asarray(outputs)


def run_once(fn, char_ids):
    """One call of a mode, its result forced to host memory."""
    return materialize(fn(char_ids))


# --------------------------------------------------------------------------------------------
# Modes
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class Context:
    """What a mode factory gets: the loaded model and the files it was loaded from."""

    bilm: object
    options_path: pathlib.Path
    weights_path: pathlib.Path
    workdir: pathlib.Path
    config: str


def set_threads(intra_op, inter_op):
    """TensorFlow's thread pools; `None` keeps its default (one thread per usable core)."""
    import tensorflow as tf

    if intra_op is not None:
        tf.config.threading.set_intra_op_parallelism_threads(intra_op)
    if inter_op is not None:
        tf.config.threading.set_inter_op_parallelism_threads(inter_op)


def _keras_mode(kind):
    """`eager`: `bilm(ids)`; `function`: under `tf.function`; `xla`: the same, compiled."""

    def factory(ctx):
        bilm = ctx.bilm
        if kind == "eager":
            return lambda ids: bilm(ids, training=False)
        import tensorflow as tf

        spec = tf.TensorSpec([None, None, bilm.max_characters_per_token], tf.int32, "char_ids")
        return tf.function(
            lambda ids: bilm(ids, training=False),
            input_signature=[spec],
            autograph=False,
            **({"jit_compile": True} if kind == "xla" else {}),
        )

    return factory


def _source_stamp(options_path, weights_path):
    stat = pathlib.Path(weights_path).stat()
    digest = hashlib.sha256(pathlib.Path(options_path).read_bytes()).hexdigest()
    return {
        "options_sha256": digest,
        "weights_size": stat.st_size,
        "weights_mtime_ns": stat.st_mtime_ns,
    }


def ensure_exports(options_path, weights_path, workdir, log=print):
    """`WORKDIR/export/` with savedmodel/, model.onnx, model.int8.onnx; written once."""
    from elmo_keras.export import export_model

    output = pathlib.Path(workdir) / "export"
    stamp = _source_stamp(options_path, weights_path)
    stamp_path = output / "source.json"
    if stamp_path.is_file() and json.loads(stamp_path.read_text()) == stamp:
        return output
    log(f"exporting {options_path} to {output} (SavedModel, ONNX, int8 ONNX) ...")
    start = time.perf_counter()
    export_model(options_path, weights_path, output, formats="all", quantize=True, overwrite=True)
    stamp_path.write_text(json.dumps(stamp))
    log(f"  export done in {time.perf_counter() - start:.0f} s")
    return output


def _savedmodel_mode(ctx):
    import tensorflow as tf

    output = ensure_exports(ctx.options_path, ctx.weights_path, ctx.workdir)
    signature = tf.saved_model.load(str(output / "savedmodel")).signatures["char_ids"]

    def run(char_ids):
        return [value.numpy() for value in signature(char_ids=tf.constant(char_ids)).values()]

    return run


def _onnx_mode(filename):
    def factory(ctx):
        import onnxruntime as ort

        output = ensure_exports(ctx.options_path, ctx.weights_path, ctx.workdir)
        session = ort.InferenceSession(str(output / filename), providers=["CPUExecutionProvider"])
        return lambda char_ids: session.run(None, {"char_ids": char_ids})

    return factory


@dataclasses.dataclass
class Mode:
    factory: object
    description: str


MODES = {
    "eager": Mode(_keras_mode("eager"), "Keras eager call, `bilm(ids)`"),
    "function": Mode(
        _keras_mode("function"), "`tf.function`, input signature [None, None, 50] int32"
    ),
    "xla": Mode(_keras_mode("xla"), "`tf.function(jit_compile=True)`, same signature"),
    "savedmodel": Mode(
        _savedmodel_mode, "reloaded SavedModel, `signatures['char_ids']` (tf.saved_model.load)"
    ),
    "onnx": Mode(
        _onnx_mode("model.onnx"),
        "ONNX Runtime 1.31, CPU provider, float32 model.onnx (tf2onnx, opset 17)",
    ),
    "onnx_int8": Mode(
        _onnx_mode("model.int8.onnx"),
        "ONNX Runtime, int8 dynamic quantization (quantize_dynamic, QInt8 weights)",
    ),
}
