"""PyTorch against TensorFlow: `BiLMEmbedder` tokens/s and `elmo-keras embed` (issue 40).

    python benchmarks/torch_speed.py [--rounds 5] [--embed-lines 500] [--embed-rounds 2]
        [--workloads b32x20,b64x20,natural32]

A cheap rerun of the embedder's rows alone: `--rounds 3 --embed-rounds 0`.

The published size (2 x 4096 cells, projection 512, 2048 filters) with the same random
weights (N(0, 1) x 0.01, seeded) on both backends. One worker process per backend, both alive
for the whole run; the timing rounds interleave them (order rotating, a pause between calls),
so the two backends see the same machine: compare ratios, not absolute numbers, on a shared
CPU. Each worker warms up every workload twice first (TensorFlow traces its `tf.function`,
PyTorch packs its weights for oneDNN). Workloads: 32 and 64 sentences of 20 tokens and one
padded batch of 32 natural sentences (11-75 tokens) from WikiText-2 test, each one
`embed_batch` call. Then `elmo-keras embed` of `--embed-lines` WikiText-2 lines, each run a
fresh process (wall time: imports, loading the weights files, embedding, writing), backends
alternating. The two backends' outputs are compared at the end (max |diff|).
TensorFlow runs with `TF_ENABLE_ONEDNN_OPTS=1` (../shared/PERFORMANCE.md, point 1); PyTorch with
its default threads (one per usable core).
"""

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

import common
import numpy as np

BACKENDS = ("tensorflow", "torch")
WEIGHT_SCALE = 0.01
PAUSE = 0.5  # seconds between calls: the other worker's thread pool goes back to sleep


def _worker(backend, workdir):
    """A worker: builds the biLM, then answers one workload name per stdin line with its
    seconds (`embed_batch`); `save` writes the weights files, `outputs` the 32 x 20 outputs."""
    os.environ["KERAS_BACKEND"] = backend
    import keras

    from elmo_keras.models import BiLM, BiLMEmbedder
    from elmo_keras.options import write_options
    from elmo_keras.weights import save_weights

    bilm = BiLM()
    bilm.build()
    rng = np.random.default_rng(0)
    arrays = {
        name: (WEIGHT_SCALE * rng.standard_normal(shape)).astype(np.float32)
        for name, shape in sorted(bilm.weight_shapes().items())
    }
    bilm.set_weight_arrays(arrays)
    embedder = BiLMEmbedder(bilm, batch_size=64)
    workloads = json.loads((workdir / "workloads.json").read_text())
    threads = {"keras": keras.__version__}
    if backend == "torch":
        import torch

        threads.update(torch=torch.__version__, threads=torch.get_num_threads())
    else:
        import tensorflow as tf

        threads.update(tensorflow=tf.__version__)
    print(json.dumps({"ready": True, **threads}), flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "save":
            write_options(bilm.to_options(), workdir / "options.json")
            save_weights(bilm, workdir / "weights.hdf5")
            print(json.dumps({"saved": True}), flush=True)
        elif command == "outputs":
            vectors = embedder.embed_batch(workloads["b32x20"])
            np.savez(workdir / f"outputs_{backend}.npz", *vectors)
            print(json.dumps({"written": True}), flush=True)
        else:
            start = time.perf_counter()
            embedder.embed_batch(workloads[command])
            print(json.dumps({"seconds": time.perf_counter() - start}), flush=True)


class Worker:
    def __init__(self, backend, workdir):
        env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2"}
        env.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--_worker", backend, str(workdir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.info = self.ask(None)

    def ask(self, command):
        if command is not None:
            self.process.stdin.write(command + "\n")
            self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"worker exited with {self.process.wait()}")
        return json.loads(line)

    def close(self):
        self.process.stdin.close()
        self.process.wait()


def _embed_cli(backend, workdir, model=None, env=None):
    """`elmo-keras embed` of `workdir/lines.txt` in a fresh process -> wall seconds; `model`:
    the model flags (default: the workdir's options.json and weights.hdf5), `env`: more
    environment variables."""
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})}
    if model is None:
        model = ("--options", str(workdir / "options.json"))
        model += ("--weights", str(workdir / "weights.hdf5"))
    command = [
        *(sys.executable, "-c", "import sys; from elmo_keras.cli import main; sys.exit(main())"),
        *("embed", "--backend", backend, *model),
        *("--input", str(workdir / "lines.txt"), "--output", str(workdir / f"{backend}.hdf5")),
        "--overwrite",
    ]
    start = time.perf_counter()
    subprocess.run(command, check=True, env=env, cwd=common.REPO)
    seconds = time.perf_counter() - start
    print(f"embed on {backend}: {seconds:.1f} s", flush=True)
    return seconds


