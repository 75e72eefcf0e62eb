"""`elmo-keras train`: pretrain a biLM on text (one device, several GPUs, several machines),
from scratch or from a trained biLM (`--init-from`), and resume it."""

import argparse
import os

from elmo_keras.cli import CommandError
from elmo_keras.cli._common import select_keras_backend
from elmo_keras.text.pretokenize import TOKENIZATION_MODES
from elmo_keras.training.distribute import STRATEGIES

# The flag of each `TrainingRun` field, for messages about settings that conflict.
FLAGS = {
    "config": "--config",
    "train_files": "--train",
    "batch_size": "--batch-size",
    "n_negative_samples": "--n-negative-samples",
    "optimizer": "--optimizer",
    "learning_rate": "--learning-rate",
    "seed": "--seed",
    "tokenization_mode": "--tokenization",
    "carry_state": "--no-carry-state",
    "vocab_file": "--vocab",
    "min_count": "--min-count",
    "max_vocab_size": "--max-vocab-size",
    "init_from": "--init-from",
    "new_vocab": "--new-vocab",
    "freeze_bilm_steps": "--freeze-bilm-steps",
    "resume": "--resume",
    "override": "--override",
}


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


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
    parser.add_argument("--train", help="glob of training text files")
    parser.add_argument("--valid", help="held-out text file: full-softmax perplexity at the end")
    parser.add_argument(
        "--config",
        help="tiny, cpu, small, medium, original, or a JSON file of bilm-tf options (default: "
        "small; with --init-from, the source's architecture and training settings)",
    )
    parser.add_argument("--output", required=True, help="the run's folder")
    stop = parser.add_mutually_exclusive_group()
    stop.add_argument("--steps", type=_positive_int, help="global steps to train")
    stop.add_argument("--epochs", type=_positive_int, help="passes over the training data")
    parser.add_argument(
        "--time-budget",
        type=_positive_float,
        metavar="SECONDS",
        help="stop (and checkpoint) after this much training time",
    )
    parser.add_argument(
        "--strategy",
        default="auto",
        choices=STRATEGIES,
        help="auto: every local GPU (TensorFlow) or every JAX device; default: one device",
    )
    parser.add_argument(
        "--backend",
        default="keras",
        choices=["keras", "tensorflow", "jax"],
        help="keras: the KERAS_BACKEND environment variable's (else TensorFlow); tensorflow or "
        "jax: that trainer (the same run folder and weight files; see docs/training.md)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run in --output from its newest readable checkpoint",
    )
    parser.add_argument(
        "--override",
        action="store_true",
        help="with --resume: apply (and record) flags that differ from the saved run",
    )
    _add_init_arguments(parser)
    _add_data_arguments(parser)
    _add_model_arguments(parser)
    parser.add_argument("--checkpoint-every", type=_positive_int, default=1000)
    parser.add_argument("--keep-checkpoints", type=_positive_int, default=3)
    parser.add_argument("--log-every", type=_positive_int, default=50)
    parser.add_argument("--seed", type=int, help="weights, data order, samples (default: 0)")
    parser.add_argument(
        "--eval-max-tokens",
        type=_positive_int,
        help="evaluate --valid on about this many tokens only",
    )
    return parser


def _add_init_arguments(parser):
    """Where the weights start: a trained biLM instead of random weights."""
    parser.add_argument(
        "--init-from",
        metavar="SOURCE",
        help="start from a trained biLM: a run folder (its vocabulary and softmax come along) "
        "or a preset name (tiny, small, medium, original, original_5.5b; a new softmax)",
    )
    parser.add_argument(
        "--init-options", metavar="FILE_OR_URL", help="with --init-weights: published files"
    )
    parser.add_argument(
        "--init-weights", metavar="FILE_OR_URL", help="with --init-options: published files"
    )
    parser.add_argument(
        "--new-vocab",
        action="store_true",
        help="with --init-from RUN_FOLDER: a new vocabulary and softmax for the new text",
    )
    parser.add_argument(
        "--freeze-bilm-steps",
        type=int,
        metavar="N",
        help="with --init-from: train only the softmax for the first N steps",
    )


def _add_data_arguments(parser):
    parser.add_argument("--vocab", help="an existing vocabulary file (bilm-tf format)")
    parser.add_argument("--min-count", type=_positive_int, help="default: 1")
    parser.add_argument("--max-vocab-size", type=_positive_int)
    parser.add_argument("--tokenization", choices=TOKENIZATION_MODES, help="default: whitespace")


