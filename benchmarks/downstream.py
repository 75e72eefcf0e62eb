"""Downstream benchmark: MR sentence sentiment with random / GloVe / ELMo / [GloVe ; ELMo] inputs.

The same small BiLSTM classifier is trained with four kinds of input vectors:

- `random`: word embeddings (50-d) initialised at random and trained with the task;
- `glove`: GloVe 6B 50-d vectors, frozen;
- `elmo`: ELMo from a frozen biLM (a task-trained `ScalarMix` over its layers, dropout 0.5);
- `glove+elmo`: `[GloVe ; ELMo]`, as Peters et al. (2018) add ELMo to a task model's input.

Data: `mr_snippets_sentiment.tsv` (10,568 sentences), split 80/10/10 with
`numpy.random.default_rng(0).permutation` (train 8,454 / valid 1,056 / test 1,058). Each run is
repeated over seeds 0, 1, 2 (the seed picks the training subset, initialisation and batch order)
and over training fractions 5%, 10%, 25%, 50%, 100% (a seeded subset of the training split;
validation and test stay whole). Test accuracy is taken at the epoch with the best validation
accuracy (early stopping: at most 10 epochs, patience 3; Adam 1e-3, batch 64).

ELMo is computed once per sentence with the frozen biLM and cached (float16, under
`--cache-dir`): a frozen `ElmoEmbedding` is exactly a `ScalarMix` + dropout over these cached
activations, so the classifier trains the mix on the cache (the script checks the equivalence
on a few sentences).

Usage:
    python benchmarks/downstream.py --bilm-dir runs/wikitext2
    # or in two parts (the baselines need no biLM), merged into one table:
    python benchmarks/downstream.py --variants random glove
    python benchmarks/downstream.py --variants elmo glove+elmo --merge
    python benchmarks/downstream.py --replot   # redraw plots and table from downstream.json
    python benchmarks/downstream.py --fixture --fractions 0.1 --seeds 0 --max-epochs 1 \
        --output-dir /tmp/downstream-smoke  # a smoke test with the tiny packaged biLM

Writes `downstream.json`, `downstream.md`, `downstream_sample_efficiency.png` and
`downstream_scalar_mix.png` to `--output-dir` (default `benchmarks/results/`).
"""

import argparse
import collections
import hashlib
import json
import os
import pathlib
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data"
VARIANTS = ("random", "glove", "elmo", "glove+elmo")
FRACTIONS = (0.05, 0.1, 0.25, 0.5, 1.0)
SEEDS = (0, 1, 2)
MAX_TOKENS = 64
SPLIT_SEED = 0


def load_mr(path):
    """`(texts, labels)` of the MR snippets file; label 1 = pos."""
    texts, labels = [], []
    with open(path, encoding="utf-8") as f:
        for line in f:
            label, _rating, text = line.rstrip("\n").split("\t", 2)
            texts.append(text)
            labels.append(1 if label == "pos" else 0)
    return texts, np.array(labels, np.int32)


def split_indices(n, seed=SPLIT_SEED):
    """The fixed 80/10/10 split: `(train, valid, test)` index arrays."""
    order = np.random.default_rng(seed).permutation(n)
    n_train, n_valid = int(0.8 * n), int(0.1 * n)
    return order[:n_train], order[n_train : n_train + n_valid], order[n_train + n_valid :]


def tokenize_all(texts, max_tokens=MAX_TOKENS):
    from elmo_keras.text import tokenize_python

    return [tokenize_python(t)[:max_tokens] or ["."] for t in texts]


def read_glove(path, words):
    """GloVe vectors of `words` (lower-cased look-up): `{word: vector}`."""
    wanted = {w.lower() for w in words}
    vectors = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            word, rest = line.split(" ", 1)
            if word in wanted:
                vectors[word] = np.array(rest.split(), np.float32)
    return vectors


def build_vocabulary(token_lists, train_idx):
    """Lower-cased training words -> ids (0 = padding, 1 = unknown)."""
    counts = collections.Counter(w.lower() for i in train_idx for w in token_lists[i])
    vocab = {"<pad>": 0, "<unk>": 1}
    for word, _ in counts.most_common():
        vocab[word] = len(vocab)
    return vocab


