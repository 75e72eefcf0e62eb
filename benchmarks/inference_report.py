"""The table of `inference.py`: tokens/s per (workload, mode) as ratios measured in the same
run (% of the in-run matmul ceiling, natural/fixed, ONNX/Keras), the cosine to float32, peak
RSS, AllenNLP's published-here figures as a static reference row, issue 10's targets as
PASS/MISS lines, and the machine line."""

import statistics

import common

# AllenNLP's ELMo, PyTorch 2.13, 2 threads, eval + no_grad, state reset per batch, same random
# full-size weights, tokens/s end to end from token lists (../shared/PERFORMANCE.md).
ALLENNLP = {
    "date": "2026-11-23",
    "machine": "AMD EPYC Zen 5 (AVX-512, AVX512_BF16, VNNI), 2 cores; PyTorch 2.13, 2 threads",
    "tokens_per_s": {
        "b1x20": 38.5,
        "b32x20": 359.0,
        "b64x20": 424.0,
        "natural32": 178.0,
        "natural256": 239.0,
    },
    "peak_rss_mb_all_five": 3100.0,
}
# Issue 10's targets: (label, workload, baseline workload or None for the ceiling, minimum).
TARGETS = (
    ("32 x 20 vs the matmul ceiling", "b32x20", None, 0.75),
    ("32 natural in one batch vs 32 x 20, per token", "natural32", "b32x20", 0.80),
    ("embed of natural lines vs the same tokens in 20-token lines", "embed", "embed_cut20", 0.85),
)
ONNX_VS_KERAS = 0.90
# The natural/fixed column: natural workload -> its fixed-length counterpart.
FIXED_OF = {"natural32": "b32x20", "natural256": "b32x20", "embed": "embed_cut20"}
MATMUL_SIZE = 4096
COLUMNS = ["workload", "mode", "tokens", "tokens/s", "ms/call", "% of ceiling"]
COLUMNS += ["natural/fixed", "x AllenNLP", "cos to fp32 mean/min", "peak RSS MB"]


def _ceiling(matmul_s, options):
    gflops = 2 * MATMUL_SIZE**3 / statistics.median(matmul_s) / 1e9
    flop = common.flop_per_token(options)
    return {
        "matmul_size": MATMUL_SIZE,
        "matmul_s": matmul_s,
        "matmul_gflops": gflops,
        "mflop_per_token_20": flop / 1e6,
        "mflop_per_position": common.bilm_flop_per_position(options) / 1e6,
        "tokens_per_s": gflops * 1e9 / flop,
    }


def _targets(tps, modes):
    lines = []
    for mode in modes:
        for label, name, base, minimum in TARGETS:
            if base is None:
                value = tps.get((mode, name), {}).get("pct_ceiling")
                value = None if value is None else value / 100
            else:
                a, b = tps.get((mode, name), {}), tps.get((mode, base), {})
                both = a.get("tokens_per_s") and b.get("tokens_per_s")
                value = a["tokens_per_s"] / b["tokens_per_s"] if both else None
            lines.append({"mode": mode, "target": label, "value": value, "minimum": minimum})
    if "onnx" in modes and "keras" in modes:
        ratios = {
            name: r["tokens_per_s"] / tps[("keras", name)]["tokens_per_s"]
            for (mode, name), r in tps.items()
            if mode == "onnx" and r["tokens_per_s"] and tps[("keras", name)]["tokens_per_s"]
        }
        worst = min(ratios, key=ratios.get) if ratios else None
        lines.append(
            {
                "mode": "onnx",
                "target": f"ONNX vs Keras tokens/s, the worst workload ({worst})",
                "value": ratios.get(worst),
                "minimum": ONNX_VS_KERAS,
                "ratios": ratios,
            }
        )
    return lines


