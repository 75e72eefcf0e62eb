#!/usr/bin/env python
"""`ElmoEmbedding(vocab_to_cache=...)` against the char CNN path on WikiText-2 valid: speed
and equality, measured in one run.

    nice -n 10 python benchmarks/word_cache.py --json benchmarks/results/word_cache.json \
        --markdown benchmarks/results/word_cache.md
    python benchmarks/word_cache.py --configs mini_en --sentences 100 --rounds 3

The text: the first `--sentences` sentences of WikiText-2 valid (../shared/data/wikitext-2/
valid.raw.txt, split after . ? !), in batches of `--batch-size` in file order; the cache holds
every distinct token of that text (plus the padding entry 0), built once (its time is reported
apart). Two models (`--configs`): `mini_en`, the packaged trained biLM (a small char CNN: 384
filters, 1 highway layer; LSTM 512, projection 128), and `small-random`, the architecture of
AllenNLP's published `small` model (the published char CNN: 2048 filters, 1 highway layer;
LSTM 1024, projection 128) with seeded random weights, where the char CNN is most of the work.
Two layers around the same biLM, dropout 0, one mix:

- char CNN: `input_type="char_ids"` (character ids made before timing); on TensorFlow at
  inference the biLM runs the char CNN once per distinct token of each batch;
- cache: `vocab_to_cache=...`, word ids made before timing; the char CNN never runs for words.

Each is one `tf.function` with a `[None, None(, 50)]` signature (traced before timing). The
rounds alternate the order of the two; tokens/s is over the whole text per round, the table
shows the median over rounds and the ratio of the medians, measured in the same run.

Equality: the largest absolute difference between the two over every position (padding is
zero in both), beside the char CNN path's own round-off: the same text in batches of 8 against
batches of 32 (float32 sums in another order). The check: at most 1e-6 times the largest
|value| (float32 round-off), and the absolute number is printed.

The host is shared (2 cores, other engineers' jobs): the load average is printed at the start
and the end, so read the ratio rather than the absolute speeds.
"""

import argparse
import os
import pathlib
import statistics
import sys
import time

import common

common.prefer_onednn()

TOLERANCE = 1e-6


def _arguments():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS), help="models"
    )
    parser.add_argument("--sentences", type=int, help="sentences timed (default: per model)")
    parser.add_argument("--batch-size", type=int, default=32, help="sentences per batch (32)")
    parser.add_argument("--rounds", type=int, help="timed rounds of each path (default: per model)")
    parser.add_argument("--json", type=pathlib.Path, help="write the results here")
    parser.add_argument("--markdown", type=pathlib.Path, help="write the table here")
    return parser.parse_args()


# name: (sentences, rounds) sized for about two minutes in all on two shared cores
CONFIGS = {"mini_en": (400, 5), "small-random": (200, 3)}


def _bilm(config):
    from elmo_keras.models import BiLM

    if config == "mini_en":
        return BiLM.from_preset("mini_en")
    import keras

    keras.utils.set_random_seed(0)
    bilm = BiLM(lstm_units=1024, projection_dim=128, n_highway=1)  # the published char CNN
    bilm.build()
    return bilm


def _valid_sentences():
    valid = common.WIKITEXT_VALID
    if not valid.is_file():  # elmo_keras.data: $ELMO_KERAS_DATA, the cache, a pinned download
        from elmo_keras.data import wikitext2

        valid = wikitext2()["valid"]
    return common._wikitext_sentences((valid,)), valid


def _functions(plain, cached, width):
    import tensorflow as tf

    run_plain = tf.function(
        lambda ids: plain(ids, training=False),
        input_signature=[tf.TensorSpec([None, None, width], tf.int32)],
    )
    run_cached = tf.function(
        lambda ids: cached(ids, training=False),
        input_signature=[tf.TensorSpec([None, None], tf.int32)],
    )
    return run_plain, run_cached


def _max_difference(first, second):
    worst = 0.0
    for a, b in zip(first, second, strict=True):
        worst = max(worst, float(abs(a - b).max()))
    return worst


def _outputs(run, batches):
    import numpy as np

    return [np.asarray(run(batch)) for batch in batches]


