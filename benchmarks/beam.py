#!/usr/bin/env python
"""`elmo-keras beam-embed` on the DirectRunner (1 and 2 worker processes) against
`elmo-keras embed --backend onnx`, on the same text file: tokens/s and peak RSS.

Run from the repository root (needs the `[beam]` and `[onnx]` extras):

    python benchmarks/beam.py                                   # 10,000 lines, 3 rounds
    python benchmarks/beam.py --lines 200 --repeats 1           # a smoke run
    python benchmarks/beam.py --model W/export/model.onnx       # another exported model

What it does:
1. Exports the tiny packaged biLM (`elmo_keras/assets/tiny_allennlp`, AllenNLP's test model:
   2 layers, projection 16) to ONNX with `elmo-keras export`, unless `--model` names one.
2. Writes the first `--lines` lines of WikiText-2 train (`../shared/data`; real lines,
   empty ones included), or a seeded synthetic file where that is absent.
3. Runs each configuration as its own command, in rounds whose order rotates
   (`common.rotated`): `embed` (ONNX Runtime's default threads), `beam-embed` with 1 worker
   process (`--threads` = all usable cores) and with 2 (`--threads` = half each), both with
   `--direct_running_mode=multi_processing`. Each command is timed from launch to exit
   (start-up, reading, writing included) on the full file and, for the fixed cost, on a
   one-line file. Peak RSS is the largest sum of the resident sets of the command's whole
   process tree (the Beam workers are children), sampled every 50 ms.
Reported: medians over the rounds; tokens/s counts input tokens (whitespace split).
"""

import argparse
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import threading
import time

import common
import numpy as np

REPO = common.REPO
TINY = REPO / "elmo_keras" / "assets" / "tiny_allennlp"
WIKITEXT_TRAIN = common.WIKITEXT_DIR / "train.raw.txt"
CLI = [sys.executable, "-c", "import sys; from elmo_keras.cli import main; sys.exit(main())"]


def _tree_rss_mb(root):
    """The summed VmRSS (MB) of `root` and all its descendants, from /proc."""
    children = {}
    for entry in pathlib.Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo.extend(children.get(pid, []))
        try:
            for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            pass
    return total / 1024.0


def run_command(argv):
    """`(seconds, peak tree RSS MB)` of one command; raises if it fails."""
    start = time.perf_counter()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak, done = [0.0], threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], _tree_rss_mb(process.pid))
            done.wait(0.05)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    out, err = process.communicate()
    seconds = time.perf_counter() - start
    done.set()
    sampler.join()
    if process.returncode:
        raise RuntimeError(f"{' '.join(argv[3:])} failed:\n{err[-3000:]}")
    return seconds, peak[0]


def export_tiny(workdir):
    output = workdir / "export"
    if not (output / "model.onnx").is_file():
        args = ["export", "--run-dir", str(TINY), "--output", str(output), "--format", "onnx"]
        run_command([*CLI, *args, "--overwrite"])
    return output / "model.onnx"


def write_text(path, n_lines, seed=0):
    """The first `n_lines` lines of WikiText-2 train, else seeded synthetic lines."""
    if WIKITEXT_TRAIN.is_file():
        lines = WIKITEXT_TRAIN.read_text(encoding="utf-8").split("\n")[:n_lines]
        source = f"WikiText-2 train, first {len(lines)} lines"
    else:
        rng = np.random.default_rng(seed)
        words = [f"w{i}" for i in range(5000)]
        lengths = np.clip(rng.gamma(2.0, 15.0, n_lines).astype(int), 0, 400)
        lines = [" ".join(rng.choice(words, size=n)) for n in lengths]
        source = f"synthetic, {n_lines} lines"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return sum(len(line.split()) for line in lines), source