def _reduced_precision(rows, modes):
    """bf16 and int8 against their float32 twin: speed ratio per workload, mean/min cosine."""
    out = []
    for low, high in (("keras_bf16", "keras"), ("onnx_int8", "onnx")):
        if low not in modes:
            continue
        mine = [r for (m, _), r in rows.items() if m == low]
        cos = [r["cosine_mean"] for r in mine if r["cosine_mean"] is not None]
        mins = [r["cosine_min"] for r in mine if r["cosine_min"] is not None]
        speed = {
            r["workload"]: r["tokens_per_s"] / twin
            for r in mine
            if r["tokens_per_s"]
            and (twin := rows.get((high, r["workload"]), {}).get("tokens_per_s"))
        }
        out.append(
            {
                "mode": low,
                "float32_twin": high,
                "cosine_mean": statistics.mean(cos) if cos else None,
                "cosine_min": min(mins) if mins else None,
                "speed_vs_float32": speed,
            }
        )
    return out


def summarise(modes, workloads, times, cosine, matmul_s, memory, config):
    """Rows, the ceiling and the targets from the raw timings (seconds per call)."""
    from inference_modes import CONFIGS

    ceiling = _ceiling(matmul_s, CONFIGS[config])
    full = config == "full"
    rows = {}
    for w in workloads:
        for m in modes:
            samples = times.get((m, w.name)) or []
            median = statistics.median(samples) if samples else None
            tokens_per_s = w.tokens / median if median else None
            cos = cosine.get((m, w.name))
            allennlp = ALLENNLP["tokens_per_s"].get(w.name) if full else None
            rows[(m, w.name)] = {
                "mode": m,
                "workload": w.name,
                "label": w.label,
                "sentences": len(w.sentences),
                "tokens": w.tokens,
                "tokens_per_s": tokens_per_s,
                "ms_per_call": median * 1e3 if median else None,
                "samples_s": samples,
                "pct_ceiling": tokens_per_s / ceiling["tokens_per_s"] * 100
                if tokens_per_s
                else None,
                "vs_allennlp": tokens_per_s / allennlp if allennlp and tokens_per_s else None,
                "cosine_mean": cos[0] if cos else None,
                "cosine_min": cos[1] if cos else None,
                "peak_rss_mb": memory.get(m, {}).get("peak_rss_mb", {}).get(w.name),
                "timed_in": "fresh process" if w.long and memory else "interleaved rounds",
            }
    for (m, name), r in rows.items():
        base = rows.get((m, FIXED_OF.get(name)), {}).get("tokens_per_s")
        r["natural_over_fixed"] = r["tokens_per_s"] / base if base and r["tokens_per_s"] else None
    return {
        "ceiling": ceiling,
        "rows": list(rows.values()),
        "targets": _targets(rows, modes),
        "reduced_precision": _reduced_precision(rows, modes),
        "allennlp_reference": ALLENNLP,
    }


def memory_method(memory, memory_results):
    """How the peak RSS column was measured, in words."""
    if memory != "subprocess":
        return "not measured (--memory none)"
    reset = all(r.get("peak_reset", False) for r in memory_results.values())
    return (
        "a fresh process per mode, building only that mode; VmHWM (peak resident set of the "
        "whole process: weights, runtime, caches, outputs) over that workload's calls, "
        + (
            "the high-water mark reset before each workload"
            if reset
            else "cumulative over the workloads in increasing size (clear_refs not writable)"
        )
    )


def _pct(value):
    return common.fmt(None if value is None else value * 100, ".0f") + ("%" if value else "")


def _row_cells(r):
    fmt = common.fmt
    cos = f"{r['cosine_mean']:.5f} / {r['cosine_min']:.4f}" if r["cosine_mean"] is not None else "—"
    cells = [r["label"], r["mode"], r["tokens"], fmt(r["tokens_per_s"], ".1f")]
    cells += [fmt(r["ms_per_call"], ".1f"), fmt(r["pct_ceiling"], ".1f")]
    cells += [_pct(r["natural_over_fixed"]), fmt(r["vs_allennlp"], ".2f"), cos]
    return cells + [fmt(r["peak_rss_mb"], ".0f")]