def word_ids(token_lists, vocab):
    return [np.array([vocab.get(w.lower(), 1) for w in toks], np.int32) for toks in token_lists]


def compute_elmo_cache(bilm, token_lists, batch_size=64, log=print):
    """Runs the frozen biLM once per sentence: `(flat [n_tokens, L, D] float16, offsets)`."""
    import tensorflow as tf

    from elmo_keras.text import batch_to_char_ids

    @tf.function(input_signature=[tf.TensorSpec([None, None, 50], tf.int32)])
    def run(ids):
        return bilm(ids, training=False)["activations"]

    lengths = np.array([len(t) for t in token_lists])
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    n_layers = bilm.n_layers + 1
    flat = np.zeros((offsets[-1], n_layers, 2 * bilm.projection_dim), np.float16)
    order = np.argsort(lengths)
    start = time.perf_counter()
    for b in range(0, len(order), batch_size):
        batch = order[b : b + batch_size]
        acts = run(tf.constant(batch_to_char_ids([token_lists[i] for i in batch]))).numpy()
        for row, i in enumerate(batch):
            flat[offsets[i] : offsets[i + 1]] = acts[row, :, : lengths[i]].transpose(1, 0, 2)
        if b // batch_size % 40 == 0:
            log(f"  elmo cache {b}/{len(order)} sentences, {time.perf_counter() - start:.0f}s")
    return flat, offsets


def load_or_compute_cache(bilm, token_lists, cache_path, log=print):
    if cache_path is not None and cache_path.exists():
        data = np.load(cache_path)
        if len(data["offsets"]) == len(token_lists) + 1:
            log(f"ELMo cache: {cache_path}")
            return data["flat"], data["offsets"], 0.0
    start = time.perf_counter()
    flat, offsets = compute_elmo_cache(bilm, token_lists, log=log)
    seconds = time.perf_counter() - start
    if cache_path is not None:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache_path, flat=flat, offsets=offsets)
    return flat, offsets, seconds


def check_cache_matches_layer(bilm, token_lists, flat, offsets, n=4):
    """A frozen `ElmoEmbedding` (dropout 0) equals the even mix of the cached activations."""
    import tensorflow as tf

    from elmo_keras.layers.elmo_embedding import ElmoEmbedding

    elmo = ElmoEmbedding(bilm, input_type="tokens", dropout=0.0)
    tokens = token_lists[:n]
    width = max(len(t) for t in tokens)
    out = elmo(tf.constant([t + [""] * (width - len(t)) for t in tokens])).numpy()
    worst = 0.0
    for i, t in enumerate(tokens):
        cached = flat[offsets[i] : offsets[i + 1]].astype(np.float32).mean(axis=1)
        worst = max(worst, float(np.abs(out[i, : len(t)] - cached).max()))
    return worst


class Batches:
    """Padded batches of `(word_ids, elmo_layers)`; similar lengths together, shuffled."""

    def __init__(self, indices, ids, labels, flat, offsets, batch_size, seed, shuffle):
        self.indices = np.asarray(indices)
        self.ids, self.labels, self.flat, self.offsets = ids, labels, flat, offsets
        self.batch_size, self.shuffle = batch_size, shuffle
        self.rng = np.random.default_rng(seed)
        self.batches = self._make_batches()

    def _make_batches(self):
        idx = self.indices.copy()
        if self.shuffle:
            self.rng.shuffle(idx)
        # Sort within chunks of 20 batches so batches have similar lengths.
        chunk = self.batch_size * 20
        out = []
        for c in range(0, len(idx), chunk):
            part = idx[c : c + chunk]
            part = part[np.argsort([len(self.ids[i]) for i in part], kind="stable")]
            out += [part[b : b + self.batch_size] for b in range(0, len(part), self.batch_size)]
        if self.shuffle:
            self.rng.shuffle(out)
        return out

    def __len__(self):
        return len(self.batches)

    def batch(self, k):
        batch = self.batches[k]
        width = max(len(self.ids[i]) for i in batch)
        words = np.zeros((len(batch), width), np.int32)
        layers = None
        if self.flat is not None:
            n_layers, dim = self.flat.shape[1:]
            layers = np.zeros((len(batch), n_layers, width, dim), np.float32)
        for row, i in enumerate(batch):
            n = len(self.ids[i])
            words[row, :n] = self.ids[i]
            if layers is not None:
                layers[row, :, :n] = self.flat[self.offsets[i] : self.offsets[i + 1]].transpose(
                    1, 0, 2
                )
        inputs = {"word_ids": words}
        if layers is not None:
            inputs["elmo_layers"] = layers
        return inputs, self.labels[batch]

    def reshuffle(self):
        if self.shuffle:
            self.batches = self._make_batches()


