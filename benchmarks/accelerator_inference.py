"""The inference rows of benchmarks/accelerator.py: the biLM's program at each batch shape,
compiled for all shapes at once, then timed; the FLOP it does per token; the batches.

Imported by accelerator.py (which keeps TensorFlow out of the process and sets the JAX backend
first).
"""

import concurrent.futures
import statistics
import time

import jax
import numpy as np

from elmo_keras.text.char_ids import distinct_token_ids

TOKENS = 20  # tokens per synthetic sentence


def flop_per_token(bilm):
    """Dense FLOP (2 per multiply-add) per real token: char CNN, highways, projection, LSTMs."""
    chars, dim = bilm.max_characters_per_token, bilm.char_embedding_dim
    filters = sum(n for _, n in bilm.filters)
    cnn = sum((chars - w + 1) * w * dim * n for w, n in bilm.filters) * 2
    cnn += bilm.n_highway * 2 * filters * 2 * filters + 2 * filters * bilm.projection_dim
    p, u = bilm.projection_dim, bilm.lstm_units
    return cnn + 2 * bilm.n_layers * 2 * (2 * p * 4 * u + u * p)


def jitted(bilm):
    def run(trainable, non_trainable, inputs):
        outputs, _ = bilm.stateless_call(trainable, non_trainable, inputs, training=False)
        return outputs

    trainable = [v.value for v in bilm.trainable_variables]
    return jax.jit(run), trainable, [v.value for v in bilm.non_trainable_variables]


def synthetic_batch(rows, rng, vocabulary):
    """`rows` sentences of 20 Zipf-drawn words (distinct per batch, as real text repeats)."""
    ranks = np.minimum(rng.zipf(1.2, size=(rows, TOKENS)), len(vocabulary)) - 1
    return [[vocabulary[r] for r in row] for row in ranks]


def natural_batch(path, rows):
    """The first `rows` sentences of WikiText-2 (split at ' . '), natural lengths."""
    sentences = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("="):
            continue
        for part in line.split(" . "):
            tokens = part.split()
            if tokens:
                sentences.append(tokens)
            if len(sentences) == rows:
                return sentences
    return sentences


def compile_rows(bilm, workloads, precision, threads):
    """Every workload's program for `bilm`, compiled before any is timed, `threads` at a time
    (XLA compiles outside Python's lock, so a machine's cores compile several shapes at once;
    one shape took 13-30 s on an H200) -> `{workload: (program, inputs, seconds, tokens)}`."""
    run, trainable, non_trainable = jitted(bilm)

    def compile_one(item):
        name, sentences = item
        ids, index = distinct_token_ids(sentences, bilm.max_characters_per_token)
        inputs = {"token_char_ids": ids, "token_index": index}
        start = time.perf_counter()
        with jax.default_matmul_precision(precision):  # a thread's own setting
            program = run.lower(trainable, non_trainable, inputs).compile()
        tokens = sum(len(s) for s in sentences)
        return name, (program, inputs, time.perf_counter() - start, tokens)

    with concurrent.futures.ThreadPoolExecutor(max(1, threads)) as pool:
        return dict(pool.map(compile_one, workloads)), trainable, non_trainable


def time_calls(program, trainable, non_trainable, inputs, calls):
    """The median seconds of `calls` calls of a compiled program (after one untimed call)."""
    jax.block_until_ready(program(trainable, non_trainable, inputs))
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        jax.block_until_ready(program(trainable, non_trainable, inputs))
        times.append(time.perf_counter() - start)
    return statistics.median(times)
