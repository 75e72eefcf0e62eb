#!/usr/bin/env python
"""The biLM on Keras-JAX on an accelerator: exactness with and without TF32, speed, memory.

Runs from a plain checkout where only keras, jax, numpy and h5py import (no TensorFlow: the
script blocks `import tensorflow` before anything else, so it cannot lean on it by accident; no
network). One table, and the same as JSON with `--json`:

(a) exactness: both fixtures (tests/fixtures/bilm_tf/model and tests/fixtures/allennlp), 10
    batches of 3 sentences with the LSTM state carried between batches, max |diff| of the top
    layer against the fixtures' expected outputs, with TF32 off (`highest`) and on;
(b) inference: random weights of the published size (`2x4096_512_2048cnn_2xhighway`; a small
    configuration with `--small`), 20-token sentences at 64, 512 and 2048 rows and one batch of
    natural-length WikiText-2 sentences, in float32 (`highest`), TF32 and bfloat16
    (`mixed_bfloat16`): median tokens/s of `--calls` jitted calls after a compiling one, and
    TFLOP/s (the model's FLOP per real token, dense count, times tokens/s);
(c) the device's peak memory over the run (`memory_stats()`; the process's peak RSS on a CPU);
(f), (g) embedding: `BiLMEmbedder` end to end (`--embed-lines` WikiText-2 sentences, `--layers
    average`, hdf5 written) against its compute alone, and the length-aware inference path
    against the core path on the natural batch (`accelerator_embed.py`);
(d), (e) training: the real trainer's step for `original` at 128 x 20 and 512 x 20 in bf16, TF32
    and fp32, and a short WikiText-2 run whose held-out perplexity must fall
    (`accelerator_training.py`; `--train-budget` seconds bound them);
(h) PyTorch: the fixtures with TF32 off, `BiLMEmbedder` and `elmo_keras.allennlp.Elmo` at the
    first two batch sizes against the reference's AllenNLP-style torch loop
    (`accelerator_torch.py`, a process of its own; skipped without torch).

    python benchmarks/accelerator.py --small                  # CPU, ~2 minutes (CI runs it)
    python benchmarks/accelerator.py --json OUT/accelerator.json --budget 150 --train-budget 240
    python benchmarks/accelerator.py --parts training --json OUT/training.json   # (d), (e) alone

The call is `BiLM.stateless_call` under `jax.jit`, fed as `BiLMEmbedder` feeds it (each
distinct token's characters once, `token_index` per position). `--budget` seconds bound the
speed part: rows not reached are marked skipped. See ../shared/gpu/README.md for the machine.
"""

import argparse
import importlib.abc
import json
import os
import pathlib
import sys
import time


class _NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow" or name.startswith("tensorflow."):
            raise ModuleNotFoundError(f"benchmarks/accelerator.py runs without TensorFlow ({name})")
        return None


sys.meta_path.insert(0, _NoTensorFlow())
if os.environ.setdefault("KERAS_BACKEND", "jax") != "jax":
    sys.exit(f"error: KERAS_BACKEND must be jax here. Received: {os.environ['KERAS_BACKEND']!r}")
REPO = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import accelerator_embed  # noqa: E402
import accelerator_inference  # noqa: E402
import accelerator_torch  # noqa: E402
import accelerator_training  # noqa: E402
import fixture_check  # noqa: E402
import jax  # noqa: E402
import keras  # noqa: E402
import numpy as np  # noqa: E402

from elmo_keras.models import BiLM  # noqa: E402

FULL = dict(lstm_units=4096, projection_dim=512)  # the other arguments' defaults are published
SMALL = dict(lstm_units=64, projection_dim=16, filters=[(1, 8), (2, 8), (3, 16)], n_highway=1)
PRECISIONS = {"fp32": ("highest", "float32"), "tf32": ("tensorfloat32", "float32")}
PRECISIONS["bf16"] = ("default", "mixed_bfloat16")
TOKENS = accelerator_inference.TOKENS
PARTS = ("exactness", "inference", "embed", "torch", "training")


def exactness(precision):
    """Max |diff| of the top layer against each fixture, state carried across 10 batches."""

    def load(folder):
        bilm = BiLM.from_bilm_tf(folder / "options.json", folder / "lm_weights.hdf5")
        run, trainable, non_trainable = accelerator_inference.jitted(bilm)

        def call(inputs):
            out = run(trainable, non_trainable, inputs)
            state = {"state_h": out["state_h"], "state_c": out["state_c"]}
            return np.asarray(out["activations"])[:, -1], state

        return call

    with jax.default_matmul_precision(precision):
        return fixture_check.top_layer_diffs(load)


