"""Polysemy: ELMo vectors of one word in different contexts, against the context-free layer 0.

For "bank", "play", "present" and "read", hand-written sentences (labelled with the sense of the
word, two senses each) and sentences from WikiText-2 are run through a frozen biLM. For every
occurrence we take layer 0 (the character CNN's token vector, the same whatever the context),
each LSTM layer, and the even ScalarMix of all layers, and report:

- cosine similarity between occurrences of the same sense and of different senses, per layer;
- leave-one-out 1-nearest-neighbour sense accuracy among the hand-written sentences, per layer;
- for each hand-written sentence, its nearest WikiText-2 occurrences (top LSTM layer);
- a 2-D PCA projection of the occurrences per word, axes fitted on the hand-written
  sentences (`polysemy_pca.png`).

Usage:
    python experiments/polysemy.py --bilm-dir runs/wikitext2
    python experiments/polysemy.py --fixture --output-dir /tmp/polysemy  # the tiny biLM

Writes `polysemy.json`, `polysemy.md` and `polysemy_pca.png` to `--output-dir` (default
`experiments/results/`).
"""

import argparse
import json
import os
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import study_setup  # noqa: E402

from elmo_keras.cli import demo_senses  # noqa: E402

WIKITEXT = study_setup.DATA / "wikitext-2" / "train.raw.txt"

# word -> {sense: [sentences]}: the hand-written sentences, shared with `elmo-keras demo`.
SENSES = demo_senses.SENSES
sense_statistics = demo_senses.sense_statistics
_normalize = demo_senses.normalize


def wikitext_contexts(word, path=WIKITEXT, limit=40, max_tokens=60, seed=0):
    """Up to `limit` WikiText-2 sentences (whitespace tokens) that contain `word` as a token."""
    found = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            if f" {word} " not in line or line.lstrip().startswith("="):
                continue
            for sentence in line.strip().split(" . "):
                tokens = sentence.split() + ["."]
                if word in tokens and 5 <= len(tokens) <= max_tokens:
                    found.append(tokens)
    rng = np.random.default_rng(seed)
    if len(found) > limit:
        found = [found[i] for i in sorted(rng.choice(len(found), limit, replace=False))]
    return found


def occurrence_vectors(bilm, token_lists, word):
    """`[n, L + 1 + 1, D]`: every layer, then their even mix, at the first `word` of each."""
    import tensorflow as tf

    from elmo_keras.text import batch_to_char_ids

    vectors = []
    for start in range(0, len(token_lists), 32):
        batch = token_lists[start : start + 32]
        acts = bilm(tf.constant(batch_to_char_ids(batch)), training=False)["activations"].numpy()
        for row, tokens in enumerate(batch):
            layers = acts[row, :, tokens.index(word)]  # [L + 1, D]
            vectors.append(np.concatenate([layers, layers.mean(0, keepdims=True)], axis=0))
    return np.array(vectors)


def pca_2d(x, fit_rows):
    """Projects `x` on the first two principal axes of `x[fit_rows]`."""
    mean = x[fit_rows].mean(0)
    _, _, vt = np.linalg.svd(x[fit_rows] - mean, full_matrices=False)
    return (x - mean) @ vt[:2].T


def layer_names(n_layers):
    return ["layer 0 (char CNN)"] + [f"LSTM {i}" for i in range(1, n_layers + 1)] + ["even mix"]


