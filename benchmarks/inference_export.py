#!/usr/bin/env python
"""Exported-model rows for `benchmarks/inference.py`: SavedModel and ONNX Runtime (+ int8).

As a plug-in (the lead's script imports it when `--modes` names one of these):

    python benchmarks/inference.py --modes function,savedmodel,onnx,onnx_int8 --workdir W

- `savedmodel`: `tf.saved_model.load(...).signatures["char_ids"]`.
- `onnx`: an `onnxruntime.InferenceSession` on `model.onnx` (CPU provider, default threads).
- `onnx_int8`: the same on `model.int8.onnx` (int8 dynamic quantization).

The exports are written once into `WORKDIR/export/` with `elmo_keras.export.export_model` (the
code behind `elmo-keras export --format all --quantize`) and reused by later runs and by the
memory workers while the weight file is unchanged: converting the full configuration to ONNX
takes minutes and about 12 GB of memory.

Stand-alone, for what the plug-in cannot measure in a process that has TensorFlow and the Keras
model loaded: cold start (fresh process -> first embedding, imports included) and the peak memory
of a process that only serves:

    python benchmarks/inference_export.py cold-start --export W/export [--repeats 3]
    python benchmarks/inference_export.py quality --export W/export   # int8 vs float32 cosine
"""

import argparse
import hashlib
import json
import pathlib
import statistics
import subprocess
import sys
import textwrap
import time

import numpy as np

EXPORT_DIR = "export"
STAMP = "source.json"


def _source_stamp(options_path, weights_path):
    stat = pathlib.Path(weights_path).stat()
    digest = hashlib.sha256(pathlib.Path(options_path).read_bytes()).hexdigest()
    return {"options_sha256": digest, "weights_size": stat.st_size,
            "weights_mtime_ns": stat.st_mtime_ns}


def ensure_exports(options_path, weights_path, workdir, log=print):
    """`WORKDIR/export/` with savedmodel/, model.onnx, model.int8.onnx; written once."""
    from elmo_keras.export import export_model

    output = pathlib.Path(workdir) / EXPORT_DIR
    stamp = _source_stamp(options_path, weights_path)
    stamp_path = output / STAMP
    if stamp_path.is_file() and json.loads(stamp_path.read_text()) == stamp:
        return output
    log(f"exporting {options_path} to {output} (SavedModel, ONNX, int8 ONNX) ...")
    start = time.perf_counter()
    export_model(options_path, weights_path, output, formats="all", quantize=True,
                 overwrite=True)
    stamp_path.write_text(json.dumps(stamp))
    log(f"  export done in {time.perf_counter() - start:.0f} s")
    return output


def _savedmodel_mode(ctx):
    import tensorflow as tf

    output = ensure_exports(ctx.options_path, ctx.weights_path, ctx.workdir)
    signature = tf.saved_model.load(str(output / "savedmodel")).signatures["char_ids"]

    def run(char_ids):
        return [value.numpy() for value in signature(char_ids=tf.constant(char_ids)).values()]

    return run


def _onnx_factory(filename):
    def factory(ctx):
        import onnxruntime as ort

        output = ensure_exports(ctx.options_path, ctx.weights_path, ctx.workdir)
        session = ort.InferenceSession(str(output / filename),
                                       providers=["CPUExecutionProvider"])
        return lambda char_ids: session.run(None, {"char_ids": char_ids})

    return factory


def register_modes(register_mode):
    register_mode("savedmodel", _savedmodel_mode,
                  "reloaded SavedModel, `signatures['char_ids']` (tf.saved_model.load)")
    register_mode("onnx", _onnx_factory("model.onnx"),
                  "ONNX Runtime 1.31, CPU provider, float32 model.onnx (tf2onnx, opset 17)")
    register_mode("onnx_int8", _onnx_factory("model.int8.onnx"),
                  "ONNX Runtime, int8 dynamic quantization (quantize_dynamic, QInt8 weights)")


