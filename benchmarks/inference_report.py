"""The table of `inference.py`: one row per (mode, workload), with the yardsticks of
../shared/PERFORMANCE.md for the full configuration, notes on method, and the machine line."""

import statistics

import common

# Yardsticks measured on this machine type (../shared/PERFORMANCE.md): the fp32 matmul ceiling
# of the full model on 2 cores, and AllenNLP's ELMo (PyTorch) on the same shapes.
MATMUL_CEILING_TOKENS_PER_S = 740.0
ALLENNLP_TOKENS_PER_S = {"b1x20": 40.0, "b32x20": 279.0, "natural32": 142.0}
ALLENNLP_B32 = ALLENNLP_TOKENS_PER_S["b32x20"]
COLUMNS = ["mode", "batch", "tokens", "tokens/s (median)", "ms/batch", "peak RSS MB"]
COLUMNS += ["x ceiling 740", "x AllenNLP b32 279", "x AllenNLP same shape"]


def row(mode, w, samples, warm_s, memory, full):
    """One table row; the yardstick ratios only for the full configuration."""
    median = statistics.median(samples)
    tps = w.tokens / median
    allennlp = ALLENNLP_TOKENS_PER_S.get(w.name) if full else None
    return {
        "mode": mode,
        "workload": w.name,
        "label": w.label,
        "batch": w.batch,
        "tokens": w.tokens,
        "positions": w.positions,
        "tokens_per_s": tps,
        "ms_per_batch": median * 1e3,
        "ms_samples": [s * 1e3 for s in samples],
        "warmup_s": warm_s,
        "peak_rss_mb": memory.get("peak_rss_mb", {}).get(w.name),
        "rss_after_load_mb": memory.get("rss_after_load_mb"),
        "vs_matmul_ceiling": tps / MATMUL_CEILING_TOKENS_PER_S if full else None,
        "vs_allennlp_b32": tps / ALLENNLP_B32 if full else None,
        "allennlp_same_shape_tokens_per_s": allennlp,
        "vs_allennlp_same_shape": tps / allennlp if allennlp else None,
    }


def memory_method(memory, memory_results):
    """How the peak RSS column was measured, in words."""
    if memory != "subprocess":
        return "not measured (--memory none)"
    reset = all(r.get("peak_reset", False) for r in memory_results.values())
    return (
        "a fresh process per mode; VmHWM (peak resident set of the whole process: weights, "
        "runtime, caches) over one warm-up + one timed call of that workload, "
        + (
            "the high-water mark reset before each workload"
            if reset
            else "cumulative over the workloads in increasing size (clear_refs not writable)"
        )
    )


def format_table(results):
    """The rows as a markdown table, with notes and the machine line."""
    fmt = common.fmt
    lines = [common.table_header(COLUMNS)]
    for r in results["rows"]:
        same = r["vs_allennlp_same_shape"]
        cells = [r["mode"], r["label"], r["tokens"], f"{r['tokens_per_s']:.1f}"]
        cells += [f"{r['ms_per_batch']:.1f}", fmt(r["peak_rss_mb"], ".0f")]
        cells += [fmt(r["vs_matmul_ceiling"], ".2f"), fmt(r["vs_allennlp_b32"], ".2f")]
        cells.append(f"{same:.2f} ({r['allennlp_same_shape_tokens_per_s']:.0f})" if same else "—")
        lines.append(common.table_row(cells))
    notes = [
        "",
        f"Medians of {results['repeats']} interleaved rounds after {results['warmup']} warm-up "
        "call(s); tokens = real input tokens (no boundaries, no padding).",
        f"Peak RSS: {results['memory_method']}.",
    ]
    after = {m: r.get("rss_after_load_mb") for m, r in results["memory_workers"].items()}
    if after:
        notes.append(
            "Peak RSS while loading (load_bilm: build, random init, hdf5 read, assign; before any "
            "call): " + ", ".join(f"{m} {fmt(v, '.0f')} MB" for m, v in after.items()) + "."
        )
    notes.append(
        "Timing process (all modes in one process) peak RSS: "
        f"{results['timing_process_peak_rss_mb']:.0f} MB."
    )
    if results["config"] == "full":
        notes.append(
            "Yardsticks from ../shared/PERFORMANCE.md (measured on this machine type): fp32 "
            "matmul ceiling ~740 tokens/s for the full model; AllenNLP ELMo 279 tokens/s at "
            "32 x 20, 40 at 1 x 20, 142 on a natural batch of 32 (11-75 tokens)."
        )
    else:
        notes.append("Ratios to the full model's yardsticks are omitted for this config.")
    notes.append(common.machine_line(results["environment"]))
    return "\n".join(lines + notes)
