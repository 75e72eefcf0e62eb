#!/usr/bin/env python
"""Where ONNX Runtime loses to Keras (issue 10): each client alone, and the arena shrinkage.

Run from the repository root, after `benchmarks/inference.py --workdir W` wrote the full
configuration (`W/options.json`, `W/weights.hdf5`) and its export (`W/export/model.onnx`):

    python benchmarks/onnx_gap.py --workdir W

1. `alone`: the 64 x 20 workload of `inference.py` (same sentences), one client per fresh
   process (`keras`: `BiLMEmbedder`; `onnx`: `OnnxEmbedder` with its defaults), so that neither
   runtime's threads share the process with the other's, as they do in `inference.py`'s
   interleaved rounds. One warm-up call, then `--repeats` calls; medians.
2. `arena`: `OnnxEmbedder` with its CPU arena shrunk after every call
   (`shrink_arena_every=1`), every 8th (the default) and never (`0`), in one process,
   alternating, each `embed`-ing the same `--sentences` natural WikiText-2 sentences (batches
   of 32, at most 4,096 padded tokens); medians of `--rounds`.
3. `memory`: the same three settings, each in a fresh process: 48 `embed_batch` calls of
   random shapes (1-16 sentences of 5-79 tokens, seeded), the peak resident set (`VmHWM`,
   reset before each window) over calls 1-16, 17-32 and 33-48, and the resident set after the
   last call.
"""

import argparse
import json
import pathlib
import subprocess
import sys
import time

import common
import numpy as np

CHILD = """
import json, sys, time
sys.path.insert(0, sys.argv[1])
import common
import numpy as np
workdir, mode, repeats = sys.argv[2], sys.argv[3], int(sys.argv[4])
(workload,), _ = common.make_workloads((64,), natural=False)
if mode == "keras":
    from elmo_keras.models import BiLMEmbedder
    from elmo_keras.models import BiLM
    embedder = BiLMEmbedder(BiLM.from_bilm_tf(f"{workdir}/options.json", f"{workdir}/weights.hdf5"))
else:
    from elmo_keras.runtime import OnnxEmbedder
    embedder = OnnxEmbedder(f"{workdir}/export/model.onnx")
embedder.embed_batch(workload.sentences)
times = []
for _ in range(repeats):
    start = time.perf_counter()
    embedder.embed_batch(workload.sentences)
    times.append(time.perf_counter() - start)
tokens = sum(len(s) for s in workload.sentences)
environment = common.environment(mode == "keras")
print(json.dumps({"tokens": tokens, "times": times, "environment": environment}))
"""


MEMORY_CHILD = """
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import common
from elmo_keras.runtime import OnnxEmbedder
words = [token for sentence in common.natural_sentences(2000)[0] for token in sentence]
rng = np.random.default_rng(0)
embedder = OnnxEmbedder(sys.argv[2], shrink_arena_every=int(sys.argv[3]))
peaks = []
for window in range(3):
    common.reset_peak_rss()
    for _ in range(16):
        b, t = int(rng.integers(1, 17)), int(rng.integers(5, 80))
        start = int(rng.integers(0, len(words) - b * t))
        embedder.embed_batch([words[start + i * t : start + (i + 1) * t] for i in range(b)])
    peaks.append(common.peak_rss_mb())
common.reset_peak_rss()  # the high-water mark restarts at the resident set after call 48
print(json.dumps({"peaks": peaks, "after": common.peak_rss_mb()}))
"""


def run_child(code, *args):
    """Runs `code` in a fresh interpreter (benchmarks/ importable) and returns the JSON it
    prints last."""
    here = str(pathlib.Path(__file__).parent)
    command = [sys.executable, "-c", code, here, *map(str, args)]
    result = subprocess.run(command, capture_output=True, text=True, check=True)
    return json.loads(result.stdout.strip().splitlines()[-1])


def memory(workdir, every):
    return run_child(MEMORY_CHILD, pathlib.Path(workdir) / "export" / "model.onnx", every)


def alone(workdir, mode, repeats):
    return run_child(CHILD, workdir, mode, repeats)


def arena(workdir, n_sentences, rounds):
    from elmo_keras.runtime import OnnxEmbedder

    sentences, _ = common.natural_sentences(n_sentences)
    tokens = sum(len(s) for s in sentences)
    path = pathlib.Path(workdir) / "export" / "model.onnx"
    sides = {
        f"shrink_arena_every={every}": OnnxEmbedder(
            path, batch_size=32, max_tokens=4096, shrink_arena_every=every
        )
        for every in (1, 8, 0)
    }
    rates = {name: [] for name in sides}
    for round_index in range(rounds):
        for name in common.rotated(list(sides), round_index):
            start = time.perf_counter()
            sides[name].embed(sentences)
            rates[name].append(tokens / (time.perf_counter() - start))
    return tokens, rates


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--workdir", type=pathlib.Path, required=True)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--sentences", type=int, default=240)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args(argv)

    runs = {mode: alone(args.workdir, mode, args.repeats) for mode in ("keras", "onnx")}
    print(f"64 x 20, one client per fresh process, median of {args.repeats} calls\n")
    print(common.table_header(["client", "tokens/s", "calls (s)", "ratio to keras"]))
    keras_rate = runs["keras"]["tokens"] / float(np.median(runs["keras"]["times"]))
    for mode, run in runs.items():
        rate = run["tokens"] / float(np.median(run["times"]))
        calls = " ".join(f"{t:.2f}" for t in run["times"])
        print(common.table_row([mode, f"{rate:.0f}", calls, f"{rate / keras_rate:.2f}"]))

    tokens, rates = arena(args.workdir, args.sentences, args.rounds)
    print(f"\nOnnxEmbedder.embed of {args.sentences} natural sentences ({tokens} tokens), one")
    print(f"process, alternating, median of {args.rounds} passes\n")
    print(common.table_header(["arena", "tokens/s (median)", "passes"]))
    for name, values in rates.items():
        passes = " ".join(f"{v:.0f}" for v in values)
        median = float(np.median(values))
        print(common.table_row([name, f"{median:.0f}", passes]))

    print("\nOnnxEmbedder, 48 calls of random shapes, one fresh process per setting\n")
    columns = ["arena", "peak RSS calls 1-16", "17-32", "33-48", "RSS after call 48 (MB)"]
    print(common.table_header(columns))
    for every in (1, 8, 0):
        measured = memory(args.workdir, every)
        windows = [f"{peak:.0f}" for peak in measured["peaks"]]
        after = f"{measured['after']:.0f}"
        print(common.table_row([f"shrink_arena_every={every}", *windows, after]))
    print()
    print(common.machine_line(runs["keras"]["environment"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