def commands(model, text, out, cores):
    """{configuration: (label, argv)} for one input file."""
    beam = ["beam-embed", "--model", str(model), "--input", str(text), "--overwrite"]
    mode = "--direct_running_mode=multi_processing"
    return {
        "embed": (
            "`elmo-keras embed --backend onnx`",
            [
                *CLI,
                "embed",
                "--backend",
                "onnx",
                "--model",
                str(model),
                "--input",
                str(text),
                "--output",
                str(out / "embed.h5"),
                "--overwrite",
            ],
        ),
        "beam1": (
            "`beam-embed`, DirectRunner, 1 worker",
            [
                *CLI,
                *beam,
                "--output",
                str(out / "beam1" / "emb"),
                "--threads",
                str(cores),
                "--",
                "--direct_num_workers=1",
                mode,
            ],
        ),
        "beam2": (
            "`beam-embed`, DirectRunner, 2 workers",
            [
                *CLI,
                *beam,
                "--output",
                str(out / "beam2" / "emb"),
                "--threads",
                str(max(1, cores // 2)),
                "--",
                "--direct_num_workers=2",
                mode,
            ],
        ),
    }


def measure(settings, workdir):
    model = pathlib.Path(settings.model) if settings.model else export_tiny(workdir)
    text, one = workdir / "lines.txt", workdir / "one_line.txt"
    tokens, source = write_text(text, settings.lines)
    one_tokens, _ = write_text(one, 1)
    cores = common.environment(with_tensorflow=False)["cpus_usable"]
    for name in ("beam1", "beam2"):
        (workdir / name).mkdir(exist_ok=True)
    full, fixed = commands(model, text, workdir, cores), commands(model, one, workdir, cores)
    times = {name: [] for name in full}
    starts = {name: [] for name in full}
    peaks = {name: [] for name in full}
    for round_index in range(settings.repeats):
        for name in common.rotated(list(full), round_index):
            seconds, peak = run_command(full[name][1])
            times[name].append(seconds)
            peaks[name].append(peak)
            starts[name].append(run_command(fixed[name][1])[0])
            print(f"round {round_index + 1} {name}: {seconds:.1f} s, {peak:.0f} MB", flush=True)
    rows = []
    for name, (label, _) in full.items():
        seconds, start = statistics.median(times[name]), statistics.median(starts[name])
        steady = tokens / (seconds - start) if seconds > start else None
        rows.append(
            {
                "configuration": name,
                "label": label,
                "seconds": seconds,
                "tokens_per_s": tokens / seconds,
                "fixed_seconds": start,
                "tokens_per_s_after_start": steady,
                "peak_rss_mb": statistics.median(peaks[name]),
            }
        )
    return {
        "tokens": tokens,
        "lines": settings.lines,
        "text": source,
        "model": str(model),
        "cores": cores,
        "rounds": settings.repeats,
        "rows": rows,
    }


def report(result, env):
    print(
        f"\n{result['lines']} lines, {result['tokens']} tokens ({result['text']}); model "
        f"{result['model']}; medians of {result['rounds']} rounds\n"
    )
    print(
        common.table_header(
            [
                "configuration",
                "wall s",
                "tokens/s",
                "fixed cost s (1 line)",
                "tokens/s after the fixed cost",
                "tokens/s per core",
                "peak RSS MB (process tree)",
            ]
        )
    )
    for row in result["rows"]:
        per_core = row["tokens_per_s"] / result["cores"]
        print(
            common.table_row(
                [
                    row["label"],
                    common.fmt(row["seconds"], ".1f"),
                    common.fmt(row["tokens_per_s"], ",.0f"),
                    common.fmt(row["fixed_seconds"], ".1f"),
                    common.fmt(row["tokens_per_s_after_start"], ",.0f"),
                    common.fmt(per_core, ",.0f"),
                    common.fmt(row["peak_rss_mb"], ",.0f"),
                ]
            )
        )
    print("\n" + common.machine_line(env))


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=10_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--model", help="an exported .onnx model (default: the tiny biLM)")
    parser.add_argument("--workdir", help="keep the files here (default: a temporary folder)")
    parser.add_argument("--json", help="write the results to this file")
    settings = parser.parse_args(argv)
    env = common.environment(with_tensorflow=False)
    with tempfile.TemporaryDirectory() as scratch:
        workdir = pathlib.Path(settings.workdir or scratch)
        workdir.mkdir(parents=True, exist_ok=True)
        result = measure(settings, workdir)
    report(result, env)
    if settings.json:
        common.write_json(settings.json, {"environment": env, **result})
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    sys.exit(main())
