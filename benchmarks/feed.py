"""The JAX trainer's feed alone, tokens/s: windows, character ids, candidates, transfer (issue 43).

    python benchmarks/feed.py [--batches 40] [--workers 1 2] [--json benchmarks/results/feed.json]

What the JAX trainer's background thread does per step for the `original` configuration at
128 x 20 (`JaxTrainer._batches` and `candidates`), timed without any training step: a
`WindowPacker` over WikiText-2 train (whitespace tokens, the vocabulary of the text) packs the
next batch (`iter_positions`: the windows of each row; `_materialize`: word ids and the
character ids of both directions), `log_uniform_candidates` draws the step's 8,192 candidates,
and `jax.device_put` copies the five arrays to the default device (a CPU here: a host copy).

Rows of the table: the stages alone in one thread (positions only, positions and materializing,
candidates, transfer), the whole feed in one thread (`WindowPacker.batches` as the trainer runs
it), the same in N threads (each thread materializes every N-th batch of its own packer: the
GIL decides), and in N processes (each process packs every N-th batch of the same stream, as
`batches(skip=...)` can, and sends it back through a pipe; the parent puts it on the device).
A batch is 2,560 positions ("tokens"). The machine line and load average end the table.
"""

import argparse
import multiprocessing
import os
import statistics
import threading
import time

import common

BATCH, STEPS, CHARS = 128, 20, 50
N_CANDIDATES = 8192  # `original`'s n_negative_samples_batch


def _sentences():
    path = common.WIKITEXT_DIR / "train.raw.txt"
    if not path.is_file():
        raise SystemExit(f"needs WikiText-2 train at {path}")
    lines = path.read_text(encoding="utf-8").splitlines()
    return [line.split() for line in lines if line.strip()]


def _packer(sentences, vocabulary):
    from elmo_keras.training.feed.windows import WindowPacker

    return WindowPacker(iter(sentences), vocabulary, BATCH, STEPS, CHARS)


def _rate(seconds, batches):
    return batches * BATCH * STEPS / seconds


def _stage_rates(sentences, vocabulary, batches):
    """Each stage alone, one thread -> {stage: tokens/s}."""
    import jax

    from elmo_keras.models.language_model import log_uniform_candidates

    rates = {}
    start = time.perf_counter()
    for index, _ in enumerate(_packer(sentences, vocabulary).iter_positions()):
        if index + 1 == batches:
            break
    rates["windows (positions only)"] = _rate(time.perf_counter() - start, batches)
    packer = _packer(sentences, vocabulary)
    start = time.perf_counter()
    packed = [b for _, b in zip(range(batches), packer.batches(), strict=False)]
    rates["windows + word and character ids"] = _rate(time.perf_counter() - start, batches)
    start = time.perf_counter()
    for step in range(batches):
        log_uniform_candidates(N_CANDIDATES, len(vocabulary.tokens), (0, step))
    rates["candidates (8,192 a step)"] = _rate(time.perf_counter() - start, batches)
    device = jax.devices()[0]
    start = time.perf_counter()
    for batch in packed:
        jax.block_until_ready([jax.device_put(v, device) for v in batch.values()])
    rates[f"transfer to {device.platform}"] = _rate(time.perf_counter() - start, batches)
    return rates


def _whole_step(batch, step, vocabulary_size, device):
    import jax

    from elmo_keras.models.language_model import log_uniform_candidates

    candidates = log_uniform_candidates(N_CANDIDATES, vocabulary_size, (0, step))
    arrays = [*batch.values(), candidates]
    return jax.block_until_ready([jax.device_put(v, device) for v in arrays])


def _shard(sentences, vocabulary, workers, worker, batches):
    """Every `workers`-th batch of the stream from `worker`, materialized."""
    packer = _packer(sentences, vocabulary)
    for index, rows in enumerate(packer.iter_positions()):
        if index >= batches * workers:
            return
        if index % workers == worker:
            yield index, packer._materialize(rows)


def _threads(sentences, vocabulary, workers, batches):
    import jax

    device = jax.devices()[0]

    def work(worker):
        for index, batch in _shard(sentences, vocabulary, workers, worker, batches):
            _whole_step(batch, index, len(vocabulary.tokens), device)

    threads = [threading.Thread(target=work, args=(w,)) for w in range(workers)]
    start = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return _rate(time.perf_counter() - start, batches * workers)