def build_classifier(
    variant,
    vocab_size,
    glove_matrix,
    n_elmo_layers,
    elmo_dim,
    seed,
    hidden=64,
    dropout=0.5,
    layer_norm=False,
    elmo_dropout=0.5,
):
    """The task model: inputs -> dropout -> BiLSTM(hidden) -> max-pool over time -> Dense(2)."""
    import keras

    from elmo_keras.layers import ScalarMix

    keras.utils.set_random_seed(seed)
    word_ids_in = keras.Input((None,), dtype="int32", name="word_ids")
    inputs = {"word_ids": word_ids_in}
    mask = keras.ops.not_equal(word_ids_in, 0)
    parts = []
    if variant == "random":
        parts.append(keras.layers.Embedding(vocab_size, 50, name="random_embedding")(word_ids_in))
    if variant in ("glove", "glove+elmo"):
        parts.append(
            keras.layers.Embedding(
                vocab_size,
                glove_matrix.shape[1],
                trainable=False,
                name="glove",
                embeddings_initializer=keras.initializers.Constant(glove_matrix),
            )(word_ids_in)
        )
    if variant in ("elmo", "glove+elmo"):
        layers_in = keras.Input((n_elmo_layers, None, elmo_dim), name="elmo_layers")
        inputs["elmo_layers"] = layers_in
        mix = ScalarMix(n_elmo_layers, do_layer_norm=layer_norm, name="scalar_mix")
        mix.build((None, n_elmo_layers, None, elmo_dim))
        elmo = mix(layers_in, mask=mask)
        parts.append(keras.layers.Dropout(elmo_dropout, name="elmo_dropout")(elmo))
    x = parts[0] if len(parts) == 1 else keras.layers.Concatenate()(parts)
    x = keras.layers.Dropout(0.2 if variant != "random" else dropout)(x)
    x = keras.layers.Bidirectional(keras.layers.LSTM(hidden, return_sequences=True))(x, mask=mask)
    x = keras.ops.where(mask[:, :, None], x, -1e9)  # max over real tokens only
    x = keras.ops.max(x, axis=1)
    x = keras.layers.Dropout(dropout)(x)
    outputs = keras.layers.Dense(2, name="logits")(x)
    model = keras.Model(inputs, outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def _accuracy(predict, batches):
    correct = total = 0
    for k in range(len(batches)):
        x, y = batches.batch(k)
        logits = predict(x)
        correct += int(np.sum(np.argmax(logits, -1) == y))
        total += len(y)
    return correct / total


def train_one(
    variant,
    data,
    train_idx,
    seed,
    max_epochs,
    patience=3,
    batch_size=64,
    layer_norm=False,
    elmo_dropout=0.5,
):
    """Trains one classifier; returns a dict with test accuracy and the learned mix."""
    import tensorflow as tf

    uses_elmo = "elmo" in variant
    flat = data["flat"] if uses_elmo else None

    def make(indices, shuffle):
        return Batches(
            indices, data["ids"], data["labels"], flat, data["offsets"], batch_size, seed, shuffle
        )

    train = make(train_idx, True)
    valid, test = make(data["valid"], False), make(data["test"], False)
    model = build_classifier(
        variant,
        data["vocab_size"],
        data["glove_matrix"],
        data["n_elmo_layers"],
        data["elmo_dim"],
        seed,
        layer_norm=layer_norm,
        elmo_dropout=elmo_dropout,
    )

    x_spec = {"word_ids": tf.TensorSpec([None, None], tf.int32)}
    if uses_elmo:
        x_spec["elmo_layers"] = tf.TensorSpec(
            [None, data["n_elmo_layers"], None, data["elmo_dim"]], tf.float32
        )

    @tf.function(input_signature=[x_spec], autograph=False)
    def predict(x):
        return model(x, training=False)

    @tf.function(input_signature=[x_spec, tf.TensorSpec([None], tf.int32)], autograph=False)
    def step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = model.loss(y, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        model.optimizer.apply(grads, model.trainable_variables)
        return loss

    best = (-1.0, 0, None)
    start = time.perf_counter()
    for epoch in range(max_epochs):
        train.reshuffle()
        for k in range(len(train)):
            x, y = train.batch(k)
            step(x, y)
        valid_acc = _accuracy(predict, valid)
        if valid_acc > best[0]:
            best = (valid_acc, epoch, [w.numpy() for w in model.weights])
        elif epoch - best[1] >= patience:
            break
    model.set_weights(best[2])
    result = {
        "variant": variant,
        "seed": seed,
        "n_train": len(train_idx),
        "valid_accuracy": best[0],
        "best_epoch": best[1] + 1,
        "test_accuracy": _accuracy(predict, test),
        "seconds": time.perf_counter() - start,
    }
    if uses_elmo:
        result["layer_norm"] = layer_norm
        result["elmo_dropout"] = elmo_dropout
        mix = model.get_layer("scalar_mix")
        w = mix.scalar_weights.numpy()
        result["scalar_mix_softmax"] = (np.exp(w) / np.exp(w).sum()).tolist()
        result["scalar_mix_gamma"] = float(mix.gamma.numpy())
    return result


def summarize(results, fractions, n_train_full):
    """`{variant: {fraction: (mean, std, n)}}` of test accuracy."""
    table = {}
    for variant in VARIANTS:
        for fraction in fractions:
            n = max(1, int(round(fraction * n_train_full)))
            accs = [
                r["test_accuracy"] for r in results if r["variant"] == variant and r["n_train"] == n
            ]
            if accs:
                table.setdefault(variant, {})[fraction] = (
                    float(np.mean(accs)),
                    float(np.std(accs)),
                    len(accs),
                )
    return table


def markdown_table(table, fractions, n_train_full):
    header = (
        "| input | "
        + " | ".join(f"{int(f * 100)}% ({int(round(f * n_train_full))})" for f in fractions)
        + " |"
    )
    lines = [header, "|---" * (len(fractions) + 1) + "|"]
    for variant, row in table.items():
        cells = []
        for f in fractions:
            if f in row:
                mean, std, _ = row[f]
                cells.append(f"{100 * mean:.1f} ± {100 * std:.1f}")
            else:
                cells.append("-")
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot_sample_efficiency(table, fractions, n_train_full, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4))
    for variant, row in table.items():
        fs = [f for f in fractions if f in row]
        xs = [int(round(f * n_train_full)) for f in fs]
        mean = np.array([row[f][0] for f in fs]) * 100
        std = np.array([row[f][1] for f in fs]) * 100
        ax.plot(xs, mean, marker="o", label=variant)
        ax.fill_between(xs, mean - std, mean + std, alpha=0.2)
    ax.set_xscale("log")
    ax.set_xlabel("training sentences (log scale)")
    ax.set_ylabel("test accuracy (%), mean ± std over seeds")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def plot_scalar_mix(results, path, title):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    full = max(r["n_train"] for r in results)
    fig, ax = plt.subplots(figsize=(5, 3.5))
    elmo_variants = [v for v in VARIANTS if "elmo" in v]
    width = 0.8 / len(elmo_variants)
    for k, variant in enumerate(elmo_variants):
        runs = [r for r in results if r["variant"] == variant and r["n_train"] == full]
        if not runs:
            continue
        weights = np.array([r["scalar_mix_softmax"] for r in runs])
        xs = np.arange(weights.shape[1]) + k * width
        ax.bar(xs, weights.mean(0), width, yerr=weights.std(0), label=variant, capsize=3)
    n = len(runs[0]["scalar_mix_softmax"]) if runs else 3
    ax.axhline(1 / n, color="gray", ls="--", lw=1, label="initial (even)")
    ax.set_xticks(np.arange(n) + width * (len(elmo_variants) - 1) / 2)
    ax.set_xticklabels(["layer 0\n(char CNN)"] + [f"LSTM {i}" for i in range(1, n)])
    ax.set_ylabel("softmax(w) after training")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def prepare(bilm, args, log=print):
    """Loads the data and the ELMo cache: the dict that `train_one` reads."""
    texts, labels = load_mr(args.data)
    if args.limit:  # a random subset, for smoke tests and notebooks
        keep = np.sort(np.random.default_rng(1).permutation(len(texts))[: args.limit])
        texts, labels = [texts[i] for i in keep], labels[keep]
    train_idx, valid_idx, test_idx = split_indices(len(texts))
    tokens = tokenize_all(texts)
    vocab = build_vocabulary(tokens, train_idx)
    glove = read_glove(args.glove, vocab)
    rng = np.random.default_rng(SPLIT_SEED)
    glove_matrix = rng.normal(0, 0.3, (len(vocab), 50)).astype(np.float32)
    glove_matrix[0] = 0
    found = 0
    for word, i in vocab.items():
        if word in glove:
            glove_matrix[i] = glove[word]
            found += 1
    log(
        f"{len(texts)} sentences: train {len(train_idx)} / valid {len(valid_idx)} / test "
        f"{len(test_idx)}; vocabulary {len(vocab)}, {found} in GloVe"
    )
    digest = hashlib.sha256("\n".join(" ".join(t) for t in tokens).encode()).hexdigest()[:12]
    flat = offsets = None
    seconds = 0.0
    if bilm is not None:
        weights_digest = getattr(args, "bilm_weights_sha256", "fixture")[:12]
        name = f"elmo_{args.cache_name}_{weights_digest}_{digest}.npz"
        cache = args.cache_dir / name if args.cache_dir else None
        flat, offsets, seconds = load_or_compute_cache(bilm, tokens, cache, log=log)
        log(f"ELMo activations {flat.shape} float16, computed in {seconds:.0f}s")
        diff = check_cache_matches_layer(bilm, tokens, flat, offsets)
        log(f"ElmoEmbedding vs cached even mix: max |diff| {diff:.1e} (float16 cache)")
    return {
        "ids": word_ids(tokens, vocab),
        "labels": labels,
        "flat": flat,
        "offsets": offsets,
        "train": train_idx,
        "valid": valid_idx,
        "test": test_idx,
        "vocab_size": len(vocab),
        "glove_matrix": glove_matrix,
        "n_elmo_layers": None if flat is None else flat.shape[1],
        "elmo_dim": None if flat is None else flat.shape[2],
        "elmo_cache_seconds": seconds,
        "glove_coverage": found / len(vocab),
    }


def load_bilm_for(args):
    from elmo_keras.weights import load_bilm

    if args.fixture:
        model_dir = ROOT / "elmo_keras" / "assets" / "tiny_allennlp"
        return load_bilm(model_dir / "options.json", model_dir / "lm_weights.hdf5"), "tiny"
    weights = sorted(args.bilm_dir.glob("*.hdf5"))
    weights = [w for w in weights if "weights" in w.name] or weights
    if not weights:
        raise SystemExit(f"no hdf5 weight file in {args.bilm_dir}")
    args.bilm_weights_sha256 = hashlib.sha256(weights[0].read_bytes()).hexdigest()
    args.bilm_summary = None
    if (args.bilm_dir / "summary.json").exists():  # what `elmo_keras.training` reports
        info = json.loads((args.bilm_dir / "summary.json").read_text())
        args.bilm_summary = {
            "config": info.get("config"),
            "train": info.get("train"),
            "test_perplexity": (info.get("test") or {}).get("perplexity"),
            "unigram_perplexity": info.get("unigram_perplexity"),
        }
    return load_bilm(args.bilm_dir / "options.json", weights[0]), args.bilm_dir.name


def replot(output_dir):
    """Redraws the plots and the table from a finished run's `downstream.json`."""
    summary = json.loads((output_dir / "downstream.json").read_text())
    results, n_full = summary["runs"], summary["split"]["train"]
    fractions = sorted({r["fraction"] for r in results})
    table = summarize(results, fractions, n_full)
    name = summary["bilm"]
    title = f"MR sentiment, BiLSTM classifier; ELMo = biLM '{name}'"
    if summary.get("bilm_parameters"):
        title += f" ({summary['bilm_parameters'] / 1e6:.1f}M params)"
    plot_sample_efficiency(
        table, fractions, n_full, output_dir / "downstream_sample_efficiency.png", title
    )
    if any("elmo" in r["variant"] for r in results):
        plot_scalar_mix(
            results,
            output_dir / "downstream_scalar_mix.png",
            f"ScalarMix after training on MR (100%), biLM '{name}'",
        )
    print(markdown_table(table, fractions, n_full))
    return summary


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bilm-dir", type=pathlib.Path, default=ROOT / "runs" / "wikitext2")
    parser.add_argument("--fixture", action="store_true", help="use the tiny packaged biLM")
    parser.add_argument(
        "--data", type=pathlib.Path, default=DATA / "mr-sentiment" / "mr_snippets_sentiment.tsv"
    )
    parser.add_argument(
        "--glove", type=pathlib.Path, default=DATA / "glove" / "glove.6B.50d.subset.txt"
    )
    parser.add_argument("--output-dir", type=pathlib.Path, default=ROOT / "benchmarks" / "results")
    parser.add_argument(
        "--cache-dir", type=pathlib.Path, default=pathlib.Path("/tmp/elmo_keras_downstream_cache")
    )
    parser.add_argument("--fractions", type=float, nargs="+", default=list(FRACTIONS))
    parser.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    parser.add_argument("--variants", nargs="+", default=list(VARIANTS), choices=VARIANTS)
    parser.add_argument("--max-epochs", type=int, default=10)
    parser.add_argument(
        "--merge",
        action="store_true",
        help="keep the runs already in --output-dir/downstream.json that this "
        "invocation does not redo (e.g. baselines run before the biLM)",
    )
    parser.add_argument(
        "--replot",
        action="store_true",
        help="only redraw the plots and the table from --output-dir/downstream.json",
    )
    parser.add_argument(
        "--elmo-dropout",
        type=float,
        default=0.5,
        help="dropout after the ScalarMix (ElmoEmbedding's `dropout`). Defaults to 0.5",
    )
    parser.add_argument(
        "--layer-norm",
        action="store_true",
        help="ScalarMix with masked layer normalisation of each biLM layer (do_layer_norm)",
    )
    parser.add_argument("--limit", type=int, default=0, help="use only the first N sentences")
    args = parser.parse_args(argv)
    if args.replot:
        return replot(args.output_dir)

    import tensorflow as tf

    tf.config.threading.set_inter_op_parallelism_threads(2)
    tf.config.threading.set_intra_op_parallelism_threads(2)
    wall = time.perf_counter()
    bilm = None
    args.cache_name = "none"
    if any("elmo" in v for v in args.variants):
        bilm, args.cache_name = load_bilm_for(args)
        print(
            f"biLM: {args.cache_name}, {bilm.count_params():,} parameters, "
            f"{bilm.n_layers + 1} layers of {2 * bilm.projection_dim}"
        )
    data = prepare(bilm, args)
    n_full = len(data["train"])
    results = []
    for fraction in args.fractions:
        n = max(1, int(round(fraction * n_full)))
        for seed in args.seeds:
            subset = np.random.default_rng(100 + seed).permutation(data["train"])[:n]
            for variant in args.variants:
                r = train_one(
                    variant,
                    data,
                    subset,
                    seed,
                    args.max_epochs,
                    layer_norm=args.layer_norm,
                    elmo_dropout=args.elmo_dropout,
                )
                r["fraction"] = fraction
                results.append(r)
                print(
                    f"{fraction:>5} seed {seed} {variant:>11}: test {r['test_accuracy']:.4f} "
                    f"(valid {r['valid_accuracy']:.4f}, epoch {r['best_epoch']}, "
                    f"{r['seconds']:.0f}s)",
                    flush=True,
                )
    wall = time.perf_counter() - wall
    json_path = args.output_dir / "downstream.json"
    invocations = []
    command = "python benchmarks/downstream.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.merge and json_path.exists():
        previous = json.loads(json_path.read_text())
        done = {(r["variant"], r["fraction"], r["seed"]) for r in results}
        results = [
            r for r in previous["runs"] if (r["variant"], r["fraction"], r["seed"]) not in done
        ] + results
        # An earlier invocation whose runs this one redid no longer describes the table.
        invocations = [i for i in previous.get("invocations", []) if i["command"] != command]
        if previous.get("bilm", "none") != "none" and args.cache_name == "none":
            args.cache_name = previous["bilm"]
            bilm_params = previous["bilm_parameters"]
    invocations.append(
        {"command": command, "wall_seconds": wall, "elmo_cache_seconds": data["elmo_cache_seconds"]}
    )
    if bilm is not None:
        bilm_params = bilm.count_params()
    elif not (args.merge and json_path.exists()):
        bilm_params = None
    args.fractions = sorted({r["fraction"] for r in results})
    table = summarize(results, args.fractions, n_full)
    md = markdown_table(table, args.fractions, n_full)
    print(md)
    args.output_dir.mkdir(parents=True, exist_ok=True)
    title = f"MR sentiment, BiLSTM classifier; ELMo = biLM '{args.cache_name}'"
    if bilm_params:
        title += f" ({bilm_params / 1e6:.1f}M params)"
    plot_sample_efficiency(
        table, args.fractions, n_full, args.output_dir / "downstream_sample_efficiency.png", title
    )
    if any("elmo" in r["variant"] for r in results):
        plot_scalar_mix(
            results,
            args.output_dir / "downstream_scalar_mix.png",
            f"ScalarMix after training on MR (100%), biLM '{args.cache_name}'",
        )
    summary = {
        "invocations": invocations,
        "bilm": args.cache_name,
        "bilm_parameters": bilm_params,
        "bilm_weights_sha256": getattr(args, "bilm_weights_sha256", None)
        or (previous.get("bilm_weights_sha256") if args.merge and json_path.exists() else None),
        "bilm_training_summary": getattr(args, "bilm_summary", None)
        or (previous.get("bilm_training_summary") if args.merge and json_path.exists() else None),
        "split": {
            "seed": SPLIT_SEED,
            "train": n_full,
            "valid": len(data["valid"]),
            "test": len(data["test"]),
        },
        "glove_coverage_of_vocabulary": data["glove_coverage"],
        "wall_seconds_total": sum(i["wall_seconds"] for i in invocations),
        "cpu_threads": 2,
        "table": {v: {str(f): list(s) for f, s in row.items()} for v, row in table.items()},
        "runs": results,
    }
    json_path.write_text(json.dumps(summary, indent=1) + "\n")
    commands = "\n".join(
        f"- `{i['command']}`: {i['wall_seconds'] / 60:.1f} min wall"
        + (f" (ELMo cache {i['elmo_cache_seconds']:.0f}s)" if i["elmo_cache_seconds"] else "")
        for i in invocations
    )
    seeds = sorted({r["seed"] for r in results})
    (args.output_dir / "downstream.md").write_text(
        f"Test accuracy (%), mean ± std over seeds {seeds}; training sentences in "
        f"parentheses.\n\n{md}\n\nProduced by (2 TensorFlow CPU threads on a shared "
        f"2-core machine):\n{commands}\n"
    )
    print(f"wall time {wall:.0f}s")
    return summary


if __name__ == "__main__":
    main()
