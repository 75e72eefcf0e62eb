"""The fresh processes of `inference.py`: one mode each, for the isolated timing rounds and
for peak memory (and the long `embed` workloads' time). A worker is `inference.py` run with
`--_timing-worker` or `--_memory-worker`; it prints one JSON line after its marker."""

import json
import pathlib
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import common
import inference_modes as modes_lib

SCRIPT = pathlib.Path(__file__).resolve().with_name("inference.py")


def time_isolated(ctx, settings, workloads, log):
    """`settings.repeats` rounds; in each, every mode (order rotating) in a fresh process of
    its own, which warms up and then times each workload `settings.calls` times, so that no
    runtime's threads share the process (or a spinning thread pool) with another's; the
    matmul runs here after each round, with no worker running."""
    times = {(m, w.name): [] for m in settings.modes for w in workloads}
    common.matmul_seconds()  # its warm-up
    matmul, failed = [], {}
    log(f"timing {settings.repeats} round(s), each mode in a fresh process")
    for r in range(settings.repeats):
        for m in common.rotated(tuple(mode for mode in settings.modes if mode not in failed), r):
            result = run_worker("--_timing-worker", "TIMING_RESULT", m, ctx, settings)
            if "error" in result:
                failed[m] = result["error"]
                log(f"mode {m} left out: {failed[m]}")
                continue
            for w in workloads:
                times[(m, w.name)].extend(result["seconds"][w.name])
        matmul.append(common.matmul_seconds())
        log(f"  round {r + 1}/{settings.repeats} done")
    while len(matmul) < 3:
        matmul.append(common.matmul_seconds())
    return times, matmul, failed


def _build_alone(args):
    """A worker's one mode, built from the files the main process wrote (exports reused)."""
    if args.mode not in ("onnx", "onnx_int8"):
        modes_lib.set_threads(args.intra_op, args.inter_op)
    paths = [pathlib.Path(p) for p in (args.options, args.weights, args.workdir)]
    ctx = modes_lib.Context(*paths, args.config, reuse_export=True)
    return modes_lib.MODES[args.mode].factory(ctx)


def memory_worker(args):
    """Runs in a fresh process: build one mode, then each workload (short ones first)."""
    embedder = _build_alone(args)
    result = {"mode": args.mode, "rss_after_load_mb": common.peak_rss_mb(), "peak_reset": True}
    result.update(peak_rss_mb={}, seconds={})
    workloads, _ = modes_lib.make_workloads(args.seed, args.embed_lines)
    for w in workloads:  # smallest first: without clear_refs the peak is cumulative
        result["peak_reset"] &= common.reset_peak_rss()
        for _ in range(0 if w.long else max(1, args.warmup)):
            w.run(embedder)
        result["seconds"][w.name] = common.timed(w.run, embedder)[1]
        result["peak_rss_mb"][w.name] = common.peak_rss_mb()
    print("MEMORY_RESULT " + json.dumps(result), flush=True)


def timing_worker(args):
    """Runs in a fresh process: build one mode, then per one-call workload `--warmup` calls
    and `--calls` timed calls (all of their times are reported)."""
    embedder = _build_alone(args)
    workloads, _ = modes_lib.make_workloads(args.seed, 0)
    seconds = {}
    for w in workloads:
        if w.long:
            continue
        for _ in range(max(1, args.warmup)):
            w.run(embedder)
        seconds[w.name] = [common.timed(w.run, embedder)[1] for _ in range(max(1, args.calls))]
    print("TIMING_RESULT " + json.dumps({"mode": args.mode, "seconds": seconds}), flush=True)


def run_worker(flag, marker, mode, ctx, settings):
    """Runs this script as a worker for `mode` and returns the JSON after `marker`."""
    command = [sys.executable, str(SCRIPT), flag]
    command += ["--mode", mode, "--config", settings.config, "--seed", str(settings.seed)]
    command += ["--warmup", str(settings.warmup), "--calls", str(settings.calls)]
    command += ["--options", str(ctx.options_path), "--weights", str(ctx.weights_path)]
    command += ["--workdir", str(ctx.workdir), "--embed-lines", str(settings.embed_lines)]
    for option, value in (("--intra-op", settings.intra_op), ("--inter-op", settings.inter_op)):
        command += [] if value is None else [option, str(value)]
    proc = subprocess.run(command, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith(marker + " "):
            return json.loads(line[len(marker) + 1 :])
    tail = "\n".join((proc.stderr or "").strip().splitlines()[-5:])
    return {"mode": mode, "error": f"worker exited {proc.returncode}: {tail}"}


def measure_memory(ctx, settings, log):
    jobs = max(1, min(settings.memory_jobs, len(settings.modes)))
    log(f"memory: a fresh process per mode ({jobs} at a time)")
    results = {}
    with ThreadPoolExecutor(jobs) as pool:

        def run(mode):
            return run_worker("--_memory-worker", "MEMORY_RESULT", mode, ctx, settings)

        for result in pool.map(run, settings.modes):
            results[result["mode"]] = result
            log(f"  {result['mode']}: {result.get('error') or 'done'}")
    return results