def peak_memory_mb():
    stats = jax.devices()[0].memory_stats() or {}
    if "peak_bytes_in_use" in stats:
        return stats["peak_bytes_in_use"] / 2**20, "device peak_bytes_in_use"
    import resource  # noqa: PLC0415

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "process peak RSS (CPU)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", action="store_true", help="a small biLM and batches (CPU)")
    parser.add_argument("--calls", type=int, default=5, help="timed calls per row (default 5)")
    parser.add_argument(
        "--compile-threads",
        type=int,
        default=os.cpu_count(),
        help="shapes compiled at once before the inference rows are timed (default: the cores)",
    )
    parser.add_argument("--budget", type=float, default=240, help="seconds for (b) (default 240)")
    parser.add_argument("--json", type=pathlib.Path, help="also write the results here")
    parser.add_argument(
        "--train-budget", type=float, default=240, help="seconds for (d) and (e) (default 240)"
    )
    parser.add_argument("--steps", type=int, default=10, help="timed training steps per row")
    parser.add_argument(
        "--loops",
        default="plain,u4,s4",
        help="the training step's loop settings to time, comma separated: plain, uN (unroll "
        "N), sN (both directions stacked, unroll N) (default plain,u4,s4)",
    )
    parser.add_argument(
        "--no-step-memory",
        action="store_true",
        help="leave out each step's compiled memory (it compiles the step a second time)",
    )
    parser.add_argument(
        "--fit-steps", type=int, default=100, help="steps of the row through `fit` (default 100)"
    )
    parser.add_argument(
        "--embed-lines", type=int, default=20000, help="WikiText-2 sentences of (f) (default 20000)"
    )
    parser.add_argument(
        "--run-seconds",
        type=float,
        default=60,
        help="training seconds of the short run (e) (0: no short run)",
    )
    parser.add_argument(
        "--run-steps",
        type=int,
        help="train the short run (e) for exactly this many steps instead of --run-seconds",
    )
    parser.add_argument(
        "--wikitext",
        type=pathlib.Path,
        default=REPO.parent / "shared" / "data" / "wikitext-2" / "valid.raw.txt",
        help="WikiText-2 raw text for the natural batch (default ../shared/data/wikitext-2/"
        "valid.raw.txt; the AllenNLP fixture's sentences when it is missing)",
    )
    parser.add_argument(
        "--parts",
        default=",".join(PARTS),
        help=f"comma list of the parts to run, of {','.join(PARTS)} (default all)",
    )
    parser.add_argument(
        "--reference",
        type=pathlib.Path,
        default=accelerator_torch.REFERENCE,
        help="../shared/gpu/reference_elmo_jax.py, for the torch section's AllenNLP-style loop "
        "(copy it beside the checkout where ../shared does not travel)",
    )
    args = parser.parse_args()
    parts = args.parts.split(",")
    for loop in args.loops.split(","):
        try:
            accelerator_training.loop_settings(loop)
        except ValueError as error:
            parser.error(f"--loops: {error}")
    if not set(parts) <= set(PARTS) or not parts:
        parser.error(f"--parts must be a comma list of {','.join(PARTS)}. Received: {args.parts}")
    started = time.perf_counter()
    device = jax.devices()[0]
    results = {
        "device": f"{device.platform}: {getattr(device, 'device_kind', device)}",
        "jax": jax.__version__,
        "keras": keras.__version__,
        "config": "small" if args.small else "2x4096_512_2048cnn_2xhighway",
        "parts": parts,
        "exactness": {},
        "speed": [],
    }
    if "exactness" in parts:
        results["exactness"] = {p: exactness(PRECISIONS[p][0]) for p in ("fp32", "tf32")}
        print(json.dumps({"exactness": results["exactness"]}), flush=True)
    rows = [4, 16] if args.small else [64, 512, 2048]
    rng = np.random.default_rng(0)
    vocabulary = [
        "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), 3 + i % 9)) for i in range(20000)
    ]
    if args.wikitext.is_file():
        natural = accelerator_inference.natural_batch(args.wikitext, 32 if args.small else 512)
        natural_name = f"{len(natural)} WikiText-2 sentences"
    else:
        fixture = json.loads((REPO / "tests/fixtures/allennlp/sentences.json").read_text())
        natural = [s.split() for group in fixture for s in group][:32]
        natural_name = f"{len(natural)} fixture sentences"
    workloads = [
        (f"{n} x {TOKENS}", accelerator_inference.synthetic_batch(n, rng, vocabulary)) for n in rows
    ]
    workloads.append((natural_name, natural))
    for name, (precision, dtype) in PRECISIONS.items() if "inference" in parts else ():
        keras.utils.clear_session()
        keras.utils.set_random_seed(0)
        bilm = BiLM(**(SMALL if args.small else FULL), dtype=dtype)
        bilm.build()
        flop = accelerator_inference.flop_per_token(bilm)
        start = time.perf_counter()
        programs, trainable, non_trainable = accelerator_inference.compile_rows(
            bilm, workloads, precision, args.compile_threads
        )
        compile_wall = time.perf_counter() - start
        for workload, _ in workloads:
            row = {"precision": name, "workload": workload}
            program, inputs, compile_s, tokens = programs[workload]
            if time.perf_counter() - started > args.budget:
                row["skipped"] = "over --budget"
            else:
                median = accelerator_inference.time_calls(
                    program, trainable, non_trainable, inputs, args.calls
                )
                row.update(
                    tokens_per_s=tokens / median,
                    tflops=flop * tokens / median / 1e12,
                    median_s=median,
                    compile_s=compile_s,
                    compile_wall_s=compile_wall,
                )
            results["speed"].append(row)
            print(json.dumps(row), flush=True)
    if "torch" in parts:  # (h) on Keras's PyTorch backend, in a process of its own
        results["torch"] = accelerator_torch.section(
            args.small, args.calls, workloads[:2], reference=args.reference
        )
        print(json.dumps({"torch": results["torch"]}), flush=True)
    if "embed" in parts:
        embedding(args, results, natural)
    if "training" in parts:
        results["training"] = training(args)
    results["peak_memory_mb"], results["peak_memory_kind"] = peak_memory_mb()
    results["seconds"] = time.perf_counter() - started
    print(report(results))
    if "training" in parts:
        print(accelerator_training.report(results["training"]))
    if "embed" in parts:
        print(accelerator_embed.report(results["embed"], results["fast_path"]))
    if "torch" in parts:
        print(accelerator_torch.report(results["torch"]))
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + "\n")


