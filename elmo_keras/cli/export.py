"""`elmo-keras export`: write a biLM as a SavedModel and/or ONNX model for serving."""

import pathlib

from elmo_keras.cli import CommandError
from elmo_keras.cli._common import add_tokenization_argument, require_engine


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "export",
        help="export a biLM to SavedModel and/or ONNX for serving",
        description=(
            "Export a biLM (bilm-tf options + hdf5 weights, a training output folder, a preset "
            "name or folder, an ELMoForManyLangs model with its own dictionaries) to a "
            "SavedModel (TF Serving; TF-Hub-style signatures) and/or ONNX (ONNX Runtime). "
            "Writes into a temporary folder next to OUTPUT and renames it into place at the end."
        ),
    )
    source = parser.add_argument_group(
        "source (--options and --weights, or --run-dir, or --preset or --model)"
    )
    source.add_argument("--options", help="bilm-tf options.json, a path or URL")
    source.add_argument("--weights", help="bilm-tf hdf5 weights (lm_weights.hdf5), a path or URL")
    source.add_argument(
        "--run-dir",
        help="a training output folder holding options.json and lm_weights.hdf5",
    )
    source.add_argument(
        "--preset",
        metavar="NAME",
        help="a named biLM: small, medium, original, original_5.5b, efml_<language> "
        "(downloaded once into the cache), mini_en and tiny (packaged), or a model folder; see "
        "`elmo-keras presets`",
    )
    source.add_argument(
        "--model",
        help="as `elmo-keras embed --model`: a preset name, a model folder, a save_to_preset "
        "folder or an ELMoForManyLangs model folder (its dictionaries are exported with it)",
    )
    parser.add_argument("--output", required=True, help="the export folder to create")
    parser.add_argument(
        "--format",
        choices=("savedmodel", "onnx", "all"),
        default="all",
        help="what to write (default: all)",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace OUTPUT if it is an earlier export (never another folder)",
    )
    parser.add_argument(
        "--onnx-state",
        action="store_true",
        help="also write model_stateful.onnx (state_h/state_c in and out, for streaming)",
    )
    parser.add_argument(
        "--quantize",
        action="store_true",
        help="also write model.int8.onnx (int8 dynamic quantization)",
    )
    parser.add_argument("--opset", type=int, default=17, help="ONNX opset, >= 17 (default: 17)")
    # `--tokenization` is the 0.1.0 spelling.
    add_tokenization_argument(parser, "the SavedModel's `default` signature splits sentences")
    parser.add_argument(
        "--tensorflow-text",
        action="store_true",
        help="split with tensorflow-text in the SavedModel (loading then needs "
        "`import tensorflow_text`)",
    )
    return parser


def resolve_source(args):
    """What the source flags name, any download done: `(options, weights)` local paths
    (`--options`/`--weights`, paths or URLs, or `--run-dir`), else the preset name or folder
    of `--preset`/`--model`, which `export_preset` loads with its own config (an
    ELMoForManyLangs model's dictionaries); `elmo_keras.cli.embed.resolve_model` resolves
    these as for every command."""
    from elmo_keras.cli.embed import resolve_model  # noqa: PLC0415
    from elmo_keras.presets import PRESETS, find_model_files  # noqa: PLC0415

    named = args.preset or args.model
    if args.run_dir and (args.options or args.weights):
        raise CommandError("give either --run-dir or --options and --weights, not both")
    if named and (args.run_dir or args.options or args.weights):
        raise CommandError(
            "give either --preset or --model or --run-dir or --options and --weights"
        )
    if args.run_dir and not pathlib.Path(args.run_dir).is_dir():
        name = str(args.run_dir).lower() in PRESETS
        hint = f" (for the preset: --preset {args.run_dir})" if name else ""
        raise CommandError(f"--run-dir {str(args.run_dir)!r} is not a folder{hint}")
    if not (named or args.run_dir or (args.options and args.weights)):
        raise CommandError("give --options and --weights (or --run-dir or --preset)")
    if args.run_dir:
        try:
            return find_model_files(args.run_dir)
        except ValueError as error:
            raise CommandError(f"--run-dir: {error}") from None
    return resolve_model(args)


def run(args):
    source = resolve_source(args)
    if (args.onnx_state or args.quantize) and args.format == "savedmodel":
        raise CommandError("--onnx-state and --quantize need --format onnx or all")
    if args.opset < 17:
        raise CommandError(f"--opset must be 17 or newer, got {args.opset}")
    from elmo_keras.installs import require_module  # noqa: PLC0415

    # The export runs on TensorFlow; `[onnx]` brings it with the converter.
    extra = "tensorflow" if args.format == "savedmodel" else "onnx"
    require_module("tensorflow", f"--format {args.format}", extra)
    require_engine(
        "export", ("tensorflow",), "it traces the model there; set KERAS_BACKEND=tensorflow"
    )
    from elmo_keras.export import writer  # noqa: PLC0415

    named = () if isinstance(source, tuple) else (source,)
    # A preset's folder, like the two files, is never replaced (a name has none here).
    inputs = tuple(p for p in named if pathlib.Path(p).is_dir()) if named else source
    try:  # the output's problems are found before the slow work
        writer.check_export_output(args.output, args.overwrite, inputs)
    except FileExistsError as error:
        message = str(error).replace("`overwrite=True` (`--overwrite`)", "--overwrite")
        raise CommandError(message) from None
    from elmo_keras.cli import print_stage  # noqa: PLC0415

    # A preset name or folder loads with its own config (an ELMoForManyLangs model's
    # dictionaries); bilm-tf's two files as they are.
    export = writer.export_preset if named else writer.export_model
    manifest = export(
        *(named or source),
        args.output,
        formats=args.format,
        progress=print_stage,
        overwrite=args.overwrite,
        onnx_state=args.onnx_state,
        quantize=args.quantize,
        opset=args.opset,
        tokenization_mode=args.tokenization_mode,
        use_tensorflow_text=args.tensorflow_text,
    )
    files = ", ".join(manifest["files"].values())
    print(f"wrote {args.output}: {files}")
    return 0
