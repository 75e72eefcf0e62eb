#!/usr/bin/env python
"""Exported models outside the Keras process: cold start, serving memory, int8 quality.

The exported models' speed next to Keras is a row of `benchmarks/inference.py` (`--modes
function,savedmodel,onnx,onnx_int8 --workdir W`; it writes the exports into `W/export/`). This
script measures what that cannot, in a process that has TensorFlow and the Keras model loaded:

    python benchmarks/inference_export.py cold-start --export W/export [--repeats 3]
    python benchmarks/inference_export.py quality --export W/export   # int8 vs float32 cosine

- `cold-start`: fresh process -> first embedding of one 17-token sentence (imports included),
  and the peak resident set of a process that only serves; medians over `--repeats`.
- `quality`: cosine similarity of the int8 model's vectors to the float32 model's, per real
  token and layer, on the benchmark text (`common.make_workloads`), and the speed ratio
  (interleaved, medians).

Each prints a table that ends with the machine line (CPU and its SIMD flags).
"""

import argparse
import json
import pathlib
import statistics
import subprocess
import sys
import textwrap

import common
import numpy as np

_COLD_ONNX = """
import time
start = time.perf_counter()
from elmo_keras.runtime import OnnxEmbedder
embedder = OnnxEmbedder({model!r})
loaded = time.perf_counter()
embedder.embed([{sentence!r}])
first = time.perf_counter()
"""

_COLD_SAVEDMODEL = """
import time
start = time.perf_counter()
import os
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import tensorflow as tf
model = tf.saved_model.load({model!r})
loaded = time.perf_counter()
out = model.signatures["default"](sentences=tf.constant([{text!r}]))
out["elmo"].numpy()
first = time.perf_counter()
"""

_REPORT = """
import json, sys
def _hwm():
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024.0
heavy = sorted(m for m in ("tensorflow", "keras") if m in sys.modules)
print("COLD " + json.dumps({"load_s": loaded - start, "first_s": first - start,
                            "peak_rss_mb": _hwm(), "heavy_modules": heavy}))
"""

SENTENCE = "The cat sat on the mat , and then it went to sleep in the warm afternoon sun .".split()
MODEL_FILES = {"onnx": "model.onnx", "onnx_int8": "model.int8.onnx", "savedmodel": "savedmodel"}


def _cold_once(name, script):
    """One fresh process; its report, with the wall time from launch to exit."""
    command = [sys.executable, "-c", textwrap.dedent(script) + _REPORT]
    proc, wall = common.timed(subprocess.run, command, capture_output=True, text=True)
    line = [x for x in proc.stdout.splitlines() if x.startswith("COLD ")]
    if proc.returncode or not line:
        raise RuntimeError(f"{name} cold start failed: {proc.stderr[-2000:]}")
    return {**json.loads(line[0][len("COLD ") :]), "process_wall_s": wall}


def cold_start(export_dir, repeats=3, log=print):
    """Fresh process -> first embedding of one 17-token sentence; median over `repeats`."""
    export_dir = pathlib.Path(export_dir)
    paths = {name: str(export_dir / filename) for name, filename in MODEL_FILES.items()}
    scripts = {
        "onnx": _COLD_ONNX.format(model=paths["onnx"], sentence=SENTENCE),
        "onnx_int8": _COLD_ONNX.format(model=paths["onnx_int8"], sentence=SENTENCE),
        "savedmodel": _COLD_SAVEDMODEL.format(model=paths["savedmodel"], text=" ".join(SENTENCE)),
    }
    results = {}
    for name, script in scripts.items():
        if not pathlib.Path(paths[name]).exists():
            continue
        runs = [_cold_once(name, script) for _ in range(repeats)]
        results[name] = {
            "process_to_first_embedding_s": statistics.median(r["process_wall_s"] for r in runs),
            "in_process_to_first_embedding_s": statistics.median(r["first_s"] for r in runs),
            "model_load_s": statistics.median(r["load_s"] for r in runs),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
            "imports_tensorflow": bool(runs[0]["heavy_modules"]),
        }
        log(f"{name}: {json.dumps(results[name])}")
    return results


def cold_start_table(results):
    header = ["model", "launch -> first embedding s", "in process s", "load s"]
    lines = [common.table_header(header + ["peak RSS MB", "imports TF"])]
    for name, r in results.items():
        cells = [name, f"{r['process_to_first_embedding_s']:.2f}"]
        cells += [f"{r['in_process_to_first_embedding_s']:.2f}", f"{r['model_load_s']:.2f}"]
        cells += [f"{r['peak_rss_mb']:.0f}", "yes" if r["imports_tensorflow"] else "no"]
        lines.append(common.table_row(cells))
    return "\n".join(lines)


