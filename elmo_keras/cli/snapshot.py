"""`elmo-keras snapshot`: a training checkpoint's weights in the published layout."""

import contextlib
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
        "--overwrite",
        action="store_true",
        help="replace the model files (options.json, lm_weights.hdf5, vocab.txt, softmax.hdf5) "
        "already in --output",
    )
    return parser


def run(args):
    if not os.path.isfile(os.path.join(args.run, "training_config.json")):
        raise CommandError(f"--run: not a training run (no training_config.json): {args.run}")
    from elmo_keras.file_io.output_access import output_lock
    from elmo_keras.training.run.run_folder import LOCK_FILE, lock_run

    output = pathlib.Path(args.output).absolute()
    output.parent.mkdir(parents=True, exist_ok=True)
    own_run = output.resolve() == pathlib.Path(args.run).resolve()
    with contextlib.ExitStack() as held:
        held.enter_context(output_lock(output))  # a second snapshot ends with one line, exit 1
        if own_run or os.path.lexists(output / LOCK_FILE):
            held.enter_context(lock_run(output))  # a live run's folder is refused
        _check_output(args, output, own_run)
        _select_backend(args.run)
        from elmo_keras.training.common.finite import NonFiniteError
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


def _check_output(args, output, own_run):
    """Only a model's files (or the run's own folder's) are replaced, and only with
    --overwrite; another run's folder never (issue 39, point 1)."""
    from elmo_keras.training.model_files import MODEL_FILES, OPTIONS_FILE, WEIGHTS_FILE

    if not own_run and (output / "training_config.json").exists():
        raise CommandError(
            f"--output {args.output} is the folder of another training run; a snapshot there "
            "would replace its files: choose another output"
        )
    existing = [name for name in MODEL_FILES if os.path.lexists(output / name)]
    if existing and not args.overwrite:
        raise CommandError(
            f"--output {args.output} already holds {', '.join(existing)}; pass --overwrite"
        )
    odd = [name for name in existing if not (output / name).is_file()]
    model = os.path.isfile(output / OPTIONS_FILE) and os.path.isfile(output / WEIGHTS_FILE)
    if odd:
        raise CommandError(
            f"--output {args.output}: {', '.join(odd)} are not regular files; they are not "
            "replaced: choose another output"
        )
    if existing and not (own_run or model):
        raise CommandError(
            f"--output {args.output} holds {', '.join(existing)} but no model (options.json and "
            "lm_weights.hdf5); they are not replaced: choose another output"
        )


def _select_backend(run_dir):
    """The JAX trainer's checkpoints (`ckpt-N.npz`) are read on any backend, so Keras starts
    on the installed one (JAX alone in a `[jax]` install); TensorFlow's need TensorFlow."""
    from elmo_keras.cli import import_tensorflow
    from elmo_keras.cli._common import select_keras_backend
    from elmo_keras.installs import require_module
    from elmo_keras.training.backends import BACKENDS, checkpoint_backend
    from elmo_keras.training.run.run_folder import CHECKPOINTS

    if checkpoint_backend(pathlib.Path(run_dir) / CHECKPOINTS) is BACKENDS["jax"]:
        select_keras_backend("keras")
        return
    require_module("tensorflow", "a checkpoint of the TensorFlow trainer", "tensorflow")
    import_tensorflow()
