"""`elmo-keras demo`: the quick start's main job.

By default it pretrains a small biLM on WikiText-2 for a bounded time, evaluates it, writes the
weights and embeds example sentences (see `elmo_keras.training.quickstart`). With
`--model tiny` it skips training and uses the small published-format model that ships with the
package (AllenNLP's test biLM), which takes seconds.
"""

import pathlib

import numpy as np

EXAMPLES = [
    "I deposited the cheque at the bank on Friday .",
    "We had a picnic on the grassy bank of the river .",
    "The bank raised its interest rates again .",
    "Fish gathered near the muddy bank after the flood .",
]
WORD = "bank"


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "demo",
        help="the quick start: train a small biLM on WikiText-2 for a few minutes, evaluate it, "
        "and embed example sentences (or --model tiny: embed with the bundled model)",
    )
    parser.add_argument(
        "--model",
        choices=["wikitext2", "tiny"],
        default="wikitext2",
        help="wikitext2: train one now (default); tiny: the bundled model",
    )
    parser.add_argument(
        "--minutes",
        type=float,
        default=3.0,
        help="training time budget for --model wikitext2 (default 3)",
    )
    parser.add_argument(
        "--eval-tokens",
        type=int,
        default=10_000,
        help="words of the WikiText-2 test split to evaluate on (default 10000; "
        "0: the whole split, 241k words)",
    )
    parser.add_argument(
        "--output", default="runs/demo", help="where the trained model goes (default runs/demo)"
    )
    return parser


def cosine(a, b):
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b) + 1e-12))


def bundled_model_dir():
    return pathlib.Path(__file__).resolve().parents[1] / "assets" / "tiny_allennlp"


def show_embeddings(bilm, label):
    """Embeds EXAMPLES and prints shapes and cross-context similarities of WORD."""
    from elmo_keras.models.bilm_embedder import BiLMEmbedder

    sentences = [s.split() for s in EXAMPLES]
    vectors = BiLMEmbedder(bilm).embed(sentences)
    print(f"\nEmbeddings from {label}:")
    for sentence, v in zip(EXAMPLES, vectors, strict=True):
        print(f"  {v.shape}  {sentence}")
    positions = [s.index(WORD) for s in sentences]
    print(
        f"\nCosine similarity of '{WORD}' across contexts (0: money, 1: river, 2: money, 3: river):"
    )
    header = "  layer        " + "  ".join(f"{i}-{j}" for i in range(4) for j in range(i + 1, 4))
    print(header)
    for layer in range(vectors[0].shape[0]):
        sims = [
            cosine(vectors[i][layer, positions[i]], vectors[j][layer, positions[j]])
            for i in range(4)
            for j in range(i + 1, 4)
        ]
        name = "0 (tokens)" if layer == 0 else f"{layer} (LSTM)"
        print(f"  {name:11s}  " + "  ".join(f"{s:.2f}" for s in sims))
    print("  Layer 0 is context-free (always 1.00); the LSTM layers see the sentence.")


def run(args):
    from elmo_keras.cli import CommandError, import_tensorflow

    if args.minutes <= 0:
        raise CommandError(f"--minutes must be positive. Received: {args.minutes}")
    if args.eval_tokens < 0:
        raise CommandError(
            f"--eval-tokens must be 0 (the whole test split) or positive. Received: "
            f"{args.eval_tokens}"
        )
    import_tensorflow()
    from elmo_keras.weights import load_bilm

    if args.model == "tiny":
        folder = bundled_model_dir()
        bilm = load_bilm(folder / "options.json", folder / "lm_weights.hdf5")
        show_embeddings(bilm, "the bundled tiny model (AllenNLP's test biLM)")
        return 0
    from elmo_keras.training.pipeline import quickstart

    summary = quickstart(
        args.output, time_budget_s=60 * args.minutes, eval_tokens=args.eval_tokens or None
    )
    folder = pathlib.Path(summary["output_dir"])
    bilm = load_bilm(folder / "options.json", folder / "lm_weights.hdf5")
    show_embeddings(bilm, f"the biLM just trained ({folder})")
    return 0
