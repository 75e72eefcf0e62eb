"""JAX against TensorFlow: `BiLMEmbedder` tokens/s and `elmo-keras embed` (issue 43, point 3).

    python benchmarks/jax_embed.py [--rounds 3] [--embed-lines 500] [--embed-rounds 1]
        [--json benchmarks/results/jax_embed.json]

`BiLMEmbedder` at the published size (2 x 4096 cells, projection 512, 2048 filters) with the
same random weights (N(0, 1) x 0.01, seeded) on both backends, one worker process per backend,
both alive for the whole run; the rounds interleave them (order rotating, a pause between
calls), so both see the same machine: compare ratios. Each worker runs every workload twice
first (JAX compiles each shape, TensorFlow traces). Workloads: 32 and 64 sentences of 20
tokens and one padded batch of 32 natural WikiText-2 test sentences (11-75 tokens), each one
`embed_batch` call, and 256 natural sentences in batches of 32 (`embed`, sorted by length).

Then `elmo-keras embed --preset mini_en` of `--embed-lines` WikiText-2 lines, each run a fresh
process (wall time: imports, loading, compiling, embedding, writing): per round TensorFlow,
JAX with an empty compilation cache (first), TensorFlow, JAX again (second: the persistent
cache of the first run, `elmo_keras.compilation_cache`, in a temporary folder). The outputs
are compared at the end (max |diff|).
TensorFlow runs with `TF_ENABLE_ONEDNN_OPTS=1` (../shared/PERFORMANCE.md, point 1).
"""

import argparse
import json
import os
import pathlib
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import common
import numpy as np
import torch_speed

BACKENDS = ("tensorflow", "jax")
NATURAL_RUN = "natural256"  # 256 natural sentences, `embed` in batches of 32


def _worker(backend, workdir):
    """A worker: builds the biLM, then answers one workload name per stdin line with its
    seconds; `outputs` writes the 32 x 20 and natural outputs."""
    os.environ["KERAS_BACKEND"] = backend
    import keras

    from elmo_keras.models import BiLM, BiLMEmbedder

    bilm = BiLM()
    bilm.build()
    rng = np.random.default_rng(0)
    arrays = {
        name: (torch_speed.WEIGHT_SCALE * rng.standard_normal(shape)).astype(np.float32)
        for name, shape in sorted(bilm.weight_shapes().items())
    }
    bilm.set_weight_arrays(arrays)
    embedder, by_32 = BiLMEmbedder(bilm, batch_size=64), BiLMEmbedder(bilm, batch_size=32)
    workloads = json.loads((workdir / "workloads.json").read_text())
    info = {"keras": keras.__version__}
    if backend == "jax":
        import jax

        info.update(jax=jax.__version__, devices=str(jax.devices()))
    else:
        import tensorflow as tf

        info.update(tensorflow=tf.__version__)
    print(json.dumps({"ready": True, **info}), flush=True)
    for line in sys.stdin:
        command = line.strip()
        if command == "memory":
            print(json.dumps(_memory(embedder, workloads, backend)), flush=True)
            continue
        if command == "outputs":
            vectors = embedder.embed_batch(workloads["b32x20"])
            vectors += embedder.embed_batch(workloads["natural32"])
            np.savez(workdir / f"outputs_{backend}.npz", *vectors)
            print(json.dumps({"written": True}), flush=True)
            continue
        start = time.perf_counter()
        if command == NATURAL_RUN:
            by_32.embed(workloads[command])
        else:
            embedder.embed_batch(workloads[command])
        print(json.dumps({"seconds": time.perf_counter() - start}), flush=True)


def _memory(embedder, workloads, backend):
    """Per single-call workload: minor page faults of one call (memory the call touched
    afresh) and, on JAX, the compiled program's scratch (`memory_analysis`), in MB."""
    import resource  # noqa: PLC0415  (POSIX; the workers run on Linux)

    from elmo_keras.models.bilm_embedder import token_rows  # noqa: PLC0415

    out = {}
    for name, sentences in workloads.items():
        if name == NATURAL_RUN:
            continue
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        embedder.embed_batch(sentences)
        out[name] = {"faults": resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before}
        if backend == "jax":
            ids, index = token_rows(embedder.bilm, sentences)
            ids, index = embedder._bucketed(ids.astype(np.int32), index.astype(np.int32))
            weights = embedder._jax_weights()
            kernels = embedder._step_kernels(weights[0])
            program = embedder._jitted.lower(*weights, kernels, ids, index)
            scratch = program.compile().memory_analysis().temp_size_in_bytes
            out[name]["scratch_mb"] = round(scratch / 1e6)
    return out


class Worker(torch_speed.Worker):
    def __init__(self, backend, workdir):
        env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2"}
        env.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
        env["ELMO_KERAS_JAX_CACHE"] = "off"  # the in-process rows compile in memory
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--_worker", backend, str(workdir)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        self.info = self.ask(None)


def _timed_rounds(workers, workloads, rounds):
    for worker in workers.values():
        for name in workloads:
            worker.ask(name)
            worker.ask(name)
    seconds = {(b, name): [] for b in BACKENDS for name in workloads}
    for r in range(rounds):
        for name in workloads:
            for backend in common.rotated(BACKENDS, r):
                time.sleep(torch_speed.PAUSE)
                seconds[(backend, name)].append(workers[backend].ask(name)["seconds"])
        print(f"round {r + 1}/{rounds} done", flush=True)
    return seconds


