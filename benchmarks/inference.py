#!/usr/bin/env python
"""Inference speed and peak memory of the biLM: eager, `tf.function`, XLA and exported models.

Run from the repository root:

    python benchmarks/inference.py                          # full published configuration
    python benchmarks/inference.py --config tiny --repeats 1 # smoke run (seconds)
    python benchmarks/inference.py --modes function,xla --batches 32 --json results.json
    python benchmarks/inference.py --modes function,savedmodel,onnx,onnx_int8 --workdir W

What it does:
1. Builds a `BiLM` with random weights (the full published configuration, REFERENCE.md section
   2, or a tiny one), writes it in the published layout (`options.json` + hdf5, through
   `elmo_keras.weights`) into a temporary folder and loads it back with `load_bilm`, so the
   benchmark runs the real loading path.
2. Makes the workloads (`common.make_workloads`): batches of 1, 32 and 64 sentences of exactly
   20 tokens, and one "natural" batch of 32 sentences of 5-60 tokens. Tokens are real text
   (WikiText-2 test from `../shared/data` when present, else a seeded Zipf draw over a fixed
   word list), converted to character ids before timing (conversion is not timed).
3. Timing, in this process: every (mode, workload) is called `--warmup` times first (tracing,
   XLA compilation, oneDNN primitive creation: excluded), then `--repeats` rounds in which
   each workload runs once in every mode, the mode order rotating each round (interleaved, so
   the noise of a shared machine hits every mode alike). Reported: the median.
   tokens/s counts real input tokens (no `<S>`/`</S>`, no padding); a call is timed until its
   `activations` are a NumPy array.
4. Peak memory (`--memory subprocess`, the default for the full config): one fresh process
   per mode (started after the timing, so it does not disturb it) loads the same files with
   `load_bilm`; then, for each workload, it resets the kernel's resident-set high-water mark
   (`echo 5 > /proc/self/clear_refs`), makes one warm-up call (tracing / XLA compilation
   included) and one timed call, and reads `VmHWM` from `/proc/self/status`. That is the peak
   resident set of the whole process during that workload: weights, TF runtime, allocator
   caches, compiled code included, and no memory of another mode or workload. (Not
   `ru_maxrss`: Linux carries it over from the forking parent across `exec`, so a child of a
   large process reports at least the parent's size.) The peak while loading (before any
   call; it can exceed a workload's peak, as loading holds the file's arrays and the random
   initial weights at once) is reported too. Where `clear_refs` cannot be written, the
   high-water mark is cumulative and the workloads run in increasing size, so it is still an
   upper bound.
   The tiny config defaults to `--memory none` to stay a seconds-long smoke run.

The modes (eager, function, xla, savedmodel, onnx, onnx_int8) are listed in
`benchmarks/inference_modes.py`. `run_benchmark(Settings(...))` is the programmatic entry
point; it returns the result dict that `--json` writes. The table ends with the machine line
(CPU, its SIMD flags, TensorFlow, threads, oneDNN).
"""

import argparse
import dataclasses
import json
import pathlib
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor

import common
import inference_modes as modes_lib
import inference_report as report

common.prefer_onednn()

DEFAULT_MODES = ("eager", "function", "xla")


@dataclasses.dataclass
class Settings:
    """One benchmark run. `memory`: "subprocess" (a fresh process per mode) or "none".
    `workdir`: where the model files go (kept, and reused by a later run with the same config);
    `None` for a temporary folder deleted at the end."""

    modes: tuple = DEFAULT_MODES
    batches: tuple = (1, 32, 64)
    config: str = "full"
    repeats: int = 5
    warmup: int = 1
    natural: bool = True
    memory: str = "subprocess"
    memory_jobs: int = 1
    workdir: str | None = None
    seed: int = 0
    intra_op: int | None = None
    inter_op: int | None = None

    def validate(self):
        if self.config not in modes_lib.CONFIGS:
            raise ValueError(
                f"`config` must be one of {sorted(modes_lib.CONFIGS)}. "
                f"Received: config={self.config!r}"
            )
        if self.memory not in ("subprocess", "none"):
            raise ValueError(
                f"`memory` must be 'subprocess' or 'none'. Received: memory={self.memory!r}"
            )
        unknown = [m for m in self.modes if m not in modes_lib.MODES]
        if unknown:
            raise ValueError(
                f"`modes` must be among {sorted(modes_lib.MODES)}. "
                f"Received: modes={','.join(self.modes)}"
            )


def parse_batches(text):
    """`"1,32"` or a sequence -> `(1, 32)`."""
    if isinstance(text, list | tuple):
        return tuple(int(b) for b in text)
    return tuple(int(b) for b in str(text).split(",") if b.strip())


