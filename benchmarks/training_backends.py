"""The JAX trainer against the TensorFlow trainer on this machine: tokens/s and peak memory.

Each row trains one configuration for `steps` steps through `fit` (the real feed: tf.data on
TensorFlow, the NumPy packer's prefetching thread on JAX) in a fresh process per backend, on
WikiText-2's training text (the bilm-tf fixture corpus where it is absent), same seed, batch and
vocabulary. The table quotes the median time between steps after the first two (which trace and
compile), as tokens/s, the process's peak resident memory, and the ratio to TensorFlow's graph
step measured in the same run. Rounds alternate the order of the backends.

    python benchmarks/training_backends.py [--configs tiny cpu small] [--rounds 2]
        [--json benchmarks/results/training_backends.json]

The table ends with the machine line (CPU, its SIMD flags, threads).
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys

import common

STEPS = {"tiny": 40, "cpu": 15, "small": 8, "medium": 4, "original": 3}
BACKENDS = {"tensorflow": ("tensorflow", False), "tensorflow-xla": ("tensorflow", True)}
BACKENDS["jax"] = ("jax", True)


def _data():
    wikitext = common.WIKITEXT_DIR / "train.raw.txt"
    if wikitext.is_file():
        return str(wikitext)
    return str(common.REPO / "tests" / "fixtures" / "bilm_tf" / "train" / "data.txt")


def child(backend, xla, name, steps, batch_size):
    """One row, in this (fresh) process: prints its JSON on the last line."""
    import time

    from elmo_keras.training.configs import get_config
    from elmo_keras.training.feed.data import build_vocabulary

    config = get_config(name)
    config.update(batch_size=batch_size, dropout=0.1)
    vocabulary = build_vocabulary(_data(), min_count=3)
    if backend == "jax":
        from elmo_keras.training.jax.jax_trainer import JaxTrainer

        trainer = JaxTrainer(config, vocabulary, seed=0)
    else:
        from elmo_keras.training.tf.trainer import Trainer

        trainer = Trainer(config, vocabulary, seed=0, jit_compile=xla)
    stamps = []
    trainer.fit(
        _data(),
        steps=steps + 2,
        log_every=10**6,
        handle_signals=False,
        on_step=lambda step, logs: stamps.append((time.perf_counter(), logs["tokens"])),
    )
    gaps = [b[0] - a[0] for a, b in zip(stamps[1:], stamps[2:], strict=False)]
    tokens = statistics.median(t for _, t in stamps[2:])
    return {
        "config": name,
        "batch_size": batch_size,
        "steps": len(gaps),
        "step_seconds": statistics.median(gaps),
        "tokens_per_second": tokens / statistics.median(gaps),
        "peak_rss_mb": common.peak_rss_mb(),
        "sparse_softmax": getattr(trainer, "sparse_softmax", False),
    }


def _run_child(label, name, steps, batch_size):
    backend, xla = BACKENDS[label]
    env = {**os.environ, "KERAS_BACKEND": backend}
    command = [sys.executable, __file__, "--child", label, name, str(steps), str(batch_size)]
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if result.returncode:
        raise RuntimeError(f"{label} {name} failed:\n{result.stderr[-3000:]}")
    row = json.loads(result.stdout.strip().splitlines()[-1])
    return {**row, "backend": label}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["tiny", "cpu", "small"])
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--backends", nargs="+", default=list(BACKENDS), choices=list(BACKENDS))
    parser.add_argument("--steps", type=int, help="timed steps per row (default: per config)")
    parser.add_argument("--json", type=pathlib.Path)
    parser.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        label, name, steps, batch_size = args.child
        _, xla = BACKENDS[label]
        row = child(os.environ["KERAS_BACKEND"], xla, name, int(steps), int(batch_size))
        print(json.dumps(row))
        return
    rows = []
    for name in args.configs:
        steps = args.steps or STEPS[name]
        for index in range(args.rounds):
            for label in common.rotated(args.backends, index):
                row = _run_child(label, name, steps, args.batch_size)
                print(json.dumps(row), flush=True)
                rows.append(row)
    env = common.environment(with_tensorflow=False)
    table = report(rows, args.backends, env)
    print(table)
    if args.json:
        common.write_json(args.json, {"rows": rows, "environment": env, "table": table})


def report(rows, backends, env):
    lines = [common.table_header(["config", "backend", "tokens/s", "vs TensorFlow", "peak MB"])]
    for name in dict.fromkeys(r["config"] for r in rows):
        mine = {
            label: [r for r in rows if (r["config"], r["backend"]) == (name, label)]
            for label in backends
        }
        speed = {
            label: statistics.median(r["tokens_per_second"] for r in mine[label])
            for label in backends
        }
        for label in backends:
            peak = max(r["peak_rss_mb"] for r in mine[label])
            ratio = speed[label] / speed["tensorflow"] if "tensorflow" in speed else float("nan")
            lines.append(
                common.table_row(
                    [name, label, f"{speed[label]:,.0f}", f"{ratio:.2f}", f"{peak:,.0f}"]
                )
            )
    batch = rows[0]["batch_size"] if rows else "-"
    lines.append(f"\nbatch {batch} x 20 tokens; medians over rounds; {common.machine_line(env)}")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
