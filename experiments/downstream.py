"""Downstream experiment: MR sentence sentiment with random / GloVe / ELMo / [GloVe ; ELMo] inputs.

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
    python experiments/downstream.py --bilm-dir runs/wikitext2
    # or in two parts (the baselines need no biLM), merged into one table:
    python experiments/downstream.py --variants random glove
    python experiments/downstream.py --variants elmo glove+elmo --merge
    python experiments/downstream.py --replot   # redraw plots and table from downstream.json
    python experiments/downstream.py --fixture --fractions 0.1 --seeds 0 --max-epochs 1 \
        --output-dir /tmp/downstream-smoke  # a smoke test with the tiny packaged biLM

Writes `downstream.json`, `downstream.md`, `downstream_sample_efficiency.png` and
`downstream_scalar_mix.png` to `--output-dir` (default `experiments/results/`).
The data and the ELMo cache are in `downstream_data.py`, the classifier and its training in
`downstream_model.py`.
"""

import argparse
import json
import os
import pathlib
import sys
import time

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import downstream_data  # noqa: E402
import numpy as np  # noqa: E402
import study_setup  # noqa: E402
from downstream_model import TrainSettings, train_one  # noqa: E402

VARIANTS = ("random", "glove", "elmo", "glove+elmo")
FRACTIONS = (0.05, 0.1, 0.25, 0.5, 1.0)
SEEDS = (0, 1, 2)


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
    plt = study_setup.pyplot()
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
    plt = study_setup.pyplot()
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


def write_plots(results, fractions, n_train_full, output_dir, bilm_name, bilm_params):
    """The sample-efficiency plot and, when ELMo ran, the learned ScalarMix weights."""
    table = summarize(results, fractions, n_train_full)
    title = f"MR sentiment, BiLSTM classifier; ELMo = biLM '{bilm_name}'"
    if bilm_params:
        title += f" ({bilm_params / 1e6:.1f}M params)"
    path = output_dir / "downstream_sample_efficiency.png"
    plot_sample_efficiency(table, fractions, n_train_full, path, title)
    if any("elmo" in r["variant"] for r in results):
        plot_scalar_mix(
            results,
            output_dir / "downstream_scalar_mix.png",
            f"ScalarMix after training on MR (100%), biLM '{bilm_name}'",
        )
    return table


def replot(output_dir):
    """Redraws the plots and the table from a finished run's `downstream.json`."""
    summary = json.loads((output_dir / "downstream.json").read_text())
    results, n_full = summary["runs"], summary["split"]["train"]
    fractions = sorted({r["fraction"] for r in results})
    table = write_plots(
        results, fractions, n_full, output_dir, summary["bilm"], summary.get("bilm_parameters")
    )
    print(markdown_table(table, fractions, n_full))
    return summary


# --------------------------------------------------------------------------------------------
# A run: the grid of fractions x seeds x variants, merged with earlier runs, written out
# --------------------------------------------------------------------------------------------


def _parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    study_setup.add_bilm_arguments(parser)
    data = study_setup.DATA
    parser.add_argument(
        "--data", type=pathlib.Path, default=data / "mr-sentiment" / "mr_snippets_sentiment.tsv"
    )
    parser.add_argument(
        "--glove", type=pathlib.Path, default=data / "glove" / "glove.6B.50d.subset.txt"
    )
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
    return parser


def _load_bilm(args):
    """`(bilm or None, what the summary says of it)`: a biLM only when a variant uses ELMo."""
    if not any("elmo" in v for v in args.variants):
        none = {"bilm": "none", "bilm_parameters": None, "bilm_weights_sha256": None}
        return None, {**none, "bilm_training_summary": None}
    bilm, name, about = study_setup.load_bilm_for(args)
    print(
        f"biLM: {name}, {bilm.count_params():,} parameters, "
        f"{bilm.n_layers + 1} layers of {2 * bilm.projection_dim}"
    )
    return bilm, {
        "bilm": name,
        "bilm_parameters": bilm.count_params(),
        "bilm_weights_sha256": about["weights_sha256"],
        "bilm_training_summary": about["training_summary"],
    }


def _run_grid(data, args):
    """Every (fraction, seed, variant): one trained classifier each, printed as it finishes."""
    settings = TrainSettings(
        max_epochs=args.max_epochs, layer_norm=args.layer_norm, elmo_dropout=args.elmo_dropout
    )
    n_full = len(data["train"])
    results = []
    for fraction in args.fractions:
        n = max(1, int(round(fraction * n_full)))
        for seed in args.seeds:
            subset = np.random.default_rng(100 + seed).permutation(data["train"])[:n]
            for variant in args.variants:
                r = train_one(variant, data, subset, seed, settings)
                r["fraction"] = fraction
                results.append(r)
                print(
                    f"{fraction:>5} seed {seed} {variant:>11}: test {r['test_accuracy']:.4f} "
                    f"(valid {r['valid_accuracy']:.4f}, epoch {r['best_epoch']}, "
                    f"{r['seconds']:.0f}s)",
                    flush=True,
                )
    return results


def _merge(json_path, results, invocation, info):
    """With `--merge`: the earlier runs this invocation did not redo, the earlier invocations
    that still describe the table, and the earlier biLM's description where this one ran none."""
    previous = json.loads(json_path.read_text())
    done = {(r["variant"], r["fraction"], r["seed"]) for r in results}
    kept = [r for r in previous["runs"] if (r["variant"], r["fraction"], r["seed"]) not in done]
    # An earlier invocation whose runs this one redid no longer describes the table.
    invocations = [
        i for i in previous.get("invocations", []) if i["command"] != invocation["command"]
    ]
    for key, value in info.items():
        if value in (None, "none"):
            info[key] = previous.get(key, value)
    return kept + results, invocations + [invocation]


def _write(args, data, results, invocations, info):
    """`downstream.json`, `downstream.md` and the plots in `--output-dir`; returns the summary."""
    n_full = len(data["train"])
    fractions = sorted({r["fraction"] for r in results})
    args.output_dir.mkdir(parents=True, exist_ok=True)
    table = write_plots(
        results, fractions, n_full, args.output_dir, info["bilm"], info["bilm_parameters"]
    )
    md = markdown_table(table, fractions, n_full)
    print(md)
    summary = {
        "invocations": invocations,
        **info,
        "split": {
            "seed": downstream_data.SPLIT_SEED,
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
    (args.output_dir / "downstream.json").write_text(json.dumps(summary, indent=1) + "\n")
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
    return summary


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.replot:
        return replot(args.output_dir)

    import tensorflow as tf

    tf.config.threading.set_inter_op_parallelism_threads(2)
    tf.config.threading.set_intra_op_parallelism_threads(2)
    wall = time.perf_counter()
    bilm, info = _load_bilm(args)
    digest = (info["bilm_weights_sha256"] or "fixture")[:12]
    data = downstream_data.prepare(bilm, args, f"{info['bilm']}_{digest}")
    results = _run_grid(data, args)
    wall = time.perf_counter() - wall
    command = "python experiments/downstream.py " + " ".join(sys.argv[1:] if argv is None else argv)
    invocation = {
        "command": command,
        "wall_seconds": wall,
        "elmo_cache_seconds": data["elmo_cache_seconds"],
    }
    invocations = [invocation]
    json_path = args.output_dir / "downstream.json"
    if args.merge and json_path.exists():
        results, invocations = _merge(json_path, results, invocation, info)
    summary = _write(args, data, results, invocations, info)
    print(f"wall time {wall:.0f}s")
    return summary


if __name__ == "__main__":
    main()