def embedding(args, results, natural):
    """(f) `embed` end to end vs compute-only and (g) the length-aware path vs the core path
    (`accelerator_embed.py`), fp32."""
    config = SMALL if args.small else FULL
    n_lines = min(args.embed_lines, 48) if args.small else args.embed_lines
    lines = (
        accelerator_inference.natural_batch(args.wikitext, n_lines)
        if args.wikitext.is_file()
        else natural
    )
    with jax.default_matmul_precision("highest"):
        results["embed"] = accelerator_embed.embed_speed(config, lines, 8 if args.small else 64)
        print(json.dumps(results["embed"]), flush=True)
        results["fast_path"] = accelerator_embed.fast_path_speed(config, natural, args.calls)
        print(json.dumps(results["fast_path"]), flush=True)


def training(args):
    """(d) and (e), within `--train-budget` seconds (rows not reached are marked skipped)."""
    started = time.perf_counter()
    rows = [(4, "bf16"), (4, "fp32")] if args.small else accelerator_training.STEP_ROWS
    out = {"steps": []}
    wikitext = args.wikitext.parent
    for n, precision in rows:
        for loop in args.loops.split(","):
            if time.perf_counter() - started > args.train_budget:
                skipped = {"rows": n, "precision": precision, "loop": loop}
                out["steps"].append({**skipped, "skipped": "over budget"})
                continue
            memory = not args.no_step_memory
            row = accelerator_training.step_speed(
                n, precision, args.small, args.steps, loop, memory
            )
            out["steps"].append(row)
            print(json.dumps(row), flush=True)
    if (wikitext / "train.raw.txt").is_file():
        n = 4 if args.small else 128
        measured = [r for r in out["steps"] if r["rows"] == n and "tokens_per_s" in r]
        best = max(measured, key=lambda r: r["tokens_per_s"])["loop"] if measured else "plain"
        text = wikitext / "train.raw.txt"
        row = accelerator_training.fit_speed(n, text, args.small, args.fit_steps, best)
        out["steps"].append(row)
        print(json.dumps(row), flush=True)
        if args.run_seconds > 0 or args.run_steps:
            left = args.train_budget - (time.perf_counter() - started)
            seconds = min(args.run_seconds, max(left, 5))
            run = accelerator_training.short_run(wikitext, args.small, seconds, args.run_steps)
            out["run"] = run
            print(json.dumps(out["run"]), flush=True)
    return out


def report(results):
    lines = [
        f"Device: {results['device']}; JAX {results['jax']}, Keras {results['keras']}; "
        f"model {results['config']}",
        "",
        "| fixture | max abs diff, TF32 off | TF32 on |",
        "|---|---|---|",
    ]
    for name in fixture_check.FIXTURES if results["exactness"] else ():
        off, on = results["exactness"]["fp32"][name], results["exactness"]["tf32"][name]
        lines.append(f"| {name} | {off:.2e} | {on:.2e} |")
    lines += [
        "",
        "| workload | precision | tokens/s | TFLOP/s | compile s (all shapes at once) |",
        "|---|---|---|---|---|",
    ]
    for row in results["speed"]:
        if "skipped" in row:
            lines.append(f"| {row['workload']} | {row['precision']} | skipped | | |")
            continue
        lines.append(
            f"| {row['workload']} | {row['precision']} | {row['tokens_per_s']:,.0f} | "
            f"{row['tflops']:.3g} | {row['compile_s']:.1f} ({row['compile_wall_s']:.1f}) |"
        )
    lines += [
        "",
        f"Peak memory: {results['peak_memory_mb']:,.0f} MB ({results['peak_memory_kind']}); "
        f"run {results['seconds']:.0f} s",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
