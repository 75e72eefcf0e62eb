"""The JAX trainer's feed alone, tokens/s: windows, character ids, candidates, transfer (issue 43).

    python benchmarks/feed.py [--batches 200] [--old-batches 20] [--stream-batches 800]
        [--workers 1 2] [--rounds 3] [--json benchmarks/results/feed.json]

What the JAX trainer's background thread does per step for the `original` configuration at
128 x 20 (`JaxTrainer._batches` and `candidates`), timed without any training step, over
WikiText-2 train (whitespace tokens held as lists, the vocabulary of the text):

- the packing before issue 43 (`WindowPacker` of commit `OLD_COMMIT`, loaded from git: one
  50-id row assigned per token and direction) against today's (`WindowPacker`: one planner
  thread, character ids by gathers from the vocabulary's table, `workers` materializing threads);
- the same packing of sentences given as word ids (what the processes of
  `SentenceStream(vocabulary=..., workers=N)` send back: the parent's share of the work);
- today's stages alone: the planner (windows, each sentence's word ids and table rows, the
  blocks of each window) and the materializing (the gathers), one thread each;
- upstream, the sentence stream the trainer reads (`SentenceStream` of the same file, whitespace
  tokenizing, whole-text shuffle), and downstream the step's 8,192 candidates and
  `jax.device_put` of the batch (a CPU here: a host copy);
- the whole feed: packing (inline, and with the default workers), candidates and transfer, one
  after another; and the trainer's feed: the same, packing the sentences as the stream reads
  them, as token lists (today's trainer) or as word ids (`SentenceStream(vocabulary=...,
  workers=N)`: lines tokenized and looked up in N processes, 0: inline).

Rounds interleave the contenders (A B A B ...); the table has medians. A batch is 2,560
positions ("tokens"). The machine line and the load average end the table.
"""

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time

import common

BATCH, STEPS, CHARS = 128, 20, 50
N_CANDIDATES = 8192  # `original`'s n_negative_samples_batch
OLD_COMMIT = "5b945be"  # the parent of issue 43's feed: `_materialize` one token at a time
WINDOWS = "elmo_keras/training/feed/windows.py"


def _sentences():
    path = common.WIKITEXT_DIR / "train.raw.txt"
    if not path.is_file():
        raise SystemExit(f"needs WikiText-2 train at {path}")
    lines = path.read_text(encoding="utf-8").splitlines()
    return path, [line.split() for line in lines if line.strip()]