def _max_diff_hdf5(a, b):
    import h5py

    with h5py.File(a, "r") as fa, h5py.File(b, "r") as fb:
        return max(float(np.abs(fa[k][()] - fb[k][()]).max(initial=0.0)) for k in fa)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--embed-lines", type=int, default=500)
    parser.add_argument("--embed-rounds", type=int, default=2, help="0: no `embed` rows")
    parser.add_argument(
        "--workloads", default="b32x20,b64x20,natural32", help="the embedder's rows to time"
    )
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--_worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._worker:
        return _worker(args._worker[0], pathlib.Path(args._worker[1]))
    env = common.environment(with_tensorflow=False)
    print(common.machine_line(env), flush=True)
    workloads, source = common.make_workloads(batches=(32, 64), natural=True)
    names = args.workloads.split(",")
    unknown = sorted(set(names) - {w.name for w in workloads})
    if unknown:
        parser.error(f"--workloads: expected names among b32x20,b64x20,natural32, got {unknown}")
    fixed = [w for w in workloads if w.name in names]
    lines, lines_source = common.text_lines(args.embed_lines)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = pathlib.Path(tmp)
        all_sentences = {w.name: w.sentences for w in workloads}
        (workdir / "workloads.json").write_text(json.dumps(all_sentences))
        (workdir / "lines.txt").write_text("".join(" ".join(s) + "\n" for s in lines))
        workers = {backend: Worker(backend, workdir) for backend in BACKENDS}
        for backend, worker in workers.items():
            print(f"{backend}: {worker.info}", flush=True)
        for worker in workers.values():
            for w in fixed:
                worker.ask(w.name)
                worker.ask(w.name)
        seconds = {(b, w.name): [] for b in BACKENDS for w in fixed}
        for r in range(args.rounds):
            for w in fixed:
                for backend in common.rotated(BACKENDS, r):
                    time.sleep(PAUSE)
                    seconds[(backend, w.name)].append(workers[backend].ask(w.name)["seconds"])
            print(f"round {r + 1}/{args.rounds} done", flush=True)
        for w in fixed:  # the embedder's table, before the long `embed` runs
            rate = {b: w.tokens / statistics.median(seconds[(b, w.name)]) for b in BACKENDS}
            print(f"{w.label}: " + ", ".join(f"{b} {v:.0f} tokens/s" for b, v in rate.items()))
        workers["tensorflow"].ask("save")
        for worker in workers.values():
            worker.ask("outputs")
            worker.close()
        out = [np.load(workdir / f"outputs_{b}.npz") for b in BACKENDS]
        agreement = max(float(np.abs(out[0][k] - out[1][k]).max()) for k in out[0])
        embed = {b: [] for b in BACKENDS}
        for r in range(args.embed_rounds):
            for backend in common.rotated(BACKENDS, r):
                embed[backend].append(_embed_cli(backend, workdir))
        embed_agreement = None
        if args.embed_rounds:
            embed_agreement = _max_diff_hdf5(workdir / "tensorflow.hdf5", workdir / "torch.hdf5")
    rows, results = [], {"environment": env, "text": source, "embed_text": lines_source}
    header = common.table_header(
        ["workload", "TensorFlow tokens/s", "PyTorch tokens/s", "PyTorch / TensorFlow"]
    )
    for w in fixed:
        rate = {b: w.tokens / statistics.median(seconds[(b, w.name)]) for b in BACKENDS}
        results[w.name] = {**rate, "seconds": {b: seconds[(b, w.name)] for b in BACKENDS}}
        ratio = rate["torch"] / rate["tensorflow"]
        rows.append([w.label, f"{rate['tensorflow']:.0f}", f"{rate['torch']:.0f}", f"{ratio:.2f}"])
    embed_note = ""
    if args.embed_rounds:
        wall = {b: statistics.median(embed[b]) for b in BACKENDS}
        results["embed"] = {"lines": len(lines), "seconds": embed, "median": wall}
        rows.append(
            [
                f"`elmo-keras embed`, {len(lines)} lines (wall s, fresh process)",
                f"{wall['tensorflow']:.1f} s",
                f"{wall['torch']:.1f} s",
                f"{wall['tensorflow'] / wall['torch']:.2f} (speed)",
            ]
        )
        embed_note = f", {embed_agreement:.1e} (embed)"
    results["agreement"] = {"b32x20": agreement, "embed": embed_agreement}
    table = "\n".join([header, *(common.table_row(r) for r in rows)])
    table += (
        f"\n\nMedians of {args.rounds} interleaved rounds ({args.embed_rounds} for `embed`); "
        f"max |TensorFlow - PyTorch|: {agreement:.1e} (32 x 20){embed_note}."
        f"\n{common.machine_line(env)}; {workers['torch'].info}"
    )
    common.publish(table, results, args.json)


if __name__ == "__main__":
    main()
