"""`elmo-keras evaluate`: forward, backward and average perplexity with the full softmax."""

import math
import os

from elmo_keras.cli import CommandError
from elmo_keras.cli._common import check_input_file


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "evaluate",
        help="perplexity of a trained biLM on a text file",
        description=(
            "Full-softmax perplexity of a model written by `elmo-keras train` (options.json, "
            "lm_weights.hdf5, vocab.txt, softmax.hdf5) on a text file, the LSTM state carried "
            "from window to window as in training."
        ),
    )
    parser.add_argument(
        "--model",
        required=True,
        help="the folder `elmo-keras train` wrote, or a packaged preset that keeps its "
        "vocabulary and softmax (mini_en; see `elmo-keras presets`)",
    )
    parser.add_argument("--data", required=True, help="text file, one sentence/paragraph a line")
    parser.add_argument(
        "--batch-size", type=int, default=16, help="rows of windows per step (default: 16)"
    )
    parser.add_argument(
        "--unroll-steps",
        type=int,
        default=20,
        help="tokens per window; the LSTM state is carried across windows (default: 20)",
    )
    parser.add_argument("--max-tokens", type=int, help="stop after about this many tokens")
    parser.add_argument(
        "--tokenization",
        default="whitespace",
        choices=["whitespace", "punctuation"],
        help="whitespace: the text is tokenized already (as WikiText is); punctuation: also "
        "split punctuation off words (default: whitespace)",
    )
    parser.add_argument(
        "--basis-vocab",
        nargs="+",
        metavar="VOCAB",
        help="compare with models of other vocabularies: score over the model's words that "
        "are also in every VOCAB file (vocab.txt, one word a line), all other words as one "
        "event; evaluate model A with B's vocab.txt and B with A's for one basis (default: "
        "none, the model's own vocabulary)",
    )
    return parser


def run(args):
    from elmo_keras.presets import PRESETS, model_folder
    from elmo_keras.training.model_files import MODEL_FILES

    try:
        folder = model_folder(args.model)
    except ValueError as error:
        raise CommandError(f"--model: {error}") from None
    missing = [name for name in MODEL_FILES if not (folder / name).is_file()]
    if missing and args.model.lower() in PRESETS:  # a preset without its training head
        raise CommandError(
            f"--model {args.model}: evaluate needs the model's {' and '.join(missing)}, which "
            "this preset does not ship (mini_en does; or a folder `elmo-keras train` wrote)"
        )
    if not os.path.isfile(args.data):
        if os.path.exists(args.data):
            raise CommandError(f"--data: {args.data} is not a regular file (a folder or a device)")
        raise CommandError(f"--data: file not found: {args.data}")
    for path in args.basis_vocab or ():
        check_input_file("--basis-vocab", path)
    for name in ("batch_size", "unroll_steps"):
        if getattr(args, name) < 1:
            raise CommandError(f"--{name.replace('_', '-')} must be a positive integer")
    from elmo_keras.text.text_files import check_text_files
    from elmo_keras.text.vocabulary import Vocabulary
    from elmo_keras.training.common.evaluation import evaluate_model
    from elmo_keras.training.model_files import load_language_model

    check_text_files([args.data], "--data")  # not UTF-8, or no text: one line, exit 1
    model, vocabulary = load_language_model(folder)
    basis = None
    for path in args.basis_vocab or ():
        words = set(Vocabulary.load(path).tokens)
        basis = words if basis is None else basis & words
    metrics = evaluate_model(
        model,
        vocabulary,
        args.data,
        batch_size=args.batch_size,
        unroll_steps=args.unroll_steps,
        max_tokens=args.max_tokens,
        tokenization_mode=args.tokenization,
        basis=basis,
    )
    if basis is not None:
        print(
            f"basis: {metrics['basis_words']} words, {100 * metrics['basis_coverage']:.2f}% of "
            "the targets; every other word is one event"
        )
    print(f"forward perplexity:  {metrics['perplexity_forward']:.2f}")
    print(f"backward perplexity: {metrics['perplexity_backward']:.2f}")
    print(f"average perplexity:  {metrics['perplexity']:.2f}")
    print(f"tokens: {metrics['tokens']}")
    keys = ("perplexity_forward", "perplexity_backward", "perplexity")
    if any(math.isinf(metrics[key]) for key in keys):
        print(
            "inf: the mean loss is above 709.78 nats per token, where the perplexity exceeds "
            "the largest float64 (about 1.8e308); the model predicts this text very badly"
        )
    return 0
