#!/usr/bin/env python
"""How large the shipped `mini_en` may be: CPU embedding cost and package bytes of candidate
architectures, against mini_en v1, measured in one run (issue 31).

    nice -n 10 python benchmarks/mini_en_size.py --json benchmarks/results/mini_en_size.json \
        --markdown benchmarks/results/mini_en_size.md
    python benchmarks/mini_en_size.py --candidates v1 v2 --sentences 64 --rounds 2   # smoke

The limits (issue 31): embedding on a CPU at most 4x as costly per token as v1, and the package
under 50 MB. Each candidate is a `BiLM` with seeded random weights (the cost of a forward pass
does not depend on the values) in an `ElmoEmbedding` (dropout 0), one `tf.function` over
character ids `[None, None, 50]`, traced before timing; the text is the first `--sentences`
sentences of WikiText-2 valid in batches of 32. The rounds rotate the candidates; tokens/s is the
median over rounds, the ratio is v1's median over the candidate's (cost per token relative to v1).

Bytes: `lm_weights.hdf5` as `elmo_keras.weights.save_weights` writes it for the candidate, and
`softmax.hdf5` for its vocabulary (`save_softmax`, a `[vocabulary, projection]` kernel and a
bias), measured on the written files; "package" is the two plus the package's other files
(its code, docs and the tiny test biLM: the built wheel's size without the mini_en files).
"""

import argparse
import os
import pathlib
import statistics
import sys
import tempfile
import time

import common

common.prefer_onednn()

V1_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 128]]
V2_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256]]
PUBLISHED_FILTERS = V2_FILTERS + [[6, 512], [7, 1024]]
# name: (LSTM cells, projection, char CNN filters, vocabulary)
CANDIDATES = {
    "v1": (512, 128, V1_FILTERS, 33_279),  # v1's vocabulary (its model card, git e8c237a)
    "v2": (1024, 128, V2_FILTERS, 40000),
    "v2, 60k words": (1024, 128, V2_FILTERS, 60000),
    "2048 cells": (2048, 128, V2_FILTERS, 40000),
    "projection 256": (1024, 256, V2_FILTERS, 40000),
    "published char CNN": (1024, 128, PUBLISHED_FILTERS, 40000),
}
COST_LIMIT, PACKAGE_LIMIT = 4.0, 50_000_000
REPO = pathlib.Path(__file__).resolve().parents[1]
ASSETS = REPO / "elmo_keras" / "assets" / "mini_en"


def _arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--candidates",
        nargs="+",
        default=list(CANDIDATES),
        choices=list(CANDIDATES),
        help="architectures (default: all)",
    )
    parser.add_argument("--sentences", type=int, default=320, help="sentences timed (320)")
    parser.add_argument("--rounds", type=int, default=5, help="timed rounds (5)")
    parser.add_argument("--json", type=pathlib.Path, help="write the results here")
    parser.add_argument("--markdown", type=pathlib.Path, help="write the table here")
    return parser.parse_args()


def _other_package_bytes():
    """The package's files but mini_en's model files: what the wheel carries besides them."""
    total = 0
    for path in (REPO / "elmo_keras").rglob("*"):
        if path.is_file() and "__pycache__" not in path.parts:
            if path.parent == ASSETS and path.name in ("lm_weights.hdf5", "softmax.hdf5"):
                continue
            total += path.stat().st_size
    return total


def _build(name, vocabulary):
    import keras
    import numpy as np

    from elmo_keras.models import BiLM, ElmoEmbedding
    from elmo_keras.weights import save_softmax, save_weights

    cells, projection, filters, _ = CANDIDATES[name]
    keras.utils.set_random_seed(0)
    bilm = BiLM(lstm_units=cells, projection_dim=projection, filters=filters, n_highway=1)
    bilm.build()
    with tempfile.TemporaryDirectory() as folder:
        save_weights(bilm, os.path.join(folder, "lm_weights.hdf5"))
        kernel = np.zeros((vocabulary, projection), np.float32)
        save_softmax(os.path.join(folder, "softmax.hdf5"), kernel, np.zeros(vocabulary, np.float32))
        sizes = {f: os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)}
    parameters = sum(int(np.prod(v.shape)) for v in bilm.weights)
    return ElmoEmbedding(bilm, dropout=0.0), sizes, parameters


