"""Write a complete export folder atomically: SavedModel, ONNX models, options and a manifest.

Everything is written into a temporary folder next to the output and renamed into place at the
end (`elmo_keras.file_io.files.atomic_directory`), so an export that fails (or is interrupted)
leaves nothing half-written, and an existing output is only replaced when asked to and only if it is
an earlier export (`check_export_output`). SIGTERM removes the staging folder before exiting;
one left by SIGKILL is removed by the next export to the same output.

Layout of the output folder:

```
OUTPUT/
  savedmodel/           SavedModel (saved_model.pb, variables/)     --format savedmodel|all
  model.onnx            ONNX, token_char_ids + token_index in        --format onnx|all
  model_stateful.onnx   ONNX with state_h/state_c in and out         --onnx-state
  model.int8.onnx       int8 dynamically quantized model.onnx        --quantize
  options.json          the biLM's options
  export.json           what was written, from what, by which version
```

`export_model(options_path, weights_path, output, ...)` reads bilm-tf's two files;
`export_preset(preset, output, ...)` loads `BiLM.from_preset(preset)` instead (a name or a
folder: an ELMoForManyLangs model comes with its dictionaries, which the exports carry).
`export_model(..., progress=callback)` reports each stage (`"loading weights"`, `"SavedModel"`,
`"ONNX"`, `"ONNX stateful"`, `"int8"`): `callback(stage, None)` when it starts and
`callback(stage, seconds)` when it has finished.
"""

import contextlib
import json
import os
import pathlib
import time

from elmo_keras.file_io.files import atomic_directory, check_output, check_writable
from elmo_keras.file_io.output_access import check_replaceable, read_marker
from elmo_keras.text.tokenization import DEFAULT_TOKENIZATION_MODE

FORMATS = ("savedmodel", "onnx")
SAVEDMODEL_DIR = "savedmodel"
ONNX_FILE = "model.onnx"
ONNX_STATEFUL_FILE = "model_stateful.onnx"
ONNX_INT8_FILE = "model.int8.onnx"
MANIFEST_FILE = "export.json"
# Everything an export folder holds, in every version (0.1.0 on): only such a folder, with an
# `export.json` of elmo-keras, is replaced by `overwrite` (`output_access.check_replaceable`).
EXPORT_NAMES = frozenset(
    (SAVEDMODEL_DIR, ONNX_FILE, ONNX_STATEFUL_FILE, ONNX_INT8_FILE, "options.json", MANIFEST_FILE)
)


def is_export_folder(folder, entries):
    """Whether the folder (its entries' names given) is an export this package wrote."""
    manifest = read_marker(pathlib.Path(folder) / MANIFEST_FILE)
    return (
        entries <= EXPORT_NAMES
        and manifest is not None
        and manifest.get("producer") == "elmo-keras"
    )


EXPORT_FOLDER = ("an export folder", is_export_folder)


def check_export_output(output, overwrite=False, inputs=()):
    """Raises before any work unless `output` may be written: new, or with `overwrite` an
    earlier export (never a run folder, the working folder, a folder holding `inputs` or
    anything else), in a folder where files can be created. Returns `output` as a path.

    Raises:
        FileExistsError: `output` exists and `overwrite` is false.
        ValueError: `output` is not a folder, or not an export (one line: what it holds).
        OSError: nothing can be created there.
    """
    output = check_output(output, overwrite, kind="directory")
    check_replaceable(output, EXPORT_FOLDER, inputs)
    check_writable(output)
    return output


def _check_formats(formats):
    if isinstance(formats, str):
        formats = FORMATS if formats == "all" else (formats,)
    formats = tuple(formats)
    bad = [f for f in formats if f not in FORMATS]
    if bad or not formats:
        raise ValueError(
            f"`formats` must be 'all' or a non-empty subset of {FORMATS}. "
            f"Received: formats={formats!r}"
        )
    return formats