def _add_model_arguments(parser):
    """Overrides of the configuration and how the step runs."""
    parser.add_argument("--batch-size", type=_positive_int, help="global batch (rows)")
    parser.add_argument(
        "--n-negative-samples",
        type=int,
        metavar="N",
        help="sampled-softmax candidates (0: full softmax)",
    )
    parser.add_argument("--optimizer", choices=["adagrad", "adam"])
    parser.add_argument("--learning-rate", type=_positive_float)
    parser.add_argument(
        "--mixed-precision", choices=["bfloat16"], help="compute in bfloat16 (GPUs, TPUs)"
    )
    parser.add_argument("--xla", action="store_true", help="compile each replica's step (XLA)")
    parser.add_argument(
        "--no-carry-state", action="store_true", help="start every window from zero LSTM state"
    )


def _check(args):
    """Turns the user's mistakes into one-line errors."""
    from elmo_keras.training.configs import CONFIGS

    if args.resume:
        saved = os.path.join(args.output, "training_config.json")
        if not os.path.isfile(saved):
            raise CommandError(f"--resume: no previous run in {args.output} ({saved} not found)")
    elif args.train is None:
        raise CommandError("--train is required (a glob of text files)")
    _check_init(args)
    if args.config is not None and args.config not in CONFIGS and not os.path.isfile(args.config):
        raise CommandError(
            f"--config must be one of {', '.join(CONFIGS)} or a JSON file; got {args.config!r}"
        )
    if args.steps is None and args.epochs is None and args.time_budget is None:
        raise CommandError("give --steps, --epochs or --time-budget")
    if args.valid is not None and not os.path.isfile(args.valid):
        raise CommandError(f"--valid: file not found: {args.valid}")
    if args.n_negative_samples is not None and args.n_negative_samples < 0:
        raise CommandError("--n-negative-samples must be >= 0")


def _check_init(args):
    if (args.init_options is None) != (args.init_weights is None):
        raise CommandError("--init-options and --init-weights go together (the published files)")
    if args.init_from is not None and args.init_options is not None:
        raise CommandError("give --init-from or --init-options/--init-weights, not both")
    if args.init_from is not None:
        from elmo_keras.presets import PRESETS

        if args.init_from.lower() not in PRESETS and not os.path.isdir(args.init_from):
            raise CommandError(
                f"--init-from must be a run folder or a preset ({', '.join(PRESETS)}); "
                f"got {args.init_from!r}"
            )
    if args.override and not args.resume:
        raise CommandError("--override applies to --resume (flags that differ from the saved run)")
    if args.freeze_bilm_steps is not None and args.freeze_bilm_steps < 0:
        raise CommandError(f"--freeze-bilm-steps must be >= 0; got {args.freeze_bilm_steps}")
    started = args.init_from is not None or args.init_options is not None
    for flag, given in (
        ("--new-vocab", args.new_vocab),
        ("--freeze-bilm-steps", args.freeze_bilm_steps),
    ):
        if given and not started and not args.resume:
            raise CommandError(f"{flag} needs --init-from (or --init-options/--init-weights)")


def _training_run(args):
    """The command line's `TrainingRun`."""
    from elmo_keras.training.run_config import TrainingRun

    steps = args.steps
    if steps is None and args.epochs is None:
        steps = 10**12  # only the time budget stops the run
    init_from = args.init_from
    if args.init_options is not None:
        init_from = (args.init_options, args.init_weights)
    return TrainingRun(
        train_files=args.train,
        output_dir=args.output,
        config=args.config,
        valid_files=args.valid,
        steps=steps,
        epochs=args.epochs,
        batch_size=args.batch_size,
        strategy=args.strategy,
        resume=args.resume,
        seed=args.seed,
        vocab_file=args.vocab,
        min_count=args.min_count,
        max_vocab_size=args.max_vocab_size,
        tokenization_mode=args.tokenization,
        checkpoint_every=args.checkpoint_every,
        keep_checkpoints=args.keep_checkpoints,
        time_budget_s=args.time_budget,
        mixed_precision=args.mixed_precision,
        jit_compile=args.xla,
        carry_state=False if args.no_carry_state else None,
        n_negative_samples=args.n_negative_samples,
        optimizer=args.optimizer,
        learning_rate=args.learning_rate,
        log_every=args.log_every,
        eval_max_tokens=args.eval_max_tokens,
        init_from=init_from,
        new_vocab=args.new_vocab,
        freeze_bilm_steps=args.freeze_bilm_steps,
        override=args.override,
    )


def run(args):
    _check(args)
    select_keras_backend(args.backend)
    from elmo_keras.training.pipeline import train
    from elmo_keras.training.run_config import SettingsConflict

    try:
        summary = train(_training_run(args))
    except SettingsConflict as conflict:
        raise CommandError(conflict.message(FLAGS)) from None
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
    print(f"wrote {args.output}/options.json, lm_weights.hdf5, vocab.txt, softmax.hdf5")
    return 130 if result["stopped"] == "signal" else 0
