"""`elmo-keras snapshot`: a training checkpoint's weights in the published layout."""

import os
import pathlib

from elmo_keras.cli import CommandError


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "snapshot",
        help="write a training checkpoint's weights (options.json, lm_weights.hdf5, ...)",
        description=(
            "Write the biLM of a checkpoint of an `elmo-keras train` run (running or stopped) "
            "as options.json, lm_weights.hdf5 (published layout), vocab.txt and softmax.hdf5, "
            "ready for `elmo-keras embed`, `evaluate`, AllenNLP and bilm-tf."
        ),
    )
    parser.add_argument("--run", required=True, help="the --output folder of the training run")
    parser.add_argument(
        "--checkpoint", help="checkpoint name (e.g. ckpt-2000) or prefix; default: the latest"
    )
    parser.add_argument("--output", required=True, help="where the weight files go")
    parser.add_argument(
        "--overwrite", action="store_true", help="replace weight files already in --output"
    )
    return parser


def run(args):
    if not os.path.isfile(os.path.join(args.run, "training_config.json")):
        raise CommandError(f"--run: not a training run (no training_config.json): {args.run}")
    from elmo_keras.output_access import output_lock

    output = pathlib.Path(args.output).absolute()
    output.parent.mkdir(parents=True, exist_ok=True)
    with output_lock(output):  # a second snapshot into --output ends with one line, exit 1
        existing = [
            name for name in ("options.json", "lm_weights.hdf5") if (output / name).exists()
        ]
        if existing and not args.overwrite:
            raise CommandError(
                f"--output {args.output} already holds {', '.join(existing)}; pass --overwrite"
            )
        from elmo_keras.cli import import_tensorflow

        import_tensorflow()
        from elmo_keras.training.finite import NonFiniteError
        from elmo_keras.training.pipeline import export_checkpoint

        try:
            written = export_checkpoint(args.run, args.output, args.checkpoint)
        except NonFiniteError:
            raise  # a failure (exit code 1), not a usage mistake
        except ValueError as error:
            raise CommandError(str(error)) from None
    print(
        f"wrote {args.output}/options.json, lm_weights.hdf5, vocab.txt, softmax.hdf5 from {written}"
    )
    return 0
