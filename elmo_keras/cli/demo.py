"""`elmo-keras demo`: the quick start's main job.

By default it embeds hand-written sentences with the English biLM that ships with the package
(`mini_en`, trained on 9.5M words of English prose; no network, seconds) and shows, layer by
layer, how well the vectors of a polysemous word separate its senses. `--model` picks another
preset or model folder; `--train` first pretrains a small biLM on WikiText-2 for a few minutes
(`--minutes`), evaluates it and shows the same table for it.
"""

import numpy as np

from elmo_keras.corpus.demo_senses import SENSES, labelled_sentences, sense_statistics

DEFAULT_MODEL = "mini_en"


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "demo",
        help="the quick start: how the packaged English biLM separates the senses of a word "
        "(or --train: pretrain a small biLM on WikiText-2 for a few minutes first)",
        description="Embeds a few sentences for each of four polysemous words (bank, play, "
        "present, read) with a biLM (default: the packaged mini_en) and prints, per layer (the "
        "character CNN, LSTM 1, LSTM 2), how often the nearest other occurrence of the word has "
        "the same sense (1-NN accuracy) and the mean cosine within and across senses. Runs in "
        "seconds on a CPU; --train first pretrains a biLM on WikiText-2 for --minutes.",
    )
    parser.add_argument(
        "--model",
        default=DEFAULT_MODEL,
        help=f"a preset name (see `elmo-keras presets`) or a model folder (default "
        f"{DEFAULT_MODEL}, the packaged English biLM)",
    )
    parser.add_argument(
        "--train",
        action="store_true",
        help="pretrain a biLM on WikiText-2 now (for --minutes) and show it instead",
    )
    parser.add_argument(
        "--minutes",
        type=float,
        default=3.0,
        help="training time budget with --train (default 3)",
    )
    parser.add_argument(
        "--eval-tokens",
        type=int,
        default=10_000,
        help="with --train: words of the WikiText-2 test split to evaluate on (default 10000; "
        "0: the whole split, 241k words)",
    )
    parser.add_argument(
        "--output",
        default="runs/demo",
        help="with --train: where the model goes (default: runs/demo)",
    )
    return parser


def word_vectors(embedder, sentences, word):
    """`[n, n_layers + 1, dim]`: every layer's vector of `word` in each sentence (a string),
    from a `BiLMEmbedder` (one for all the words: its function is traced once)."""
    token_lists = [sentence.split() for sentence in sentences]
    embedded = embedder.embed(token_lists)
    return np.stack(
        [
            layers[:, tokens.index(word)]
            for tokens, layers in zip(token_lists, embedded, strict=True)
        ]
    )


def word_sense_statistics(bilm, senses_by_word=SENSES):
    """`{word: sense_statistics(...)}`: per layer, cosine within / across senses and 1-NN
    accuracy of each word of `senses_by_word` (laid out as `SENSES`)."""
    from elmo_keras.models.bilm_embedder import BiLMEmbedder

    embedder = BiLMEmbedder(bilm)
    result = {}
    for word, senses in senses_by_word.items():
        sentences, labels = labelled_sentences(senses)
        result[word] = sense_statistics(word_vectors(embedder, sentences, word), labels)
    return result


def show_senses(bilm, label):
    """Prints, per word and layer, cosine within / across senses and 1-NN sense accuracy."""
    n_layers = bilm.n_layers
    names = ["layer 0 (char CNN)"] + [f"LSTM {i}" for i in range(1, n_layers + 1)]
    print(f"\nThe senses of a word, in {label}")
    print(
        "Each word below occurs in 12 hand-written sentences, 6 per sense. Per layer: mean cosine\n"
        "similarity of its vectors within a sense / across the senses, and how often the nearest\n"
        "other sentence has the same sense (1-NN; chance 50%).\nSenses: "
        + "; ".join(f"{word}: {' / '.join(senses)}" for word, senses in SENSES.items())
        + ".\n"
    )
    print(f"  {'word':10s}" + "".join(f"{name:>24s}" for name in names))
    for word, stats in word_sense_statistics(bilm).items():
        cells = []
        for layer in stats:
            nn = "  n/a" if layer["nn_accuracy"] is None else f"{100 * layer['nn_accuracy']:4.0f}%"
            cells.append(f"{layer['within']:.2f} / {layer['across']:.2f}  {nn}")
        print(f"  {word:10s}" + "".join(f"{cell:>24s}" for cell in cells))
    print(
        "\nLayer 0 is context-free: one vector per word, whatever the sentence. The LSTM layers\n"
        "see the sentence: where 'within' exceeds 'across' and 1-NN beats 50%, the vectors tell\n"
        "the senses apart."
    )


def run(args):
    from elmo_keras.cli import CommandError
    from elmo_keras.cli._common import select_keras_backend

    if args.minutes <= 0:
        raise CommandError(f"--minutes must be positive. Received: {args.minutes}")
    if args.eval_tokens < 0:
        raise CommandError(
            f"--eval-tokens must be 0 (the whole test split) or positive. Received: "
            f"{args.eval_tokens}"
        )
    if args.model == "wikitext2":  # the 0.1.0 spelling of --train
        args.train = True
    if not args.train:
        from elmo_keras.presets import resolve_preset

        try:
            options, weights = resolve_preset(args.model)
        except ValueError as error:
            raise CommandError(f"--model: {error}") from None
    select_keras_backend("keras")  # TensorFlow only where Keras runs on it
    from elmo_keras.models import BiLM

    if not args.train:
        bilm = BiLM.from_bilm_tf(options, weights)
        show_senses(bilm, f"the biLM {args.model!r} ({weights})")
        return 0
    from elmo_keras.training.pipeline import quickstart

    summary = quickstart(
        args.output, time_budget_s=60 * args.minutes, eval_tokens=args.eval_tokens or None
    )
    folder = summary["output_dir"]
    bilm = BiLM.from_bilm_tf(f"{folder}/options.json", f"{folder}/lm_weights.hdf5")
    show_senses(bilm, f"the biLM just trained ({folder})")
    return 0