def run(bilm, bilm_name, output_dir, wikitext_limit=40):
    start = time.perf_counter()
    names = layer_names(bilm.n_layers)
    report = {"bilm": bilm_name, "layers": names, "words": {}}
    projections = {}
    for word, senses in SENSES.items():
        sentences, labels = demo_senses.labelled_sentences(senses)
        tokens = [sentence.split() for sentence in sentences]
        wiki = wikitext_contexts(word, limit=wikitext_limit) if WIKITEXT.exists() else []
        vectors = occurrence_vectors(bilm, tokens + wiki, word)
        hand, wiki_vectors = vectors[: len(tokens)], vectors[len(tokens) :]
        stats = sense_statistics(hand, labels)
        top = bilm.n_layers  # the top LSTM layer
        neighbours = []
        if len(wiki):
            w = _normalize(wiki_vectors[:, top])
            for i in (0, len(tokens) - 1):  # one query per sense
                cos = w @ _normalize(hand[i, top])
                best = np.argsort(-cos)[:3]
                neighbours.append(
                    {
                        "query": " ".join(tokens[i]),
                        "sense": labels[i],
                        "nearest_wikitext": [
                            {"cosine": float(cos[j]), "sentence": " ".join(wiki[j])} for j in best
                        ],
                    }
                )
        report["words"][word] = {
            "n_hand_written": len(tokens),
            "n_wikitext": len(wiki),
            "per_layer": dict(zip(names, stats, strict=True)),
            "neighbours": neighbours,
        }
        projections[word] = (vectors, labels + ["wikitext"] * len(wiki))
    report["seconds"] = time.perf_counter() - start
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "polysemy.json").write_text(json.dumps(report, indent=1) + "\n")
    (output_dir / "polysemy.md").write_text(markdown(report) + "\n")
    plot(projections, bilm.n_layers, output_dir / "polysemy_pca.png", bilm_name)
    return report


def markdown(report):
    lines = [
        f"biLM `{report['bilm']}`. Cosine similarity between occurrences of a word in the "
        "hand-written sentences: within a sense / across senses, and leave-one-out 1-NN sense "
        "accuracy (12 sentences per word, 2 senses, chance = 50%).",
        "",
        "| word | " + " | ".join(report["layers"]) + " |",
        "|---" * (len(report["layers"]) + 1) + "|",
    ]
    for word, info in report["words"].items():
        cells = [
            f"{s['within']:.3f} / {s['across']:.3f}, 1-NN "
            + ("n/a (one vector)" if s["nn_accuracy"] is None else f"{100 * s['nn_accuracy']:.0f}%")
            for s in info["per_layer"].values()
        ]
        lines.append(f"| {word} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append("Nearest WikiText-2 occurrences (top LSTM layer), one query per sense:")
    lines.append("")
    for word, info in report["words"].items():
        for n in info["neighbours"]:
            lines.append(f'- **{word}** ({n["sense"]}) "{n["query"]}"')
            for hit in n["nearest_wikitext"][:2]:
                lines.append(f'  - {hit["cosine"]:.2f}: "{hit["sentence"][:150]}"')
    return "\n".join(lines)


def plot(projections, n_layers, path, bilm_name):
    plt = study_setup.pyplot()
    shown = [0, n_layers]  # context-free layer 0 vs top LSTM layer
    fig, axes = plt.subplots(len(shown), len(projections), figsize=(3.2 * len(projections), 6))
    for col, (word, (vectors, labels)) in enumerate(projections.items()):
        labels = np.array(labels)
        for row, layer in enumerate(shown):
            ax = axes[row, col]
            xy = pca_2d(vectors[:, layer], labels != "wikitext")
            for sense, marker in zip(dict.fromkeys(labels), ["o", "s", "x"], strict=False):
                pick = labels == sense
                ax.scatter(
                    xy[pick, 0],
                    xy[pick, 1],
                    marker=marker,
                    s=18,
                    alpha=0.4 if sense == "wikitext" else 0.9,
                    label=sense,
                )
            ax.set_xticks([])
            ax.set_yticks([])
            if row == 0:
                ax.set_title(f'"{word}"')
                ax.legend(fontsize=7, loc="best")
            if col == 0:
                ax.set_ylabel("layer 0 (context-free)" if layer == 0 else f"LSTM layer {layer}")
    fig.suptitle(
        f"PCA of the vectors of one word across contexts (biLM '{bilm_name}'); "
        "axes fitted on the hand-written sentences; layer 0 puts every occurrence on one point",
        fontsize=9,
    )
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    study_setup.add_bilm_arguments(parser)
    parser.add_argument("--wikitext-limit", type=int, default=40)
    args = parser.parse_args(argv)
    bilm, name, _ = study_setup.load_bilm_for(args)
    report = run(bilm, name, args.output_dir, args.wikitext_limit)
    print(markdown(report))
    print(f"{report['seconds']:.0f}s")


if __name__ == "__main__":
    main()