def _old_packer_class():
    """The `WindowPacker` of `OLD_COMMIT`, or None where git cannot show it."""
    try:
        source = subprocess.run(
            ["git", "show", f"{OLD_COMMIT}:{WINDOWS}"],
            cwd=common.REPO,
            capture_output=True,
            check=True,
            text=True,
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    spec = importlib.util.spec_from_loader("old_windows", loader=None)
    module = importlib.util.module_from_spec(spec)
    exec(compile(source, f"{OLD_COMMIT}:{WINDOWS}", "exec"), module.__dict__)  # noqa: S102
    return module.WindowPacker


def _encoded(sentences, vocabulary):
    """`sentences` as the worker processes of `SentenceStream(vocabulary=...)` send them."""
    from elmo_keras.training.feed import encoded_sentence

    lines = [" ".join(sentence) for sentence in sentences]
    word_ids = {token: i for i, token in enumerate(vocabulary.tokens)}
    chunk = encoded_sentence._encode_chunk(lines, "whitespace", word_ids, "jax")
    return encoded_sentence._sentences(chunk)


def _rate(seconds, batches):
    return batches * BATCH * STEPS / seconds


def _timed_batches(iterator, batches, each=None):
    """Tokens/s of taking `batches` items after the first (which starts threads, tables)."""
    next(iterator)
    start = time.perf_counter()
    for step, item in zip(range(batches), iterator, strict=False):
        if each is not None:
            each(item, step)
    rate = _rate(time.perf_counter() - start, batches)
    iterator.close()
    return rate


def _contenders(path, sentences, vocabulary, args):
    """name -> callable returning tokens/s (one measurement)."""
    import jax

    from elmo_keras.models.language_model import log_uniform_candidates
    from elmo_keras.training.feed.data import SentenceStream
    from elmo_keras.training.feed.windows import WindowPacker, default_workers

    device = jax.devices()[0]
    old = _old_packer_class()
    n = args.batches

    def packer(workers):
        return WindowPacker(iter(sentences), vocabulary, BATCH, STEPS, CHARS, workers=workers)

    def planner():
        p = packer(0)
        return _timed_batches((p._plan(rows) for rows in p.iter_positions()), n)

    def materializing():
        p = packer(0)
        positions = zip(range(n + 1), p.iter_positions(), strict=False)
        plans = [p._plan(rows) for _, rows in positions]
        return _timed_batches((p._materialize((0, plan)) for plan in plans), n)

    def stream():
        sentences = iter(SentenceStream(str(path), "whitespace", seed=0, epochs=None))
        start, tokens = time.perf_counter(), 0
        while tokens < n * BATCH * STEPS:
            tokens += len(next(sentences)) + 1  # a sentence's positions: its tokens and </S>
        return tokens / (time.perf_counter() - start)

    def candidates():
        start = time.perf_counter()
        for step in range(n):
            log_uniform_candidates(N_CANDIDATES, len(vocabulary.tokens), (0, step))
        return _rate(time.perf_counter() - start, n)

    def transfer():
        batch = next(packer(0).batches())
        start = time.perf_counter()
        for _ in range(n):
            jax.block_until_ready([jax.device_put(v, device) for v in batch.values()])
        return _rate(time.perf_counter() - start, n)

    def whole(batch, step):
        drawn = log_uniform_candidates(N_CANDIDATES, len(vocabulary.tokens), (0, step))
        jax.block_until_ready([jax.device_put(v, device) for v in (*batch.values(), drawn)])

    rows = {}
    if old is not None:
        rows["packing before issue 43, 1 thread"] = lambda: _timed_batches(
            old(iter(sentences), vocabulary, BATCH, STEPS, CHARS).batches(), args.old_batches
        )
    rows["packing, 0 workers (all in 1 thread)"] = lambda: _timed_batches(packer(0).batches(), n)
    for w in args.workers:
        rows[f"packing, {w} workers"] = lambda w=w: _timed_batches(packer(w).batches(), n)
    encoded = _encoded(sentences, vocabulary)
    rows["packing sentences as word ids (from the processes), 0 workers"] = lambda: _timed_batches(
        WindowPacker(iter(encoded), vocabulary, BATCH, STEPS, CHARS, 0).batches(), n
    )
    rows["planner alone, 1 thread"] = planner
    rows["materializing alone, 1 thread"] = materializing
    rows["sentence stream (SentenceStream, whitespace, shuffled)"] = stream
    rows["candidates (8,192 a step), 1 thread"] = candidates
    rows[f"transfer to {device.platform}, 1 thread"] = transfer
    for w in sorted({0, default_workers()}):
        rows[f"whole feed: packing ({w} workers), candidates, transfer"] = lambda w=w: (
            _timed_batches(packer(w).batches(), n, whole)
        )

    def trainer_feed(processes=None):  # the stream read as the packer packs (`JaxTrainer`)
        encoded = {} if processes is None else {"vocabulary": vocabulary, "workers": processes}
        stream = SentenceStream(str(path), "whitespace", seed=0, epochs=None, **encoded)
        p = WindowPacker(stream, vocabulary, BATCH, STEPS, CHARS)
        return _timed_batches(p.batches(), args.stream_batches, whole)

    rows["trainer's feed: the sentence stream, then the whole feed"] = trainer_feed
    for w in (0, *args.workers):
        rows[f"trainer's feed, lines encoded in {w} processes"] = lambda w=w: trainer_feed(w)
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=200, help="batches a measurement")
    parser.add_argument("--old-batches", type=int, default=20, help="for the old packing")
    parser.add_argument(
        "--stream-batches", type=int, default=800, help="for the trainer's feed (chunks ahead)"
    )
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="threads, processes")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    os.environ.setdefault("KERAS_BACKEND", "jax")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from elmo_keras.text.vocabulary import Vocabulary

    env = common.environment(with_tensorflow=False)
    env["load_average_at_start"] = os.getloadavg()
    path, sentences = _sentences()
    vocabulary = Vocabulary.build(sentences)
    print(common.machine_line(env), f"vocabulary {len(vocabulary.tokens)}", flush=True)
    contenders = _contenders(path, sentences, vocabulary, args)
    rows = {}
    for r in range(args.rounds):  # interleaved rounds, medians
        for name, measure in contenders.items():
            rows.setdefault(name, []).append(measure())
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    env["load_average_at_end"] = os.getloadavg()
    median = {name: statistics.median(values) for name, values in rows.items()}
    old = median.get("packing before issue 43, 1 thread")
    table_rows = []
    for name, value in median.items():
        speedup = f"{value / old:.1f}x" if old and name.startswith("packing") else ""
        table_rows.append([name, f"{value:,.0f}", speedup])
    header = common.table_header(["feed (original, 128 x 20)", "tokens/s", "vs before"])
    table = "\n".join([header, *(common.table_row(r) for r in table_rows)])
    table += (
        f"\n\nMedians of {args.rounds} interleaved rounds of {args.batches} batches "
        f"({args.old_batches} for the packing before issue 43, {args.stream_batches} for "
        f"the trainer's feed). `{' '.join(sys.argv)}`. "
        f"{common.machine_line(env)}; load average {env['load_average_at_start']} at the "
        f"start, {env['load_average_at_end']} at the end."
    )
    common.publish(table, {"environment": env, "rows": rows, "median": median}, args.json)


if __name__ == "__main__":
    main()