# --------------------------------------------------------------------------------------------
# Stand-alone: cold start and serving-process memory, int8 quality
# --------------------------------------------------------------------------------------------

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


def cold_start(export_dir, repeats=3, log=print):
    """Fresh process -> first embedding of one 17-token sentence; median over `repeats`."""
    export_dir = pathlib.Path(export_dir)
    scripts = {
        "onnx": _COLD_ONNX.format(model=str(export_dir / "model.onnx"), sentence=SENTENCE),
        "onnx_int8": _COLD_ONNX.format(model=str(export_dir / "model.int8.onnx"),
                                       sentence=SENTENCE),
        "savedmodel": _COLD_SAVEDMODEL.format(model=str(export_dir / "savedmodel"),
                                              text=" ".join(SENTENCE)),
    }
    results = {}
    for name, script in scripts.items():
        if not (export_dir / ("savedmodel" if name == "savedmodel" else
                              f"model{'.int8' if name == 'onnx_int8' else ''}.onnx")).exists():
            continue
        runs = []
        for _ in range(repeats):
            launched = time.perf_counter()
            proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script) + _REPORT],
                                  capture_output=True, text=True)
            wall = time.perf_counter() - launched
            line = [x for x in proc.stdout.splitlines() if x.startswith("COLD ")]
            if proc.returncode or not line:
                raise RuntimeError(f"{name} cold start failed: {proc.stderr[-2000:]}")
            report = json.loads(line[0][5:])
            report["process_wall_s"] = wall
            runs.append(report)
        results[name] = {
            "process_to_first_embedding_s": statistics.median(r["process_wall_s"] for r in runs),
            "in_process_to_first_embedding_s": statistics.median(r["first_s"] for r in runs),
            "model_load_s": statistics.median(r["load_s"] for r in runs),
            "peak_rss_mb": max(r["peak_rss_mb"] for r in runs),
            "imports_tensorflow": bool(runs[0]["heavy_modules"]),
        }
        log(f"{name}: {json.dumps(results[name])}")
    return results


def int8_quality(export_dir, sentences, batch_size=32, repeats=5, log=print):
    """Cosine similarity int8 vs float32 per real token (all layers) and the speed ratio."""
    from elmo_keras.runtime import OnnxEmbedder

    export_dir = pathlib.Path(export_dir)
    full = OnnxEmbedder(export_dir / "model.onnx", batch_size=batch_size)
    int8 = OnnxEmbedder(export_dir / "model.int8.onnx", batch_size=batch_size)
    a, b = full.embed(sentences), int8.embed(sentences)
    cosines = []
    for x, y in zip(a, b, strict=True):
        num = np.sum(x * y, axis=-1)
        den = np.linalg.norm(x, axis=-1) * np.linalg.norm(y, axis=-1)
        cosines.append((num / np.maximum(den, 1e-12)).reshape(-1))
    cos = np.concatenate(cosines)
    max_abs = max(float(np.abs(x - y).max()) for x, y in zip(a, b, strict=True) if x.size)
    times = {"float32": [], "int8": []}
    for _ in range(repeats):  # interleaved
        for name, embedder in (("float32", full), ("int8", int8)):
            start = time.perf_counter()
            embedder.embed(sentences)
            times[name].append(time.perf_counter() - start)
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


def _sentences(n, seed=0):
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
    from inference import make_workloads  # noqa: PLC0415  (the lead's workloads)

    workloads, _ = make_workloads(batches=(n,), natural=True, seed=seed)
    return [s for w in workloads for s in w.sentences]


def main(argv=None):
    parser = argparse.ArgumentParser(description="SavedModel / ONNX Runtime measurements.")
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
    if args.command == "cold-start":
        result = cold_start(args.export, args.repeats)
    else:
        result = int8_quality(args.export, _sentences(args.sentences), repeats=args.repeats)
    if args.json:
        pathlib.Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