@contextlib.contextmanager
def _stage(progress, name):
    """Reports the start of a stage and, when it finishes, its wall time to `progress`."""
    if progress is None:
        yield
        return
    progress(name, None)
    start = time.monotonic()
    yield
    progress(name, time.monotonic() - start)


def export_model(
    options_path,
    weights_path,
    output,
    formats="all",
    overwrite=False,
    onnx_state=False,
    quantize=False,
    opset=17,
    tokenization_mode=DEFAULT_TOKENIZATION_MODE,
    use_tensorflow_text=False,
    scalar_mix=None,
    progress=None,
):
    """Loads a biLM from bilm-tf files and writes the requested exports into `output`.

    Args:
        options_path: str or path-like. bilm-tf `options.json`.
        weights_path: str or path-like. bilm-tf hdf5 weights.
        output: str or path-like. The export folder (see the module docstring for its layout).
        formats: str or tuple. `"all"`, `"savedmodel"`, `"onnx"` or a tuple of them. Defaults
            to `"all"`.
        overwrite: bool. Replace an existing `output`. Defaults to `False`.
        onnx_state: bool. Also write `model_stateful.onnx`. Defaults to `False`.
        quantize: bool. Also write `model.int8.onnx`. Defaults to `False`.
        opset: int. ONNX opset (>= 17). Defaults to `17`.
        tokenization_mode: str. The SavedModel `default` signature's split: `"punctuation"`
            (every elmo-keras entry point's) or `"whitespace"` (TF-Hub's ELMo module's).
            Defaults to `"punctuation"`.
        use_tensorflow_text: bool. Split with tensorflow-text in the SavedModel. Defaults to
            `False`.
        scalar_mix: `ScalarMix` or `None`. The mix behind `elmo`. Defaults to uniform.
        progress: callable or `None`. `progress(stage, seconds)`: `seconds` is `None` when a
            stage starts, its wall time in seconds when it ends (see the module docstring).
            Defaults to `None`, silent.

    Returns:
        The manifest dict (also written as `export.json`).

    Raises:
        ModuleNotFoundError: an ONNX format is asked for and the `[onnx]` extra is missing
            (raised before anything is loaded or written).
    """
    for name, path in (("options_path", options_path), ("weights_path", weights_path)):
        if not pathlib.Path(path).is_file():
            raise FileNotFoundError(f"`{name}` is not a file. Received: {name}={str(path)!r}")

    def load():
        from elmo_keras.models import BiLM  # noqa: PLC0415
        from elmo_keras.weights import read_options  # noqa: PLC0415

        return BiLM.from_bilm_tf(options_path, weights_path), read_options(options_path)

    # Absolute, as resolved: the record is read from other folders than the one it was typed in.
    record = {
        "options": os.fspath(pathlib.Path(options_path).resolve()),
        "weights": os.fspath(pathlib.Path(weights_path).resolve()),
    }
    return _export(
        load,
        record,
        (options_path, weights_path),
        output,
        formats=formats,
        overwrite=overwrite,
        onnx_state=onnx_state,
        quantize=quantize,
        opset=opset,
        tokenization_mode=tokenization_mode,
        use_tensorflow_text=use_tensorflow_text,
        scalar_mix=scalar_mix,
        progress=progress,
    )