def format_table(results):
    """The rows as a markdown table, then the ceiling, the targets, notes and the machine."""
    ref = results["allennlp_reference"]
    isolated = results.get("timing") == "isolated"  # results before it were interleaved
    lines = [common.table_header(COLUMNS)]
    shown = set()
    for r in results["rows"]:
        if r["workload"] not in shown and r["workload"] in ref["tokens_per_s"]:
            shown.add(r["workload"])
            rss = f"{ref['peak_rss_mb_all_five']:.0f} (all five)"
            cells = [r["label"], f"AllenNLP (reference, {ref['date']})", r["tokens"]]
            cells += [f"{ref['tokens_per_s'][r['workload']]:.1f}", "—", "—", "—", "1.00", "—"]
            lines.append(common.table_row(cells + [rss]))
        lines.append(common.table_row(_row_cells(r)))
    c = results["ceiling"]
    notes = [
        "",
        f"Ceiling: {c['matmul_size']}^2 float32 tf.matmul in this process, median "
        f"{c['matmul_gflops']:.0f} GFLOP/s over {len(c['matmul_s'])} calls, / "
        f"{c['mflop_per_token_20']:.4g} MFLOP per real token of 20-token sentences "
        f"({c['mflop_per_position']:.4g} per position, <S>/</S> included) = "
        f"{c['tokens_per_s']:.0f} tokens/s; every row is against this one ceiling.",
        "",
        "Targets (issue 10; ratios measured in this run):",
    ]
    for t in results["targets"]:
        verdict = (
            "—   " if t["value"] is None else ("PASS" if t["value"] >= t["minimum"] else "MISS")
        )
        each = ", ".join(f"{k} {_pct(v)}" for k, v in t.get("ratios", {}).items())
        notes.append(
            f"- {verdict} {t['mode']}: {t['target']}: {_pct(t['value'])} (>= {t['minimum']:.0%})"
            + (f"; each: {each}" if each else "")
        )
    if results["config"] != "full":
        notes.append("  (the targets are for the full configuration; a tiny one is overhead)")
    if results["reduced_precision"]:
        notes += ["", "Reduced precision (cosine on the one-call workloads; speed per workload):"]
    for q in results["reduced_precision"]:
        speed = ", ".join(f"{k} {v:.2f}x" for k, v in q["speed_vs_float32"].items())
        notes.append(
            f"- {q['mode']} vs {q['float32_twin']} (float32): cosine to float32 mean "
            f"{common.fmt(q['cosine_mean'], '.5f')}, min {common.fmt(q['cosine_min'], '.4f')}; "
            f"speed {speed or '—'}"
        )
    notes += [
        "",
        f"tokens = real input tokens (no boundaries, no padding), end to end from token lists. "
        f"One-call workloads: medians of {results['repeats']} rounds, "
        + (
            "each mode in a fresh process of its own per round (the order rotating), "
            if isolated
            else "all modes interleaved in one process, "
        )
        + f"{results.get('calls', 1)} timed call(s) per workload and mode in each round, "
        f"after {results['warmup']} warm-up call(s). "
        "embed workloads (iter_embed, batches of 64, at most 4,096 tokens): "
        + (
            "one call each in the fresh per-mode process."
            if results["memory_workers"]
            else f"medians of {results['embed_repeats']} interleaved round(s), no warm-up."
        ),
        "cos to fp32: cosine of the mode's vectors to the plain float32 Keras call's, per real "
        "token and layer (mean / min), on the one-call workloads.",
        f"Peak RSS: {results['memory_method']}.",
        f"AllenNLP reference row: {ref['date']}, {ref['machine']}; a static quote, not this "
        "run (x AllenNLP only for the full configuration).",
        f"Text: {results['text_source']}. bf16: {results['bf16']['why']}.",
        *(f"Mode {m} FAILED, left out: {e}" for m, e in results.get("failed_modes", {}).items()),
        "Main process (Keras reference and quality pass"
        + ("" if isolated else ", interleaved timing")
        + ") peak RSS: "
        f"{results['timing_process_peak_rss_mb']:.0f} MB.",
        common.machine_line(results["environment"]),
    ]
    return "\n".join(lines + notes)
