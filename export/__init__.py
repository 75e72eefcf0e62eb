"""Export a biLM for serving: SavedModel, ONNX, int8 ONNX. Installed as `elmo_keras.export`.

- `export_savedmodel(bilm, directory, scalar_mix=None, tokenization_mode="punctuation")`:
  SavedModel with the TF-Hub ELMo module's `default` (also `serving_default`), `tokens`,
  `char_ids` and `char_ids_with_state` signatures; it runs in TF Serving and in TF-Hub's
  `KerasLayer` (the mix's weights trainable).
- `export_onnx(bilm, path, scalar_mix=None, stateful=False, opset=17,
  input_form="token_index")`: ONNX via tf2onnx.
- `quantize_onnx(source, destination)`: int8 dynamic quantization.
- `export_model(options_path, weights_path, output, formats="all", overwrite=False, ...,
  progress=None)`: all of it into one folder, written atomically (what `elmo-keras export`
  runs), reporting each stage to `progress`.
- `export_preset(preset, output, ...)`: the same for `BiLM.from_preset(preset)` (a name, a
  model folder, a `save_to_preset` folder, an ELMoForManyLangs model with its dictionaries).
- `require_onnx()`: raises unless the `[onnx]` extra (tf2onnx, onnx, onnxruntime) is installed.

The submodules import TensorFlow; this package imports them on first use.
"""

import importlib

_EXPORTS = {
    "export_savedmodel": "savedmodel",
    "ElmoServingModule": "savedmodel",
    "export_onnx": "onnx",
    "quantize_onnx": "onnx",
    "require_onnx": "onnx",
    "export_model": "writer",
    "export_preset": "writer",
    "atomic_directory": "writer",
}

# What traces the model in TensorFlow; `quantize_onnx`, `require_onnx` and `atomic_directory`
# need only ONNX or files.
_TRACING = {"export_savedmodel": "tensorflow", "ElmoServingModule": "tensorflow"}
_TRACING.update(
    export_onnx="onnx", export_model="onnx", export_preset="onnx"
)  # `[onnx]` brings TensorFlow too

__all__ = sorted(_EXPORTS)


def __getattr__(name):
    if name in _EXPORTS:
        if name in _TRACING:
            from elmo_keras.installs import require_module  # noqa: PLC0415

            require_module("tensorflow", f"elmo_keras.export.{name}", _TRACING[name])
        module = importlib.import_module(f"{__name__}.{_EXPORTS[name]}")
        return getattr(module, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
