"""TensorFlow's softmax update on 2 mirrored CPU replicas: the dense gradient against the rows.

Issue 42, point 5. With a sampled softmax and Adagrad the step reads a few thousand rows of the
`[vocabulary, projection]` softmax kernel. `dense` is the step as it was until issue 42: the
kernel's gradient made dense (`tf.convert_to_tensor`), all-reduced for the global norm, handed to
Keras' optimizer (which all-reduces it again) and applied to the whole kernel and accumulator.
`sparse` is the row update (`elmo_keras/training/tf/gradients.py`): the rows gathered from both
replicas, summed by id, and only those rows of the kernel and accumulator written.

Each mode runs in a fresh process (`MirroredStrategy` over 2 logical CPU devices of one CPU),
the modes alternating from round to round. A row: the median wall time between steps after the
first two (tracing), the process's resident memory after the second step and its peak during
the later steps (`VmHWM`, reset after the second step). The data are random words of the vocabulary
(Zipf-distributed, as text is), the biLM small (its cost is the same in both modes).

    python benchmarks/tf_softmax_update.py [--vocab 100000] [--projection 512] [--samples 8192]
        [--steps 6] [--rounds 2] [--json benchmarks/results/tf_softmax_update.json]
        [--markdown benchmarks/results/tf_softmax_update.md]
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile

import common

MODES = ("dense", "sparse")


def _corpus(path, vocabulary_size, lines, seed):
    """`lines` lines of 10-30 words drawn Zipf-like from `w0 ... w{vocabulary_size - 4}`."""
    import numpy as np

    rng = np.random.default_rng(seed)
    ranks = np.arange(1, vocabulary_size - 2)
    p = 1.0 / ranks
    p /= p.sum()
    with open(path, "w", encoding="utf-8") as f:
        for _ in range(lines):
            words = rng.choice(len(ranks), size=int(rng.integers(10, 31)), p=p)
            f.write(" ".join(f"w{i}" for i in words) + "\n")


def _rss_mb():
    """This process's resident set now, in MB (`VmRSS`, Linux)."""
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024.0
    return float("nan")


def child(mode, vocabulary_size, projection, samples, steps, batch_size):
    """One row, in this (fresh) process; returns it as a dict."""
    import time

    import tensorflow as tf

    cpus = tf.config.list_physical_devices("CPU")
    tf.config.set_logical_device_configuration(
        cpus[0], [tf.config.LogicalDeviceConfiguration()] * 2
    )

    from elmo_keras.text.vocabulary import Vocabulary
    from elmo_keras.training.configs import get_config
    from elmo_keras.training.tf.trainer import Trainer

    config = get_config("tiny")
    config["lstm"].update(dim=projection, projection_dim=projection)
    config.update(
        batch_size=batch_size,
        n_negative_samples_batch=samples,
        all_clip_norm_val=1.0,
        optimizer="adagrad",
        learning_rate=0.2,
    )
    tokens = ["<S>", "</S>", "<UNK>"] + [f"w{i}" for i in range(vocabulary_size - 3)]
    vocabulary = Vocabulary(tokens)
    with tempfile.TemporaryDirectory() as folder:
        data = os.path.join(folder, "train.txt")
        _corpus(data, vocabulary_size, 2000, seed=0)
        strategy = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
        trainer = Trainer(config, vocabulary, strategy=strategy, seed=0)
        trainer.sparse_softmax = mode == "sparse"
        stamps, rss = [], []

        def on_step(step, logs):
            stamps.append(time.perf_counter())
            if step == 2:  # traced: the memory of the steps themselves from here
                rss.append(_rss_mb())
                common.reset_peak_rss()

        trainer.fit(data, steps=steps + 2, log_every=10**6, handle_signals=False, on_step=on_step)
    gaps = [b - a for a, b in zip(stamps[1:], stamps[2:], strict=False)]
    return {
        "mode": mode,
        "step_seconds": statistics.median(gaps),
        "rss_before_mb": rss[0],
        "peak_rss_mb": common.peak_rss_mb(),
        "steps": len(gaps),
    }


def _run_child(mode, args):
    numbers = [args.vocab, args.projection, args.samples, args.steps, args.batch_size]
    command = [sys.executable, __file__, "--child", mode, *map(str, numbers)]
    env = {**os.environ, "KERAS_BACKEND": "tensorflow"}
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if result.returncode:
        raise RuntimeError(f"{mode} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--vocab", type=int, default=100_000)
    parser.add_argument("--projection", type=int, default=512)
    parser.add_argument("--samples", type=int, default=8192)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=6, help="timed steps per row")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=pathlib.Path)
    parser.add_argument("--markdown", type=pathlib.Path)
    parser.add_argument("--child", nargs=6, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    common.prefer_onednn()
    if args.child:
        mode, *numbers = args.child
        print(json.dumps(child(mode, *map(int, numbers))))
        return
    load_before = os.getloadavg()
    rows = []
    for index in range(args.rounds):
        for mode in common.rotated(list(MODES), index):
            rows.append({**_run_child(mode, args), "round": index})
            print(json.dumps(rows[-1]), flush=True)
    load_after = os.getloadavg()
    env = common.environment()
    command = "python benchmarks/tf_softmax_update.py " + " ".join(
        argv if argv is not None else sys.argv[1:]
    )
    summary = {}
    for mode in MODES:
        mine = [r for r in rows if r["mode"] == mode]
        summary[mode] = {
            key: statistics.median(r[key] for r in mine)
            for key in ("step_seconds", "rss_before_mb", "peak_rss_mb")
        }
    lines = [
        f"# TensorFlow's softmax update, {args.vocab:,} x {args.projection} kernel, "
        f"{args.samples} sampled, batch {args.batch_size} x 20 on 2 mirrored CPU replicas",
        "",
        f"`{command}`",
        "",
        common.table_header(
            ["mode", "s / step", "RSS after step 2 (MB)", "peak RSS (MB)", "peak - that"]
        ),
    ]
    for mode in MODES:
        s = summary[mode]
        growth = s["peak_rss_mb"] - s["rss_before_mb"]
        cells = [mode, f"{s['step_seconds']:.3f}", f"{s['rss_before_mb']:.0f}"]
        lines.append(common.table_row(cells + [f"{s['peak_rss_mb']:.0f}", f"{growth:.0f}"]))
    ratio = summary["dense"]["step_seconds"] / summary["sparse"]["step_seconds"]
    lines += [
        "",
        f"Medians over {args.rounds} rounds of {args.steps} timed steps each; the row update is "
        f"{ratio:.1f}x the dense step's speed.",
        f"Load average (1, 5, 15 min) before: {', '.join(f'{x:.1f}' for x in load_before)}; "
        f"after: {', '.join(f'{x:.1f}' for x in load_after)}.",
        "",
        common.machine_line(env),
    ]
    table = "\n".join(lines)
    results = {
        "command": command,
        "rows": rows,
        "medians": summary,
        "dense_over_sparse_time": ratio,
        "load_before": load_before,
        "load_after": load_after,
        "environment": env,
    }
    common.publish(table, results, args.json, args.markdown)


if __name__ == "__main__":
    main()