# --------------------------------------------------------------------------------------------
# Timing, in this process
# --------------------------------------------------------------------------------------------


def _time_modes(fns, workloads, settings, log):
    """Warm-up calls, then interleaved rounds; `(samples, warm-up seconds)` per (mode, name)."""
    warm_s = {}
    for w in workloads:
        for m, fn in fns.items():
            start = time.perf_counter()
            for _ in range(settings.warmup):
                modes_lib.run_once(fn, w.char_ids)
            warm_s[(m, w.name)] = time.perf_counter() - start
    log(
        f"warm-up done ({settings.warmup} call(s) per mode and workload, "
        f"{sum(warm_s.values()):.1f} s); timing {settings.repeats} interleaved rounds"
    )
    times = {(m, w.name): [] for m in fns for w in workloads}
    for r in range(settings.repeats):
        for w in workloads:
            for m in common.rotated(tuple(fns), r):
                _, seconds = common.timed(modes_lib.run_once, fns[m], w.char_ids)
                times[(m, w.name)].append(seconds)
        log(f"  round {r + 1}/{settings.repeats} done")
    return times, warm_s


# --------------------------------------------------------------------------------------------
# Memory: one fresh process per mode
# --------------------------------------------------------------------------------------------


def _memory_worker(args):
    """Runs in a fresh process: load, then per workload (ascending) a warm and a timed call."""
    modes_lib.set_threads(args.intra_op, args.inter_op)
    bilm = modes_lib.load(args.options, args.weights)
    after_load = common.peak_rss_mb()
    paths = [pathlib.Path(p) for p in (args.options, args.weights, args.workdir)]
    fn = modes_lib.MODES[args.mode].factory(modes_lib.Context(bilm, *paths, args.config))
    workloads, _ = common.make_workloads(
        parse_batches(args.batches), not args.no_natural, args.seed
    )
    result = {
        "mode": args.mode,
        "rss_after_load_mb": after_load,
        "peak_rss_mb": {},
        "single_call_s": {},
        "peak_reset": True,
    }
    for w in sorted(workloads, key=lambda w: w.positions):
        result["peak_reset"] &= common.reset_peak_rss()
        modes_lib.run_once(fn, w.char_ids)
        _, result["single_call_s"][w.name] = common.timed(modes_lib.run_once, fn, w.char_ids)
        result["peak_rss_mb"][w.name] = common.peak_rss_mb()
    print("MEMORY_RESULT " + json.dumps(result), flush=True)


