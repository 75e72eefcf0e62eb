"""`elmo-keras export`: write a biLM as a SavedModel and/or ONNX model for serving."""

import pathlib

from elmo_keras.cli import CommandError
from elmo_keras.cli._common import add_tokenization_argument, check_input_file, require_engine


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "export",
        help="export a biLM to SavedModel and/or ONNX for serving",
        description=(
            "Export a biLM (bilm-tf options + hdf5 weights, or a training output folder) to a "
            "SavedModel (TF Serving; TF-Hub-style signatures) and/or ONNX (ONNX Runtime). "
            "Writes into a temporary folder next to OUTPUT and renames it into place at the end."
        ),
    )
    source = parser.add_argument_group(
        "source (--options and --weights, or --run-dir, or --preset)"
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
        help="a named biLM: small, medium, original, original_5.5b (downloaded once into the "
        "cache), mini_en and tiny (packaged), or a model folder; see `elmo-keras presets`",
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
    """Local `(options, weights)` paths from `--options`/`--weights` (paths or URLs; a URL is
    downloaded once into the cache), `--run-dir` or `--preset`."""
    from elmo_keras.file_io.download import cached_path  # noqa: PLC0415
    from elmo_keras.presets import PRESETS, find_model_files, resolve_preset  # noqa: PLC0415

    if args.run_dir and (args.options or args.weights):
        raise CommandError("give either --run-dir or --options and --weights, not both")
    if args.preset and (args.run_dir or args.options or args.weights):
        raise CommandError("give either --preset or --run-dir or --options and --weights")
    if args.run_dir and not pathlib.Path(args.run_dir).is_dir():
        name = str(args.run_dir).lower() in PRESETS
        hint = f" (for the preset: --preset {args.run_dir})" if name else ""
        raise CommandError(f"--run-dir {str(args.run_dir)!r} is not a folder{hint}")
    if not (args.preset or args.run_dir or (args.options and args.weights)):
        raise CommandError("give --options and --weights (or --run-dir or --preset)")
    check_input_file("--options", args.options)
    check_input_file("--weights", args.weights)
    try:
        if args.preset:
            return resolve_preset(args.preset)
        if args.run_dir:
            return find_model_files(args.run_dir)
        return cached_path(args.options), cached_path(args.weights)
    except ValueError as error:
        flag = "--preset" if args.preset else "--run-dir" if args.run_dir else "--options/--weights"
        raise CommandError(f"{flag}: {error}") from None


def run(args):
    options, weights = resolve_source(args)
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
    from elmo_keras.export.writer import check_export_output, export_model  # noqa: PLC0415

    try:  # the output's problems are found before the slow work
        check_export_output(args.output, args.overwrite, (options, weights))
    except FileExistsError as error:
        message = str(error).replace("`overwrite=True` (`--overwrite`)", "--overwrite")
        raise CommandError(message) from None
    from elmo_keras.cli import print_stage  # noqa: PLC0415

    manifest = export_model(
        options,
        weights,
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
