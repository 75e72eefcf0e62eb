#!/usr/bin/env python
"""Peak memory of `elmo-keras embed` as the input grows: it must not grow with the file.

Run from the repository root (it takes a few minutes on two cores; nice it on a shared host):

    nice -n 10 python benchmarks/embed_memory.py
    python benchmarks/embed_memory.py --lines 500,10000 --preset tiny --max-tokens 4096

For each N of `--lines` (default 500, 10000 and all), the first N lines of the input (default
the WikiText-2 training text, ../shared/data/wikitext-2/train.raw.txt: 36,718 lines, 2.05M
tokens, one paragraph per line, up to 699 tokens) are copied into a temporary folder and
embedded by `elmo-keras embed --preset tiny` in a fresh Python process (the command's own
`main`, as the console script runs it), writing its hdf5 output into the same temporary folder,
which is deleted afterwards.

Peak memory: the child reads its own `VmHWM` (the kernel's resident-set high-water mark) from
`/proc/self/status` once the command has returned, so it covers the whole run: TensorFlow, the
model, the batches, h5py. Not `ru_maxrss` alone: Linux carries it over from the forking parent
across `exec` (see `benchmarks/inference.py`); this parent never imports TensorFlow, so the
`ru_maxrss` that `os.wait4` reports for the child is printed beside it as a cross-check.
Wall time is that of `main` in the child (TensorFlow's import and the model's loading
included, the interpreter's start-up not), so tokens/s is the whole command's rate.

The table ends with the machine line (`common.machine_line`), measured in the last child.

`--long-line N` adds a row: one line of N tokens (the input's first N words joined), for the
bounded memory of one very long sentence (issue 10: 20,000 tokens with the full model, under
~3 GB). `--options` and `--weights` take a model's files instead of `--preset`, e.g. the full
configuration with random weights that `benchmarks/inference.py --workdir W` writes to W:

    python benchmarks/embed_memory.py --options W/options.json --weights W/weights.hdf5 \
        --lines 500 --long-line 20000

What may grow with the file (issue 10): the chunk of token lists `embed` sorts (bounded by
`iter_embeddings`' chunk; repeated tokens share one string), h5py's metadata cache (about
20 MB, then flat), and TensorFlow's oneDNN primitive caches: one entry per distinct input shape,
up to 1024 per thread and kind of op, so a model call whose shapes change with every batch
keeps adding to them (`TF_ENABLE_ONEDNN_OPTS=0` removes that growth; rounding the shapes up
to a few sizes bounds it).
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

import common

CHILD = """
import json, pathlib, sys, time
sys.path.insert(0, sys.argv[2])
start = time.perf_counter()
from elmo_keras.cli import main
code = main(sys.argv[3:])
wall = time.perf_counter() - start
import common
result = {"code": code, "wall_s": wall, "vmhwm_mb": common.peak_rss_mb()}
result["environment"] = common.environment(with_tensorflow=True)
pathlib.Path(sys.argv[1]).write_text(json.dumps(result))
sys.exit(code)
"""
DEFAULT_INPUT = common.WIKITEXT_DIR / "train.raw.txt"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--input", type=pathlib.Path, default=DEFAULT_INPUT)
    parser.add_argument("--lines", default="500,10000,all", help="comma-separated; `all`")
    parser.add_argument("--preset", default="tiny")
    parser.add_argument("--options", type=pathlib.Path, help="with --weights, instead of --preset")
    parser.add_argument("--weights", type=pathlib.Path)
    parser.add_argument("--long-line", type=int, help="add a row: one line of this many tokens")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=4096)
    parser.add_argument("--json", type=pathlib.Path, help="also write the results here")
    return parser.parse_args(argv)


def first_lines(source, n, target):
    """Copies the first `n` lines (all if `n` is None) of `source` to `target`, byte for
    byte; returns `(lines, tokens)` as `embed` counts them."""
    lines = tokens = 0
    with open(source, "rb") as src, open(target, "wb") as dst:
        for raw in src:
            if n is not None and lines == n:
                break
            dst.write(raw)
            lines += 1
            tokens += len(raw.decode("utf-8-sig" if lines == 1 else "utf-8").split())
    return lines, tokens


def long_line(source, n, target):
    """Writes one line of the first `n` whitespace tokens of `source` (repeated if it has
    fewer); returns `(1, n)`."""
    words = []
    while len(words) < n:
        with open(source, encoding="utf-8-sig") as f:
            for line in f:
                words.extend(line.split()[: n - len(words)])
                if len(words) == n:
                    break
    target.write_text(" ".join(words) + "\n", encoding="utf-8")
    return 1, n


def model_args(args):
    if args.options is not None or args.weights is not None:
        if args.options is None or args.weights is None:
            raise SystemExit("--options and --weights go together")
        return ["--options", str(args.options), "--weights", str(args.weights)]
    return ["--preset", args.preset]


def run_one(args, n, folder, long=False):
    text = folder / (f"long{n}.txt" if long else f"first{n or 'all'}.txt")
    lines, tokens = long_line(args.input, n, text) if long else first_lines(args.input, n, text)
    output, result = folder / "out.hdf5", folder / "result.json"
    cli = ["embed", *model_args(args), "--input", str(text), "--output", str(output)]
    cli += ["--batch-size", str(args.batch_size), "--max-tokens", str(args.max_tokens)]
    cli += ["--overwrite"]
    start = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(result), str(pathlib.Path(__file__).parent), *cli],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(process.pid, 0)
    process.returncode = os.waitstatus_to_exitcode(status)
    err = process.stderr.read().decode(errors="replace")
    process.stdout.close(), process.stderr.close()
    if process.returncode != 0:
        raise SystemExit(f"embed failed on {lines} lines (exit {process.returncode}): {err}")
    measured = json.loads(result.read_text())
    output.unlink()
    text.unlink()
    return {
        "long_line": long,
        "lines": lines,
        "tokens": tokens,
        "wall_s": measured["wall_s"],
        "process_s": time.perf_counter() - start,
        "peak_rss_mb": measured["vmhwm_mb"],
        "ru_maxrss_mb": usage.ru_maxrss / 1024.0,  # KiB on Linux
        "environment": measured["environment"],
    }


def main(argv=None):
    args = parse_args(argv)
    counts = [None if x.strip() == "all" else int(x) for x in args.lines.split(",")]
    with tempfile.TemporaryDirectory(prefix="embed-memory-") as folder:
        rows = [run_one(args, n, pathlib.Path(folder)) for n in counts]
        if args.long_line:
            rows.append(run_one(args, args.long_line, pathlib.Path(folder), long=True))
    base = rows[0]["peak_rss_mb"]
    print(
        f"`elmo-keras embed {' '.join(model_args(args))} --batch-size {args.batch_size} "
        f"--max-tokens {args.max_tokens}` on the first lines of {args.input}; one fresh "
        "process per row\n"
    )
    columns = ["input", "lines", "tokens", "wall s", "tokens/s", "peak RSS MB (VmHWM)"]
    columns += ["ru_maxrss MB", f"ratio to {rows[0]['lines']} lines"]
    print(common.table_header(columns))
    for row in rows:
        print(
            common.table_row(
                [
                    "one long line" if row["long_line"] else "first lines",
                    row["lines"],
                    row["tokens"],
                    f"{row['wall_s']:.1f}",
                    f"{row['tokens'] / row['wall_s']:.0f}",
                    f"{row['peak_rss_mb']:.0f}",
                    f"{row['ru_maxrss_mb']:.0f}",
                    f"{row['peak_rss_mb'] / base:.3f}",
                ]
            )
        )
    print()
    print(common.machine_line(rows[-1]["environment"]))
    if args.json:
        common.write_json(
            args.json, {"settings": {k: str(v) for k, v in vars(args).items()}, "rows": rows}
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