def _run_memory_worker(mode, files, settings):
    command = [sys.executable, str(pathlib.Path(__file__).resolve()), "--_memory-worker"]
    command += ["--mode", mode, "--config", settings.config, "--seed", str(settings.seed)]
    command += ["--options", str(files[0]), "--weights", str(files[1]), "--workdir", str(files[2])]
    command += ["--batches", ",".join(map(str, settings.batches))]
    command += [] if settings.natural else ["--no-natural"]
    for flag, value in (("--intra-op", settings.intra_op), ("--inter-op", settings.inter_op)):
        command += [] if value is None else [flag, str(value)]
    proc = subprocess.run(command, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("MEMORY_RESULT "):
            return json.loads(line[len("MEMORY_RESULT ") :])
    tail = "\n".join((proc.stderr or "").strip().splitlines()[-5:])
    return {"mode": mode, "error": f"worker exited {proc.returncode}: {tail}"}


def _measure_memory(files, settings, log):
    jobs = max(1, min(settings.memory_jobs, len(settings.modes)))
    log(f"memory: a fresh process per mode ({jobs} at a time)")
    results = {}
    with ThreadPoolExecutor(jobs) as pool:
        for result in pool.map(lambda m: _run_memory_worker(m, files, settings), settings.modes):
            results[result["mode"]] = result
            if "error" in result:
                log(f"  memory worker for {result['mode']} failed: {result['error']}")
    return results


# --------------------------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------------------------


def _load_model(settings, workdir, log):
    (options_path, weights_path), written = common.timed(
        modes_lib.write_random_model, settings.config, workdir, settings.seed
    )
    bilm, loaded = common.timed(modes_lib.load, options_path, weights_path)
    log(
        f"config {settings.config}: {int(bilm.count_params()):,} parameters; random weights "
        f"written to {workdir} in {written:.1f} s ({weights_path.stat().st_size / 2**20:.0f} "
        f"MiB), loaded back with load_bilm in {loaded:.1f} s"
    )
    return modes_lib.Context(bilm, options_path, weights_path, workdir, settings.config)


def run_benchmark(settings, log=print):
    """Times `settings.modes` on the workloads, interleaved; returns a dict (environment, rows)."""
    settings.validate()
    settings.batches = parse_batches(settings.batches)
    modes_lib.set_threads(settings.intra_op, settings.inter_op)
    env = common.environment()
    log(common.machine_line(env))
    temp = None if settings.workdir else tempfile.TemporaryDirectory(prefix="elmo-bench-")
    workdir = pathlib.Path(settings.workdir or temp.name)
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        ctx = _load_model(settings, workdir, log)
        workloads, source = common.make_workloads(settings.batches, settings.natural, settings.seed)
        log(
            f"text: {source}; "
            + ", ".join(
                f"{w.name}: {w.tokens} tokens, {len({t for s in w.sentences for t in s})} distinct"
                for w in workloads
            )
        )
        fns = {m: modes_lib.MODES[m].factory(ctx) for m in settings.modes}
        times, warm_s = _time_modes(fns, workloads, settings, log)
        timing_process_peak = common.peak_rss_mb()
        memory_results = {}
        if settings.memory == "subprocess":
            files = (ctx.options_path, ctx.weights_path, workdir)
            memory_results = _measure_memory(files, settings, log)
    finally:
        if temp is not None:
            temp.cleanup()
    full = settings.config == "full"
    rows = [
        report.row(m, w, times[(m, w.name)], warm_s[(m, w.name)], memory_results.get(m, {}), full)
        for w in workloads
        for m in settings.modes
    ]
    return {
        "environment": env,
        "config": settings.config,
        "options": modes_lib.CONFIGS[settings.config],
        "parameters": int(ctx.bilm.count_params()),
        "text_source": source,
        "repeats": settings.repeats,
        "warmup": settings.warmup,
        "memory_method": report.memory_method(settings.memory, memory_results),
        "timing_process_peak_rss_mb": timing_process_peak,
        "memory_workers": memory_results,
        "modes": {m: modes_lib.MODES[m].description for m in settings.modes},
        "rows": rows,
    }


# --------------------------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------------------------


def _parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--config", choices=sorted(modes_lib.CONFIGS), default="full")
    add(
        "--modes",
        default=",".join(DEFAULT_MODES),
        help=f"comma-separated, among {','.join(modes_lib.MODES)} (default %(default)s)",
    )
    add(
        "--batches",
        default=None,
        help="comma-separated sentences per batch, 20 tokens each "
        "(default 1,32,64; tiny: 1,32, fewer XLA compilations)",
    )
    add("--repeats", type=int, default=5)
    add("--warmup", type=int, default=1)
    add("--no-natural", action="store_true", help="skip the natural-lengths row")
    add(
        "--memory",
        choices=("subprocess", "none"),
        default=None,
        help="peak memory method (default: subprocess for full, none for tiny)",
    )
    add(
        "--memory-jobs",
        type=int,
        default=None,
        help="memory workers at once (default 1 for full, all for tiny)",
    )
    add(
        "--workdir", default=None, help="keep the model files here (reused when the config matches)"
    )
    add("--seed", type=int, default=0)
    add("--intra-op", type=int, default=None)
    add("--inter-op", type=int, default=None)
    add("--json", default=None, help="write the results here")
    # Internal: the per-mode memory process.
    add("--_memory-worker", dest="memory_worker", action="store_true", help=argparse.SUPPRESS)
    add("--mode", help=argparse.SUPPRESS)
    add("--options", help=argparse.SUPPRESS)
    add("--weights", help=argparse.SUPPRESS)
    return parser


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.memory_worker:
        _memory_worker(args)
        return 0
    if args.repeats < 1 or args.warmup < 0:
        print("error: --repeats must be >= 1 and --warmup >= 0", file=sys.stderr)
        return 2
    full = args.config == "full"
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    settings = Settings(
        modes=modes,
        batches=parse_batches(args.batches or ("1,32,64" if full else "1,32")),
        config=args.config,
        repeats=args.repeats,
        warmup=args.warmup,
        natural=not args.no_natural,
        memory=args.memory or ("subprocess" if full else "none"),
        memory_jobs=args.memory_jobs or (1 if full else len(modes)),
        workdir=args.workdir,
        seed=args.seed,
        intra_op=args.intra_op,
        inter_op=args.inter_op,
    )
    try:
        settings.validate()
    except ValueError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    results, wall = common.timed(run_benchmark, settings)
    results["wall_s"] = wall
    print()
    print(report.format_table(results))
    print(f"\n(total {results['wall_s']:.0f} s)")
    if args.json:
        common.write_json(args.json, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
