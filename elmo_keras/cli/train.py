"""`elmo-keras train`: pretrain a biLM on text (one device, several GPUs, several machines),
from scratch or from a trained biLM (`--init-from`), and resume it.

The flags are those of the fields of `elmo_keras.training.run.training_run.TrainingRun` (each
setting's flag, help and check are written there once, and checked once, when the
`TrainingRun` is made), plus `--init-options`/`--init-weights` (a pair of published
files for `init_from`) and `--backend` (which trainer runs).
"""

import pathlib
import sys

from elmo_keras.cli import CommandError
from elmo_keras.cli._common import check_input_file, require_engine, select_keras_backend
from elmo_keras.training.run.training_run import SETTINGS, TrainingRun


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "train",
        help="pretrain a biLM on text files",
        description=(
            "Pretrain an ELMo biLM on raw text (one sentence or paragraph per line) with a "
            "sampled softmax, checkpoints and exact resume; writes options.json, "
            "lm_weights.hdf5 (published layout), vocab.txt and softmax.hdf5 to --output."
        ),
    )
    _add_settings(parser)
    parser.add_argument(
        "--init-options", metavar="FILE_OR_URL", help="with --init-weights: published files"
    )
    parser.add_argument(
        "--init-weights", metavar="FILE_OR_URL", help="with --init-options: published files"
    )
    parser.add_argument(
        "--backend",
        default="keras",
        choices=["keras", "tensorflow", "jax"],
        help="keras: the KERAS_BACKEND environment variable's (else TensorFlow; with --resume "
        "the trainer that wrote the run's checkpoints); tensorflow or jax: that trainer (the "
        "same run folder and weight files) (default: keras)",
    )
    return parser


def _training_run(args):
    """The command line's `TrainingRun` (the flags of its fields, and the pair of
    published files that `--init-options` and `--init-weights` make)."""
    if (args.init_options is None) != (args.init_weights is None):
        raise CommandError("--init-options and --init-weights go together (the published files)")
    if args.init_options is None:
        return _from_arguments(args)
    if args.init_from is not None:
        raise CommandError("give --init-from or --init-options/--init-weights, not both")
    return _from_arguments(args, init_from=(args.init_options, args.init_weights))


def run(args):
    from elmo_keras.training.run.setting_error import SettingError
    from elmo_keras.training.run.training_run import FLAGS

    try:
        run = _training_run(args)  # every setting checked before anything is imported
        for flag, path in (
            ("--vocab", args.vocab_file),
            ("--init-options", args.init_options),
            ("--init-weights", args.init_weights),
        ):
            check_input_file(flag, path)  # after the conflicts between flags
        if args.resume:
            args.backend = resume_backend(args.backend, args.output_dir)
        select_keras_backend(args.backend)
        # Both trainers are TensorFlow's or JAX's: say so before the vocabulary is built.
        require_engine("train", ("tensorflow", "jax"), "use --backend jax (or tensorflow)")
        gpu_flags = gpu_flags_on_cpu(args)
        if gpu_flags and not _has_gpu():  # it runs on the CPU: say what those flags do there
            for line in gpu_flags:
                print(f"elmo-keras train: warning: no GPU found; {line}", file=sys.stderr)
        from elmo_keras.training.pipeline import train

        summary = train(run)
    except SettingError as error:
        raise CommandError(error.message(FLAGS)) from None
    trainer = summary.pop("trainer")
    result = summary["train"]
    if not trainer.is_chief:
        return 0
    print(
        f"trained {result['steps']} steps ({result['stopped']}), {result['tokens']} tokens in "
        f"{result['seconds']:.0f} s ({result['tokens_per_second']:.0f} tokens/s)"
    )
    if "valid" in summary:
        valid = summary["valid"]
        print(
            f"valid perplexity: forward {valid['perplexity_forward']:.2f}, backward "
            f"{valid['perplexity_backward']:.2f}, average {valid['perplexity']:.2f} "
            f"({valid['tokens']} tokens)"
        )
    if summary["started_from"]:
        print(f"started from {summary['started_from']}")
    print(f"wrote {args.output_dir}/options.json, lm_weights.hdf5, vocab.txt, softmax.hdf5")
    return 130 if result["stopped"] == "signal" else 0


def resume_backend(choice, output_dir):
    """The trainer that resumes a run: the one whose checkpoints are in its folder (the JAX
    trainer writes `ckpt-N.npz`, TensorFlow's `ckpt-N.index`) when `--backend` is left at
    `keras`; another one given explicitly is one line naming both."""
    from elmo_keras.training.backends import checkpoint_backend
    from elmo_keras.training.run.run_folder import CHECKPOINTS

    folder = pathlib.Path(output_dir) / CHECKPOINTS
    written = checkpoint_backend(folder)
    if written is None or choice == written.name:
        return choice
    if choice == "keras":
        return written.name
    raise CommandError(
        f"--backend {choice}: the checkpoints in {folder} were written by the "
        f"{written.title} trainer; resume with --backend {written.name} (or leave --backend out)"
    )


def gpu_flags_on_cpu(args):
    """What each GPU flag given does on a machine without a GPU: one line each (it still runs)."""
    lines = []
    if args.strategy == "mirrored":
        lines.append(
            "--strategy mirrored runs one replica per CPU device (usually one: no speed-up)"
        )
    if args.mixed_precision == "bfloat16":
        lines.append(
            "--mixed-precision bfloat16 computes in bfloat16 on the CPU (less exact; faster "
            "than float32 only on CPUs with avx512_bf16 or AMX)"
        )
    if args.jit_compile:
        lines.append(
            "--xla compiles the step with XLA for the CPU (it runs; its speed-up is a GPU's)"
        )
    if args.tf32:
        lines.append("--tf32 does nothing on the CPU (float32 stays exact)")
    return lines


def _has_gpu():
    """Whether the backend chosen (`select_keras_backend`, already imported) sees a GPU."""
    from elmo_keras.installs import configured_backend
    from elmo_keras.training.backends import training_backend

    return training_backend(configured_backend()).has_gpu()


def _add_settings(parser):
    """Adds a flag for every setting that has one, its help ending with its default. The
    values are checked once, when `_from_arguments` makes the `TrainingRun`."""
    for s in SETTINGS:
        if s.flag is None:
            continue
        if s.switch:
            parser.add_argument(s.flag, dest=s.name, action="store_true", help=s.help)
            continue
        metavar = s.metavar or s.flag.removeprefix("--").replace("-", "_").upper()
        kwargs = {"help": s.help + _default_text(s), "metavar": None if s.choices else metavar}
        kwargs["type"] = s.parse
        if s.required and not s.resumable:  # never None: the flag is required
            kwargs["required"] = True
        if s.choices:
            kwargs["choices"] = list(s.choices)
        parser.add_argument(s.flag, dest=s.name, **kwargs)


def _default_text(setting):
    if setting.resumable:
        new_run = "" if setting.saved is None else f"; a new run's: {setting.saved}"
        return f" (default: the saved run's with --resume{new_run})"
    if setting.default is None or setting.required:
        return ""
    return f" (default: {setting.default})"


def _from_arguments(args, **given):
    """The `TrainingRun` of parsed flags (`_add_settings`); `given` adds or replaces fields."""
    values = {}
    for s in SETTINGS:
        value = getattr(args, s.name, None) if s.flag is not None else None
        if s.switch:
            value = (not s.negated) if value else None  # given or not
        if value is not None:
            values[s.name] = value
    values.update(given)
    for s in SETTINGS:
        if s.required:
            values.setdefault(s.name, None)
    return TrainingRun(**values)