def measure(config, args, stream):
    import numpy as np

    from elmo_keras.models import ElmoEmbedding
    from elmo_keras.text import batch_to_char_ids

    n_sentences, n_rounds = CONFIGS[config]
    text = stream[: args.sentences or n_sentences]
    rounds = args.rounds or n_rounds
    vocab = ["@@PADDING@@"] + sorted({token for sentence in text for token in sentence})
    tokens = sum(len(s) for s in text)
    bilm = _bilm(config)
    plain = ElmoEmbedding(bilm, dropout=0.0)
    cached = ElmoEmbedding(bilm, dropout=0.0, vocab_to_cache=vocab)
    start = time.perf_counter()
    cached.build()
    build_seconds = time.perf_counter() - start
    size = args.batch_size
    batches = [text[i : i + size] for i in range(0, len(text), size)]
    char_inputs = [batch_to_char_ids(batch) for batch in batches]
    word_inputs = [cached.word_ids(batch) for batch in batches]
    run_plain, run_cached = _functions(plain, cached, bilm.max_characters_per_token)

    # Equality and the char path's own round-off, before any timing (this traces both).
    want = _outputs(run_plain, char_inputs)
    worst = _max_difference(want, _outputs(run_cached, word_inputs))
    eights = []
    for batch in batches:
        parts = [
            _outputs(run_plain, [batch_to_char_ids(batch[i : i + 8])])[0]
            for i in range(0, len(batch), 8)
        ]
        width = max(p.shape[1] for p in parts)
        eights.append(
            np.concatenate([np.pad(p, ((0, 0), (0, width - p.shape[1]), (0, 0))) for p in parts])
        )
    floor = _max_difference(want, eights)
    scale = max(float(abs(w).max()) for w in want)
    paths = {"char CNN": (run_plain, char_inputs), "cache": (run_cached, word_inputs)}
    speeds = {name: [] for name in paths}
    for round_index in range(rounds):
        for name in common.rotated(list(paths), round_index):
            run, inputs = paths[name]
            start = time.perf_counter()
            _outputs(run, inputs)
            speeds[name].append(tokens / (time.perf_counter() - start))
    medians = {name: statistics.median(values) for name, values in speeds.items()}
    return {
        "config": config,
        "sentences": len(text),
        "tokens": tokens,
        "vocab_to_cache": len(vocab),
        "cache_build_seconds": build_seconds,
        "rounds": rounds,
        "tokens_per_second": speeds,
        "median_tokens_per_second": medians,
        "ratio_cache_over_char_cnn": medians["cache"] / medians["char CNN"],
        "max_abs_difference": worst,
        "char_path_batch_8_vs_32": floor,
        "max_abs_value": scale,
    }


def main():
    args = _arguments()
    load_start = os.getloadavg()
    stream, source = _valid_sentences()
    rows = [measure(config, args, stream) for config in args.configs]
    env = common.environment()
    results = {
        "text": f"{source}, first sentences in file order",
        "batch_size": args.batch_size,
        "rows": rows,
        "load_average_start_end": [load_start[0], os.getloadavg()[0]],
        "environment": env,
    }
    table = _table(results, env)
    common.publish(table, results, args.json, args.markdown)
    for row in rows:
        if row["max_abs_difference"] > TOLERANCE * max(1.0, row["max_abs_value"]):
            sys.exit(f"{row['config']}: the cache differs by {row['max_abs_difference']:.2e}")


def _table(results, env):
    lines = [
        f"`vocab_to_cache` against the char CNN path on {results['text']} (WikiText-2 valid), "
        f"batches of {results['batch_size']}, medians of alternating rounds in one run.",
        "",
        common.table_header(
            [
                "model",
                "text",
                "char CNN tokens/s",
                "cache tokens/s",
                "ratio",
                "each round (char CNN; cache)",
                "max abs diff",
                "char path 8 vs 32",
                "cache build",
            ]
        ),
    ]
    for row in results["rows"]:
        speeds, medians = row["tokens_per_second"], row["median_tokens_per_second"]
        each = "; ".join(", ".join(f"{v:.0f}" for v in speeds[k]) for k in ("char CNN", "cache"))
        lines.append(
            common.table_row(
                [
                    row["config"],
                    f"{row['sentences']} sentences, {row['tokens']} tokens",
                    f"{medians['char CNN']:.0f}",
                    f"{medians['cache']:.0f}",
                    f"**{row['ratio_cache_over_char_cnn']:.2f}x**",
                    each,
                    f"{row['max_abs_difference']:.1e} (values up to {row['max_abs_value']:.1f})",
                    f"{row['char_path_batch_8_vs_32']:.1e}",
                    f"{row['vocab_to_cache']} words, {row['cache_build_seconds']:.1f} s",
                ]
            )
        )
    load = results["load_average_start_end"]
    lines += [
        "",
        "Ratio: the cache's median over the char CNN path's, measured in the same run. "
        "Max abs diff: cache against char CNN over every position; char path 8 vs 32: the char "
        "CNN path against itself with other batches (its own float32 round-off).",
        f"Shared host (2 cores, other engineers' jobs running): load average {load[0]:.1f} at "
        f"the start, {load[1]:.1f} at the end; the absolute speeds vary from round to round.",
        common.machine_line(env),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