_SHARED = {}


def _process_work(worker):
    sentences, vocabulary, workers, batches, pipe = (
        _SHARED[k] for k in ("sentences", "vocabulary", "workers", "batches", "pipes")
    )
    from elmo_keras.models.language_model import log_uniform_candidates

    for index, batch in _shard(sentences, vocabulary, workers, worker, batches):
        candidates = log_uniform_candidates(N_CANDIDATES, len(vocabulary.tokens), (0, index))
        pipe[worker].send((index, batch, candidates))
    pipe[worker].send(None)


def _processes(sentences, vocabulary, workers, batches):
    """N forked processes pack; the parent receives and puts every batch on the device."""
    import jax

    device = jax.devices()[0]
    pipes = [multiprocessing.Pipe(duplex=False) for _ in range(workers)]
    _SHARED.update(
        sentences=sentences,
        vocabulary=vocabulary,
        workers=workers,
        batches=batches,
        pipes=[send for _, send in pipes],
    )
    context = multiprocessing.get_context("fork")
    start = time.perf_counter()
    children = [context.Process(target=_process_work, args=(w,)) for w in range(workers)]
    for child in children:
        child.start()
    received, open_pipes = 0, [receive for receive, _ in pipes]
    while open_pipes:
        for receive in list(open_pipes):
            item = receive.recv()
            if item is None:
                open_pipes.remove(receive)
                continue
            _, batch, candidates = item
            jax.block_until_ready(
                [jax.device_put(v, device) for v in (*batch.values(), candidates)]
            )
            received += 1
    seconds = time.perf_counter() - start
    for child in children:
        child.join()
    return _rate(seconds, received)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=40, help="batches per worker and row")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", help="write the results here")
    args = parser.parse_args()
    os.environ.setdefault("KERAS_BACKEND", "jax")
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from elmo_keras.text.vocabulary import Vocabulary

    env = common.environment(with_tensorflow=False)
    env["load_average_at_start"] = os.getloadavg()
    sentences = _sentences()
    vocabulary = Vocabulary.build(sentences)
    print(common.machine_line(env), f"vocabulary {len(vocabulary.tokens)}", flush=True)
    import jax

    device = jax.devices()[0]
    rows = {}
    for r in range(args.rounds):  # interleaved rounds, medians
        for stage, rate in _stage_rates(sentences, vocabulary, args.batches).items():
            rows.setdefault(f"{stage}, 1 thread", []).append(rate)
        start = time.perf_counter()
        packer = _packer(sentences, vocabulary)
        for step, batch in zip(range(args.batches), packer.batches(), strict=False):
            _whole_step(batch, step, len(vocabulary.tokens), device)
        rate = _rate(time.perf_counter() - start, args.batches)
        rows.setdefault("whole feed, 1 thread", []).append(rate)
        for n in args.workers:
            rate = _threads(sentences, vocabulary, n, args.batches)
            rows.setdefault(f"whole feed, {n} threads", []).append(rate)
            rate = _processes(sentences, vocabulary, n, args.batches)
            rows.setdefault(f"whole feed, {n} processes", []).append(rate)
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    env["load_average_at_end"] = os.getloadavg()
    median = {name: statistics.median(values) for name, values in rows.items()}
    one = median["whole feed, 1 processes"] if 1 in args.workers else None
    table_rows = []
    for name, value in median.items():
        scaling = f"{value / one:.2f}" if one and "processes" in name else ""
        table_rows.append([name, f"{value:,.0f}", scaling])
    header = common.table_header(["feed (original, 128 x 20)", "tokens/s", "vs 1 process"])
    table = "\n".join([header, *(common.table_row(r) for r in table_rows)])
    table += (
        f"\n\nMedians of {args.rounds} rounds of {args.batches} batches per worker. "
        f"{common.machine_line(env)}; load average {env['load_average_at_start']} at the start, "
        f"{env['load_average_at_end']} at the end."
    )
    common.publish(table, {"environment": env, "rows": rows, "median": median}, args.json)


if __name__ == "__main__":
    main()