def _embed_rounds(workdir, rounds):
    wall = {"tensorflow": [], "jax first": [], "jax second": []}
    for r in range(rounds):
        shutil.rmtree(workdir / "jax-cache", ignore_errors=True)
        for kind in ("tensorflow", "jax first", "tensorflow", "jax second"):
            backend = kind.split()[0]
            cache = {"ELMO_KERAS_JAX_CACHE": str(workdir / "jax-cache")}
            wall[kind].append(
                torch_speed._embed_cli(backend, workdir, ("--preset", "mini_en"), cache)
            )
            print(f"embed round {r + 1}, {kind}: {wall[kind][-1]:.1f} s", flush=True)
    return wall


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--embed-lines", type=int, default=500)
    parser.add_argument("--embed-rounds", type=int, default=1)
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--_worker", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args._worker:
        return _worker(args._worker[0], pathlib.Path(args._worker[1]))
    env = common.environment(with_tensorflow=False)
    env["load_average_at_start"] = os.getloadavg()
    print(common.machine_line(env), f"load average {env['load_average_at_start']}", flush=True)
    fixed, source = common.make_workloads(batches=(32, 64), natural=True)
    natural, _ = common.natural_sentences(256)
    labels = {w.name: w.label for w in fixed}
    labels[NATURAL_RUN] = "256 natural, batches of 32"
    workloads = {w.name: w.sentences for w in fixed} | {NATURAL_RUN: natural}
    tokens = {name: sum(len(s) for s in sentences) for name, sentences in workloads.items()}
    lines, lines_source = common.text_lines(args.embed_lines)
    with tempfile.TemporaryDirectory() as tmp:
        workdir = pathlib.Path(tmp)
        (workdir / "workloads.json").write_text(json.dumps(workloads))
        (workdir / "lines.txt").write_text("".join(" ".join(s) + "\n" for s in lines))
        workers = {backend: Worker(backend, workdir) for backend in BACKENDS}
        for backend, worker in workers.items():
            print(f"{backend}: {worker.info}", flush=True)
        seconds = _timed_rounds(workers, workloads, args.rounds)
        memory = {backend: worker.ask("memory") for backend, worker in workers.items()}
        for worker in workers.values():
            worker.ask("outputs")
            worker.close()
        out = [np.load(workdir / f"outputs_{b}.npz") for b in BACKENDS]
        agreement = max(float(np.abs(out[0][k] - out[1][k]).max()) for k in out[0])
        wall = _embed_rounds(workdir, args.embed_rounds)
        embed_agreement = None  # `--embed-rounds 0`: no `embed` run to compare
        if args.embed_rounds:
            embed_agreement = torch_speed._max_diff_hdf5(
                workdir / "tensorflow.hdf5", workdir / "jax.hdf5"
            )
    env["load_average_at_end"] = os.getloadavg()
    rows, results = [], {"environment": env, "text": source, "embed_text": lines_source}
    header = common.table_header(
        ["workload", "TensorFlow tokens/s", "JAX tokens/s", "JAX / TensorFlow"]
    )
    for name in workloads:
        rate = {b: tokens[name] / statistics.median(seconds[(b, name)]) for b in BACKENDS}
        results[name] = {**rate, "seconds": {b: seconds[(b, name)] for b in BACKENDS}}
        ratio = rate["jax"] / rate["tensorflow"]
        rows.append(
            [labels[name], f"{rate['tensorflow']:.0f}", f"{rate['jax']:.0f}", f"{ratio:.2f}"]
        )
    median = {kind: statistics.median(values) for kind, values in wall.items() if values}
    results["embed"] = {"lines": len(lines), "seconds": wall, "median": median}
    for kind in ("jax first", "jax second") if args.embed_rounds else ():
        rows.append(
            [
                f"`embed --preset mini_en`, {len(lines)} lines, fresh process, JAX {kind[4:]}",
                f"{median['tensorflow']:.1f} s",
                f"{median[kind]:.1f} s",
                f"{median[kind] / median['tensorflow']:.2f} (time)",
            ]
        )
    results["agreement"] = {"embedder": agreement, "embed": embed_agreement}
    results["memory"] = memory
    table = "\n".join([header, *(common.table_row(r) for r in rows)])
    table += (
        f"\n\nMedians of {args.rounds} interleaved rounds ({args.embed_rounds} for `embed`); "
        f"max |TensorFlow - JAX|: {agreement:.1e} (32 x 20 and 32 natural), "
        + (f"{embed_agreement:.1e} (embed)." if args.embed_rounds else "no `embed` run.")
        + "\nPer call, minor page faults (memory touched afresh) TensorFlow / JAX, and the JAX "
        "program's scratch: "
        + "; ".join(
            f"{labels[name]}: {memory['tensorflow'][name]['faults']:,} / "
            f"{memory['jax'][name]['faults']:,}, {memory['jax'][name]['scratch_mb']} MB"
            for name in memory["jax"]
        )
        + f".\n{common.machine_line(env)}; load average "
        f"{env['load_average_at_start']} at the start, {env['load_average_at_end']} at the end; "
        f"{workers['jax'].info}"
    )
    common.publish(table, results, args.json)


if __name__ == "__main__":
    main()