def main():
    args = _arguments()
    import numpy as np
    import tensorflow as tf

    from elmo_keras.text import batch_to_char_ids

    tf.get_logger().setLevel("ERROR")  # one traced function per candidate is intended

    load_start = os.getloadavg()
    stream = common._wikitext_sentences((common.WIKITEXT_VALID,))[: args.sentences]
    tokens = sum(len(s) for s in stream)
    batches = [batch_to_char_ids(stream[i : i + 32]) for i in range(0, len(stream), 32)]
    names = list(dict.fromkeys(["v1"] + args.candidates))
    other = _other_package_bytes()
    rows, runs = {}, {}
    for name in names:
        vocabulary = CANDIDATES[name][3]
        layer, sizes, parameters = _build(name, vocabulary)
        run = tf.function(
            lambda ids, layer=layer: layer(ids, training=False),
            input_signature=[tf.TensorSpec([None, None, 50], tf.int32)],
        )
        run(batches[0])  # trace
        runs[name] = run
        rows[name] = {
            "candidate": name,
            "lstm_cells": CANDIDATES[name][0],
            "projection": CANDIDATES[name][1],
            "char_cnn_filters": sum(n for _, n in CANDIDATES[name][2]),
            "vocabulary": vocabulary,
            "bilm_parameters": parameters,
            "lm_weights_bytes": sizes["lm_weights.hdf5"],
            "softmax_bytes": sizes["softmax.hdf5"],
            "package_bytes": other + sizes["lm_weights.hdf5"] + sizes["softmax.hdf5"],
            "tokens_per_second": [],
        }
    for round_index in range(args.rounds):
        for name in common.rotated(names, round_index):
            start = time.perf_counter()
            for batch in batches:
                np.asarray(runs[name](batch))
            rows[name]["tokens_per_second"].append(tokens / (time.perf_counter() - start))
    v1 = statistics.median(rows["v1"]["tokens_per_second"])
    for row in rows.values():
        row["median_tokens_per_second"] = statistics.median(row["tokens_per_second"])
        row["cost_vs_v1"] = v1 / row["median_tokens_per_second"]
        row["fits"] = row["cost_vs_v1"] <= COST_LIMIT and row["package_bytes"] < PACKAGE_LIMIT
    env = common.environment()
    results = {
        "text": f"WikiText-2 valid, first {len(stream)} sentences ({tokens} tokens), batches of 32",
        "rounds": args.rounds,
        "other_package_bytes": other,
        "rows": list(rows.values()),
        "load_average_start_end": [load_start[0], os.getloadavg()[0]],
        "environment": env,
    }
    table = _table(results, env)
    common.publish(table, results, args.json, args.markdown)
    return 0


def _table(results, env):
    lines = [
        f"Candidates for mini_en v2: embedding speed on {results['text']} (medians of "
        f"{results['rounds']} rotating rounds in one run) and package bytes.",
        "",
        common.table_header(
            [
                "candidate",
                "LSTM",
                "char CNN filters",
                "words",
                "biLM parameters",
                "tokens/s",
                "cost vs v1",
                "lm_weights.hdf5",
                "softmax.hdf5",
                "package",
                "fits",
            ]
        ),
    ]
    for row in results["rows"]:
        lines.append(
            common.table_row(
                [
                    row["candidate"],
                    f"{row['lstm_cells']}/{row['projection']}",
                    f"{row['char_cnn_filters']}",
                    f"{row['vocabulary']:,}",
                    f"{row['bilm_parameters']:,}",
                    f"{row['median_tokens_per_second']:.0f}",
                    f"**{row['cost_vs_v1']:.2f}x**",
                    f"{row['lm_weights_bytes'] / 1e6:.1f} MB",
                    f"{row['softmax_bytes'] / 1e6:.1f} MB",
                    f"{row['package_bytes'] / 1e6:.1f} MB",
                    "yes" if row["fits"] else "no",
                ]
            )
        )
    load = results["load_average_start_end"]
    lines += [
        "",
        f"Limits (issue 31): cost per token at most {COST_LIMIT:.0f}x v1's, package under "
        f"{PACKAGE_LIMIT / 1e6:.0f} MB (the model files plus the package's other "
        f"{results['other_package_bytes'] / 1e6:.1f} MB). LSTM: cells/projection.",
        f"Load average {load[0]:.1f} at the start, {load[1]:.1f} at the end.",
        common.machine_line(env),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