def _cosines(a, b):
    """Cosine similarity per real token and layer, flattened, and the largest |a - b|."""
    cosines = []
    for x, y in zip(a, b, strict=True):
        num = np.sum(x * y, axis=-1)
        den = np.linalg.norm(x, axis=-1) * np.linalg.norm(y, axis=-1)
        cosines.append((num / np.maximum(den, 1e-12)).reshape(-1))
    max_abs = max(float(np.abs(x - y).max()) for x, y in zip(a, b, strict=True) if x.size)
    return np.concatenate(cosines), max_abs


def int8_quality(export_dir, sentences, batch_size=32, repeats=5, log=print):
    """Cosine similarity int8 vs float32 per real token (all layers) and the speed ratio."""
    from elmo_keras.runtime import OnnxEmbedder

    export_dir = pathlib.Path(export_dir)
    embedders = {
        "float32": OnnxEmbedder(export_dir / MODEL_FILES["onnx"], batch_size=batch_size),
        "int8": OnnxEmbedder(export_dir / MODEL_FILES["onnx_int8"], batch_size=batch_size),
    }
    cos, max_abs = _cosines(*(e.embed(sentences) for e in embedders.values()))
    times = {name: [] for name in embedders}
    for r in range(repeats):  # interleaved
        for name in common.rotated(tuple(embedders), r):
            times[name].append(common.timed(embedders[name].embed, sentences)[1])
    n_tokens = sum(len(s) for s in sentences)
    result = {
        "tokens": n_tokens,
        "cosine_mean": float(cos.mean()),
        "cosine_min": float(cos.min()),
        "cosine_p1": float(np.percentile(cos, 1)),
        "max_abs_diff": max_abs,
        "float32_tokens_per_s": n_tokens / statistics.median(times["float32"]),
        "int8_tokens_per_s": n_tokens / statistics.median(times["int8"]),
    }
    result["speedup"] = result["int8_tokens_per_s"] / result["float32_tokens_per_s"]
    log(json.dumps(result, indent=2))
    return result


def quality_table(result):
    header = ["tokens", "cosine mean", "cosine min", "cosine 1st pct", "max abs diff"]
    header += ["float32 tokens/s", "int8 tokens/s", "speed-up"]
    cells = [result["tokens"], f"{result['cosine_mean']:.5f}", f"{result['cosine_min']:.5f}"]
    cells += [f"{result['cosine_p1']:.5f}", f"{result['max_abs_diff']:.2e}"]
    cells += [f"{result['float32_tokens_per_s']:.0f}", f"{result['int8_tokens_per_s']:.0f}"]
    cells.append(f"{result['speedup']:.2f}x")
    return common.table_header(header) + "\n" + common.table_row(cells)


def benchmark_sentences(n, seed=0):
    """`n` 20-token sentences and 32 of natural lengths, as `inference.py` times them."""
    workloads, _ = common.make_workloads(batches=(n,), natural=True, seed=seed)
    return [s for w in workloads for s in w.sentences]


def _machine_line():
    import onnxruntime

    line = common.machine_line(common.environment(with_tensorflow=False))
    return f"{line}; onnxruntime {onnxruntime.__version__}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    cold = sub.add_parser("cold-start", help="fresh process -> first embedding, peak RSS")
    cold.add_argument("--export", required=True, help="an `elmo-keras export` folder")
    cold.add_argument("--repeats", type=int, default=3)
    quality = sub.add_parser("quality", help="int8 vs float32: cosine similarity and speed")
    quality.add_argument("--export", required=True)
    quality.add_argument("--sentences", type=int, default=32)
    quality.add_argument("--repeats", type=int, default=5)
    for command in (cold, quality):
        command.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args(argv)
    if not pathlib.Path(args.export).is_dir():
        print(f"error: --export {args.export} is not a folder", file=sys.stderr)
        return 2
    if args.command == "cold-start":
        result = cold_start(args.export, args.repeats)
        table = cold_start_table(result)
    else:
        sentences = benchmark_sentences(args.sentences)
        result = int8_quality(args.export, sentences, repeats=args.repeats)
        table = quality_table(result)
    print(f"\n{table}\n{_machine_line()}")
    if args.json:
        common.write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
