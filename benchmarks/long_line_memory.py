#!/usr/bin/env python
"""Peak memory of the training stream on one very long line (issue 39, point 6).

One line of `--tokens` words (no line end inside; a one-line corpus, as text8 is) is written to
a temporary file; a fresh Python process packs `--batches` batches of `--batch-size` rows x
`--unroll-steps` from it (`SentenceStream` with the whole-text shuffle, `WindowPacker`: what
both trainers feed the model) and prints its peak RSS (`VmHWM`) and the seconds taken. With
one line and `epochs=None`, every row of the batch holds the line (each from its own epoch).

    KERAS_BACKEND=jax python benchmarks/long_line_memory.py --tokens 5000000
    /usr/bin/time -v python benchmarks/long_line_memory.py --tokens 1000000 --child FILE

Before the streamed long lines, each row held a tokenized copy of the line (one 10M-token line
at batch 16: 13.8 GB); now a row holds about one 64 KiB piece of it per direction. Measured
2026-11-28 on the shared 2-core host, JAX backend (`tokenize_python`), 3 batches of 16 x 20,
`/usr/bin/time -v` on the child's work (the parent revision run from a copy of its package):

| tokens in the line | before: peak RSS, seconds | after: peak RSS, seconds |
|---|---|---|
| 1,000,000 (4.2 MB) | 1,530 MB, 21.8 s | 337 MB, 1.7 s |
| 5,000,000 (21 MB) | 6,343 MB, 106 s | 331 MB, 6.3 s |

About 320 MB of "after" is Python, NumPy, Keras and JAX themselves. (`common` puts this
checkout first on `sys.path`: compare revisions with `benchmarks/revisions.py`.)
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import common


def _child(path, batch_size, unroll_steps, batches):
    """Runs in the fresh process: packs the batches; prints one JSON line."""
    from elmo_keras.text.vocabulary import Vocabulary
    from elmo_keras.training.feed.data import SentenceStream, WindowPacker
    from elmo_keras.training.feed.tokenization import tokenize_lines

    tokenize_lines(["the tokenizer loaded before the clock starts"])
    vocabulary = Vocabulary(["<S>", "</S>", "<UNK>", "the", "of", "and", "a", "in"])
    start = time.perf_counter()
    stream = SentenceStream(path, seed=0, epochs=None)
    packed = WindowPacker(stream, vocabulary, batch_size, unroll_steps).batches()
    for _ in range(batches):
        next(packed)
    seconds = time.perf_counter() - start
    print(json.dumps({"peak_rss_mb": common.peak_rss_mb(), "seconds": seconds}))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tokens", type=int, default=5_000_000)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--unroll-steps", type=int, default=20)
    parser.add_argument("--batches", type=int, default=3)
    parser.add_argument("--child", metavar="FILE", help="(internal) pack from FILE, print JSON")
    args = parser.parse_args()
    sizes = (args.batch_size, args.unroll_steps, args.batches)
    if args.child:
        _child(args.child, *sizes)
        return
    words = ["the", "of", "and", "a", "in", "to", "was", "stream", "window", "line"]
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "one_line.txt")
        with open(path, "w", encoding="utf-8") as f:
            for start in range(0, args.tokens, 100_000):
                count = min(100_000, args.tokens - start)
                f.write(" ".join(words[i % len(words)] for i in range(start, start + count)))
                f.write(" ")
            f.write("\n")
        size = os.path.getsize(path)
        command = [sys.executable, __file__, "--child", path, "--batch-size", str(sizes[0])]
        command += ["--unroll-steps", str(sizes[1]), "--batches", str(sizes[2])]
        result = json.loads(
            subprocess.run(command, check=True, capture_output=True, text=True)
            .stdout.strip()
            .splitlines()[-1]
        )
    print("| tokens in the line | bytes | batch | batches | peak RSS (MB) | seconds |")
    print("|---|---|---|---|---|---|")
    print(
        f"| {args.tokens:,} | {size:,} | {sizes[0]} | {sizes[2]} | "
        f"{result['peak_rss_mb']:.0f} | {result['seconds']:.1f} |"
    )


if __name__ == "__main__":
    main()
