#!/usr/bin/env python
"""What the training stream's shuffles cost: `SentenceStream` epochs with no shuffle, through the
10,000-line buffer, and over the whole text (the line index), each in a fresh process.

    nice -n 10 python benchmarks/sentence_stream.py --copies 4 \
        --json benchmarks/results/sentence_stream.json \
        --markdown benchmarks/results/sentence_stream.md
    python benchmarks/sentence_stream.py --copies 1 --rounds 1      # smoke

The text is WikiText-2 train (`../shared/data/wikitext-2/train.raw.txt`, or `--text`) written
`--copies` times into one temporary file. Each round runs every mode in a fresh Python process
(the modes rotate between rounds) on the JAX backend's tokenizer (`tokenize_python`, the same in
every mode, so the differences are the reading and the shuffle); a process times its first epoch
(for the whole-text shuffle this includes building the index) and a second one, and reports its
peak RSS. Tokens/s are medians over rounds, the ratio is against the unshuffled stream of the
same round. The trainer on this machine consumes about 1,000-100,000 tokens/s (CPU to GPU,
docs/training.md), far below any row here.
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

MODES = {"none": (False, 0), "buffer 10,000": (True, 10_000), "whole text": (True, 0)}
REPO = pathlib.Path(__file__).resolve().parents[1]
WIKITEXT_TRAIN = common.WIKITEXT_DIR / "train.raw.txt"


def _child(mode, path):
    """Runs in the fresh process: two epochs of `mode`; prints one JSON line."""
    from elmo_keras.training.feed.data import SentenceStream
    from elmo_keras.training.feed.tokenization import tokenize_lines

    tokenize_lines(["the backend and tokenizer loaded before the clock starts"])
    shuffle, buffer = MODES[mode]
    stream = SentenceStream(path, shuffle=shuffle, shuffle_buffer=buffer, seed=0, epochs=2)
    seconds, tokens, epoch, start = [0.0, 0.0], [0, 0], 0, time.perf_counter()
    for sentence in stream:
        if stream.epoch != epoch:
            seconds[epoch] = time.perf_counter() - start
            epoch, start = stream.epoch, time.perf_counter()
        tokens[epoch] += len(sentence)
    seconds[epoch] = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "tokens": tokens, "peak_rss_mb": common.peak_rss_mb()}))


def _run(mode, path):
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(REPO)}
    command = [sys.executable, __file__, "--child", mode, str(path)]
    out = subprocess.run(command, env=env, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def _arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--text", default=str(WIKITEXT_TRAIN), help="the text (WikiText-2 train)")
    parser.add_argument("--copies", type=int, default=4, help="copies of it in the file (4)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (3)")
    parser.add_argument("--json", help="write the results here")
    parser.add_argument("--markdown", help="write the table here")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    return parser.parse_args()


def main():
    args = _arguments()
    if args.child:
        return _child(*args.child)
    text = pathlib.Path(args.text).read_text(encoding="utf-8")
    runs = {mode: [] for mode in MODES}
    with tempfile.TemporaryDirectory() as folder:
        path = pathlib.Path(folder) / "train.txt"
        path.write_text(text * args.copies, encoding="utf-8")
        size_mb = path.stat().st_size / 1e6
        for round_index in range(args.rounds):
            for mode in common.rotated(list(MODES), round_index):
                runs[mode].append(_run(mode, path))
    lines = sum(1 for line in text.splitlines() if line.strip()) * args.copies
    rows = []
    for mode, results in runs.items():
        rates = [[r["tokens"][e] / r["seconds"][e] for r in results] for e in (0, 1)]
        rows.append(
            {
                "mode": mode,
                "tokens": results[0]["tokens"][0],
                "first_epoch_tokens_per_s": statistics.median(rates[0]),
                "second_epoch_tokens_per_s": statistics.median(rates[1]),
                "peak_rss_mb": statistics.median(r["peak_rss_mb"] for r in results),
            }
        )
    base = rows[0]
    table = common.table_header(
        ["stream", "tokens/epoch", "1st epoch tok/s", "2nd epoch tok/s", "ratio", "peak RSS MB"]
    )
    for row in rows:
        row["ratio_second_epoch"] = (
            row["second_epoch_tokens_per_s"] / base["second_epoch_tokens_per_s"]
        )
        table += "\n" + common.table_row(
            [
                row["mode"],
                f"{row['tokens']:,}",
                f"{row['first_epoch_tokens_per_s']:,.0f}",
                f"{row['second_epoch_tokens_per_s']:,.0f}",
                f"{row['ratio_second_epoch']:.2f}x",
                f"{row['peak_rss_mb']:.0f}",
            ]
        )
    env = common.environment(with_tensorflow=False)
    table += (
        f"\n\n{args.copies} x WikiText-2 train: {size_mb:.0f} MB, {lines:,} non-empty lines; "
        f"medians of {args.rounds} round(s), a fresh process per mode and round.\n"
        + common.machine_line(env)
    )
    common.publish(
        table, {"rows": rows, "environment": env, "copies": args.copies}, args.json, args.markdown
    )


if __name__ == "__main__":
    sys.exit(main())