def export_preset(preset, output, **kwargs):
    """Loads a biLM with `BiLM.from_preset(preset)` and writes the exports as `export_model`.

    The model's own character and word dictionaries (an ELMoForManyLangs model's) come along:
    the SavedModel makes ids through them in its graph, the ONNX model carries them in its
    metadata (`OnnxEmbedder` reads them). `export.json` records `preset` instead of the two
    files; `options.json` is the model's architecture in bilm-tf's form.

    Args:
        preset: str or path-like. A preset name (an ELMoForManyLangs language:
            `efml_<language>`), a model folder, a `save_to_preset` folder or an
            ELMoForManyLangs model folder.
        output: str or path-like. The export folder.
        **kwargs: the other arguments of `export_model` (`formats`, `overwrite`, ...).

    Returns:
        The manifest dict (also written as `export.json`).
    """
    from elmo_keras.presets import PRESETS  # noqa: PLC0415

    # A name wins over a folder of that name (`resolve_preset`); a folder is never replaced.
    named = os.fspath(preset).lower() in PRESETS or not pathlib.Path(preset).is_dir()
    inputs = () if named else (pathlib.Path(preset),)

    def load():
        from elmo_keras.models import BiLM  # noqa: PLC0415

        bilm = BiLM.from_preset(preset)
        return bilm, bilm.to_options()

    given = os.fspath(preset if named else pathlib.Path(preset).resolve())
    return _export(load, {"preset": given}, inputs, output, **kwargs)


def _export(
    load,
    record,
    inputs,
    output,
    formats="all",
    overwrite=False,
    onnx_state=False,
    quantize=False,
    opset=17,
    tokenization_mode=DEFAULT_TOKENIZATION_MODE,
    use_tensorflow_text=False,
    scalar_mix=None,
    progress=None,
):
    """Checks, loads the biLM and its options with `load()` and writes the export folder
    (`export_model`); `record` (where the biLM came from) goes into the manifest, nothing
    inside `inputs` is replaced."""
    formats = _check_formats(formats)
    if (onnx_state or quantize) and "onnx" not in formats:
        raise ValueError(
            "`onnx_state` and `quantize` need the ONNX format. "
            f"Received: formats={formats!r}, onnx_state={onnx_state}, quantize={quantize}"
        )
    output = check_export_output(output, overwrite, inputs)  # fail before the slow part
    if "onnx" in formats:
        from elmo_keras.export.onnx import require_onnx  # noqa: PLC0415

        require_onnx()  # before the slow SavedModel, not after it

    import elmo_keras  # noqa: PLC0415
    from elmo_keras.weights import write_options  # noqa: PLC0415

    with _stage(progress, "loading weights"):
        bilm, options = load()
    manifest = {
        "producer": "elmo-keras",
        "elmo_keras_version": elmo_keras.__version__,
        **record,
        "files": {},
    }
    with atomic_directory(output, overwrite, EXPORT_FOLDER, inputs) as staging:
        write_options(options, staging / "options.json")
        if "savedmodel" in formats:
            from elmo_keras.export.savedmodel import export_savedmodel  # noqa: PLC0415

            with _stage(progress, "SavedModel"):
                export_savedmodel(
                    bilm,
                    staging / SAVEDMODEL_DIR,
                    scalar_mix=scalar_mix,
                    tokenization_mode=tokenization_mode,
                    use_tensorflow_text=use_tensorflow_text,
                )
            manifest["files"]["savedmodel"] = SAVEDMODEL_DIR
            manifest["savedmodel"] = {
                "tokenization_mode": tokenization_mode,
                "needs_tensorflow_text": bool(use_tensorflow_text),
            }
        if "onnx" in formats:
            from elmo_keras.export.onnx import export_onnx, quantize_onnx  # noqa: PLC0415

            with _stage(progress, "ONNX"):
                export_onnx(bilm, staging / ONNX_FILE, scalar_mix=scalar_mix, opset=opset)
            manifest["files"]["onnx"] = ONNX_FILE
            manifest["opset"] = opset
            if onnx_state:
                with _stage(progress, "ONNX stateful"):
                    export_onnx(
                        bilm,
                        staging / ONNX_STATEFUL_FILE,
                        scalar_mix=scalar_mix,
                        stateful=True,
                        opset=opset,
                    )
                manifest["files"]["onnx_stateful"] = ONNX_STATEFUL_FILE
            if quantize:
                with _stage(progress, "int8"):
                    quantize_onnx(staging / ONNX_FILE, staging / ONNX_INT8_FILE)
                manifest["files"]["onnx_int8"] = ONNX_INT8_FILE
        (staging / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest
