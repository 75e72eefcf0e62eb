#!/usr/bin/env python
"""Inference speed and peak memory of the biLM, end to end from token lists, as ratios.

Run from the repository root:

    python benchmarks/inference.py                            # full configuration, issue 10
    python benchmarks/inference.py --config tiny --repeats 1  # smoke run (~1 min + export)
    python benchmarks/inference.py --modes keras,onnx --workdir W --json results.json

What it does:
1. Builds a `BiLM` with random weights (the full published configuration, REFERENCE.md section
   2, or a tiny one), writes it in the published layout (`options.json` + hdf5) and loads it
   back with `BiLM.from_bilm_tf`; the exported modes export it once into `WORKDIR/export/`.
2. The workloads (token lists; WikiText-2 from `../shared/data` when present, else a seeded
   Zipf draw): one call each on 1, 32 and 64 sentences of 20 tokens and on 32 natural
   sentences (11-75 tokens) in one padded batch; 256 natural sentences sorted into batches of
   32; and `embed` of a 10,000-line text (`--embed-lines`, 1,000 for a tiny config; sentences
   as they come) and of the same tokens cut into 20-token lines, streamed through `iter_embed`
   as `elmo-keras embed` does (batches of 64, at most 4,096 tokens; no file is written).
3. Every mode goes through its embedder (`embed_batch` / `iter_embed`, see
   `inference_modes.py`), so character ids, host-side deduplication and batching are timed.
   The one-call workloads are timed in `--repeats` rounds, medians. `--timing isolated` (the
   default for the full configuration): in each round every mode runs in a fresh process of
   its own (the order rotating), `--warmup` calls then `--calls` timed calls per workload
   (3 by default; the median is over all rounds' calls), so that TensorFlow's and ONNX
   Runtime's thread pools never share a process, as they would not in a user's.
   `--timing interleaved` (the default for tiny): all modes in this process, each workload
   `--calls` times in every mode per round. Each round also times a 4096^2 float32
   `tf.matmul` here, with no worker running: its median GFLOP/s divided by the model's FLOP
   per real token of 20-token sentences (from the configuration: 224.7 MFLOP for the full
   model) is the ceiling in tokens/s, measured in the same run.
4. Peak memory (`--memory subprocess`, the default for the full configuration): one fresh
   process per mode builds only that mode (an ONNX mode never imports TensorFlow), then per
   workload resets the resident-set high-water mark (`clear_refs`), runs it (one-call
   workloads twice: warm-up and a timed call; the `embed` ones once) and reads `VmHWM`. The
   `embed` workloads are long, so they are timed there, in that fresh process, instead of in
   the interleaved rounds; with `--memory none` they are timed in rounds here
   (`--embed-repeats`).
5. Quality: the cosine of each mode's vectors to the plain float32 Keras call's (per real
   token and layer) on the one-call workloads: bf16 and int8 show their loss there.
The table: `inference_report.py`.
"""

import argparse
import dataclasses
import pathlib
import sys
import tempfile

import common
import inference_modes as modes_lib
import inference_report as report
import inference_workers as workers

common.prefer_onednn()

DEFAULT_MODES = ("keras", "savedmodel", "onnx", "onnx_int8", "keras_bf16")


@dataclasses.dataclass
class Settings:
    """One benchmark run. `memory`: "subprocess" (a fresh process per mode) or "none".
    `workdir`: where the model files go (kept, and reused by a later run with the same config);
    `None` for a temporary folder deleted at the end."""

    modes: tuple = DEFAULT_MODES
    config: str = "full"
    timing: str = "isolated"
    repeats: int = 5
    warmup: int = 1
    calls: int = 3
    embed_repeats: int = 1
    embed_lines: int = 10000
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
        if self.timing not in ("isolated", "interleaved"):
            raise ValueError(
                f"`timing` must be 'isolated' or 'interleaved'. Received: timing={self.timing!r}"
            )
        if self.memory not in ("subprocess", "none"):
            raise ValueError(
                f"`memory` must be 'subprocess' or 'none'. Received: memory={self.memory!r}"
            )
        unknown = [m for m in self.modes if m not in modes_lib.MODES]
        if unknown or not self.modes:
            raise ValueError(
                f"`modes` must be among {sorted(modes_lib.MODES)}. "
                f"Received: modes={','.join(self.modes)}"
            )
        if min(self.repeats, self.embed_repeats, self.calls, self.embed_lines + 1) < 1:
            raise ValueError(
                "`repeats`, `embed_repeats` and `calls` must be >= 1, `embed_lines` >= 0. "
                f"Received: repeats={self.repeats}, embed_repeats={self.embed_repeats}, "
                f"calls={self.calls}, embed_lines={self.embed_lines}"
            )


# --------------------------------------------------------------------------------------------
# Timing and quality, in this process
# --------------------------------------------------------------------------------------------


def _reference(bilm, workload):
    """The plain float32 Keras call on one batch, per sentence (the quality reference)."""
    from elmo_keras.text.char_ids import batch_to_char_ids

    ids = batch_to_char_ids(
        workload.sentences, max_characters_per_token=bilm.max_characters_per_token
    )
    layers = bilm(ids, training=False)["activations"].numpy()
    return [layers[i, :, : len(s)] for i, s in enumerate(workload.sentences)]


def _failure(error):
    """One line: the exception type and the last line of its message (TF puts the cause last)."""
    lines = [x.strip() for x in str(error).splitlines() if x.strip()] or [""]
    return f"{type(error).__name__}: {lines[-1][:300]}"


def _build_modes(modes, ctx, log):
    """Each mode's embedder; a mode that fails is left out with its error, the run goes on."""
    embedders, failed = {}, {}
    for m in modes:
        try:
            embedders[m] = modes_lib.MODES[m].factory(ctx)
        except Exception as error:  # noqa: BLE001 (reported under the table)
            failed[m] = _failure(error)
            log(f"mode {m} left out: {failed[m]}")
    return embedders, failed


def _warm_up(embedders, workloads, settings, ctx, failed, log):
    """Warm-up calls, and the cosines of their outputs to the float32 Keras call's; a mode
    that fails is left out (removed from `embedders`, its error in `failed`)."""
    cosine = {}
    for w in workloads:
        reference = _reference(ctx.bilm, w) if w.batch_size is None else None
        for m in list(embedders):
            try:
                outputs = [w.run(embedders[m]) for _ in range(settings.warmup)]
            except Exception as error:  # noqa: BLE001 (reported under the table)
                failed[m] = _failure(error)
                log(f"mode {m} left out: {failed[m]}")
                del embedders[m]
                continue
            if reference is not None:
                cos = common.cosines(outputs[0], reference)
                cosine[(m, w.name)] = (float(cos.mean()), float(cos.min()))
    return cosine


def _time_short(embedders, workloads, settings, log):
    """Interleaved rounds in this process (each workload `settings.calls` times in every mode,
    the mode order rotating), each round followed by the matmul; after `_warm_up`."""
    times = {(m, w.name): [] for m in embedders for w in workloads}
    common.matmul_seconds()  # its warm-up
    matmul = []
    log(f"warm-up done; timing {settings.repeats} interleaved round(s)")
    for r in range(settings.repeats):
        for w in workloads:
            for m in common.rotated(tuple(embedders), r):
                for _ in range(settings.calls):
                    times[(m, w.name)].append(common.timed(w.run, embedders[m])[1])
        matmul.append(common.matmul_seconds())
        log(f"  round {r + 1}/{settings.repeats} done")
    while len(matmul) < 3:
        matmul.append(common.matmul_seconds())
    return times, matmul


def _time_long(embedders, workloads, settings, log):
    times = {(m, w.name): [] for m in embedders for w in workloads}
    for r in range(settings.embed_repeats):
        for w in workloads:
            for m in common.rotated(tuple(embedders), r):
                for _ in range(settings.calls):
                    times[(m, w.name)].append(common.timed(w.run, embedders[m])[1])
                log(f"  {w.name} {m}: {times[(m, w.name)][-1]:.1f} s")
    return times


# --------------------------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------------------------


def _setup(settings, workdir, log):
    (options_path, weights_path), written = common.timed(
        modes_lib.write_random_model, settings.config, workdir, settings.seed
    )
    ctx = modes_lib.Context(options_path, weights_path, workdir, settings.config)
    loaded = common.timed(lambda: ctx.bilm)[1]
    log(
        f"config {settings.config}: {int(ctx.bilm.count_params()):,} parameters; random weights "
        f"written in {written:.1f} s, loaded back with BiLM.from_bilm_tf in {loaded:.1f} s"
    )
    return ctx


def run_benchmark(settings, log=print):
    """Times `settings.modes` on the workloads; returns a dict (environment, rows, ratios)."""
    settings.validate()
    modes_lib.set_threads(settings.intra_op, settings.inter_op)
    env = common.environment()
    log(common.machine_line(env))
    bf16_ok, bf16_why = modes_lib.bf16_available()
    modes = tuple(m for m in settings.modes if m != "keras_bf16" or bf16_ok)
    if modes != settings.modes:
        log(f"keras_bf16 skipped: {bf16_why}")
    settings = dataclasses.replace(settings, modes=modes)
    temp = None if settings.workdir else tempfile.TemporaryDirectory(prefix="elmo-bench-")
    workdir = pathlib.Path(settings.workdir or temp.name)
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        ctx = _setup(settings, workdir, log)
        workloads, source = modes_lib.make_workloads(settings.seed, settings.embed_lines)
        log(f"text: {source}; " + ", ".join(f"{w.name}: {w.tokens} tokens" for w in workloads))
        embedders, failed = _build_modes(modes, ctx, log)
        short = [w for w in workloads if not w.long]
        long = [w for w in workloads if w.long]
        cosine = _warm_up(embedders, short, settings, ctx, failed, log)
        modes = tuple(m for m in modes if m in embedders)
        settings = dataclasses.replace(settings, modes=modes)
        if settings.timing == "interleaved":
            times, matmul = _time_short(embedders, short, settings, log)
        else:
            embedders = {}  # the workers need the memory more
            times, matmul, isolated_failed = workers.time_isolated(ctx, settings, short, log)
            failed.update(isolated_failed)
            modes = tuple(m for m in modes if m not in isolated_failed)
            settings = dataclasses.replace(settings, modes=modes)
        memory = {}
        if settings.memory == "subprocess":
            embedders.clear()  # the workers need the memory more
            memory = workers.measure_memory(ctx, settings, log)
            for m, result in memory.items():
                for w in long:
                    times[(m, w.name)] = [result["seconds"][w.name]] if "seconds" in result else []
        else:
            if not embedders and long:  # isolated timing let them go: build them again
                embedders, _ = _build_modes(modes, ctx, log)
            times.update(_time_long(embedders, long, settings, log))
        timing_peak = common.peak_rss_mb()
        parameters = int(ctx.bilm.count_params())
    finally:
        if temp is not None:
            temp.cleanup()
    return {
        "environment": env,
        "config": settings.config,
        "options": modes_lib.CONFIGS[settings.config],
        "parameters": parameters,
        "text_source": source,
        "timing": settings.timing,
        "repeats": settings.repeats,
        "warmup": settings.warmup,
        "calls": settings.calls,
        "embed_repeats": settings.embed_repeats,
        "bf16": {"available": bf16_ok, "why": bf16_why},
        "memory_method": report.memory_method(settings.memory, memory),
        "timing_process_peak_rss_mb": timing_peak,
        "memory_workers": memory,
        "modes": {m: modes_lib.MODES[m].description for m in modes},
        "failed_modes": failed,
        **report.summarise(modes, workloads, times, cosine, matmul, memory, settings.config),
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
        help=f"comma-separated, among {','.join(modes_lib.MODES)} (default %(default)s; "
        "keras_bf16 only where the CPU has avx512_bf16/amx_bf16 or a GPU is present)",
    )
    add(
        "--timing",
        choices=("isolated", "interleaved"),
        default=None,
        help="one-call workloads: each mode in its own fresh process per round (isolated), or "
        "all modes in this process (default: isolated for full, interleaved for tiny)",
    )
    add("--repeats", type=int, default=5, help="rounds of the one-call workloads")
    add("--warmup", type=int, default=1, help="at least 1 (its outputs give the cosines)")
    add(
        "--calls",
        type=int,
        default=3,
        help="timed calls per one-call workload, mode and round (default %(default)s)",
    )
    add(
        "--embed-lines",
        type=int,
        default=None,
        help="lines of the embed workload, 0 for none (default 10000; tiny: 1000)",
    )
    add("--embed-repeats", type=int, default=1, help="embed rounds with --memory none")
    add(
        "--memory",
        choices=("subprocess", "none"),
        default=None,
        help="peak memory method (default: subprocess for full, none for tiny)",
    )
    add("--memory-jobs", type=int, default=None, help="memory workers at once (default 1)")
    add("--workdir", default=None, help="keep the model files and exports here (reused)")
    add("--seed", type=int, default=0)
    add("--intra-op", type=int, default=None)
    add("--inter-op", type=int, default=None)
    add("--json", default=None, help="write the results here")
    # Internal: the per-mode memory process.
    add("--_memory-worker", dest="memory_worker", action="store_true", help=argparse.SUPPRESS)
    add("--_timing-worker", dest="timing_worker", action="store_true", help=argparse.SUPPRESS)
    add("--mode", help=argparse.SUPPRESS)
    add("--options", help=argparse.SUPPRESS)
    add("--weights", help=argparse.SUPPRESS)
    return parser


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.memory_worker or args.timing_worker:
        (workers.memory_worker if args.memory_worker else workers.timing_worker)(args)
        return 0
    full = args.config == "full"
    settings = Settings(
        modes=tuple(m.strip() for m in args.modes.split(",") if m.strip()),
        config=args.config,
        timing=args.timing or ("isolated" if full else "interleaved"),
        repeats=args.repeats,
        warmup=max(args.warmup, 1),
        calls=args.calls,
        embed_repeats=args.embed_repeats,
        embed_lines=(10000 if full else 1000) if args.embed_lines is None else args.embed_lines,
        memory=args.memory or ("subprocess" if full else "none"),
        memory_jobs=args.memory_jobs or 1,
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
