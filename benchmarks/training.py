"""Training throughput on this machine: tokens/s per configuration, sampled vs full softmax.

For each configuration and softmax, `Trainer` steps (forward, backward, clipping, optimizer
update) are timed one by one on real WikiText-2 windows (the bilm-tf fixture corpus where
WikiText-2 is absent) after one warm-up step that traces the graph (and compiles it, with
`--xla`); the table quotes the median step. "softmax share" is the median time of the softmax's
forward and backward pass alone (both directions, same hidden-state shapes) over the median
step. "peak MB" is the resident-set high-water mark during that row (reset before it, Linux
`clear_refs`), the weights, the optimizer slots and the TF runtime included. "vs full" is the
row's speed over the full-softmax row of the same configuration.

    python benchmarks/training.py [--configs tiny small original] [--batch-size 16] [--xla]
        [--json benchmarks/results/training.json]
"""

import argparse
import gc
import json
import os
import pathlib
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

from inference import _maxrss_mb, _reset_peak_rss  # noqa: E402  (VmHWM, clear_refs)

ROOT = pathlib.Path(__file__).resolve().parents[1]
STEPS = {"tiny": 20, "cpu": 10, "small": 5, "medium": 3, "original": 3}


def _data():
    wikitext = ROOT.parent / "shared" / "data" / "wikitext-2" / "train.raw.txt"
    if wikitext.is_file():
        return str(wikitext)
    return str(ROOT / "tests" / "fixtures" / "bilm_tf" / "train" / "data.txt")


def _vocabulary(size):
    from elmo_keras.text.vocabulary import Vocabulary
    from elmo_keras.training.data import build_vocabulary

    vocab = build_vocabulary(_data(), max_size=size)
    extra = [f"<filler{i}>" for i in range(size - len(vocab))]  # tiny corpora: pad to `size`
    return Vocabulary(list(vocab.tokens) + extra)


def bench(name, vocabulary, batch_size, samples, steps, jit_compile=False):
    import keras
    import tensorflow as tf

    from elmo_keras.training.configs import get_config
    from elmo_keras.training.data import SentenceStream, WindowPacker
    from elmo_keras.training.trainer import Trainer

    gc.collect()
    keras.backend.clear_session()  # the previous row's graphs and weights
    _reset_peak_rss()
    config = get_config(name)
    config.update(batch_size=batch_size, n_negative_samples_batch=samples, dropout=0.1)
    trainer = Trainer(config, vocabulary, seed=0, jit_compile=jit_compile)
    packer = WindowPacker(SentenceStream(_data(), shuffle=False), vocabulary, batch_size,
                          config["unroll_steps"], config["char_cnn"]["max_characters_per_token"])
    batches = iter(packer)
    step_fn = trainer._make_train_step()
    strategy = trainer.strategy

    def run_step():
        batch = {k: tf.constant(v) for k, v in next(batches).items()}
        return [float(x) for x in step_fn(batch)[:4]]

    run_step()  # trace
    times, tokens = [], []
    for _ in range(steps):
        started = time.perf_counter()
        tokens.append(run_step()[2])
        times.append(time.perf_counter() - started)
    step_seconds = statistics.median(times)
    tokens_per_step = statistics.median(tokens)

    model = trainer.model
    dim = model.projection_dim
    hidden = tf.random.normal([batch_size, config["unroll_steps"], dim])
    targets = tf.random.uniform([batch_size, config["unroll_steps"]], 0, len(vocabulary),
                                tf.int32)
    mask = tf.ones_like(targets, tf.bool)
    seed = tf.constant([0, 1], tf.int64)

    @tf.function(jit_compile=jit_compile)
    def softmax_only(hidden):
        with tf.GradientTape() as tape:
            tape.watch(hidden)
            loss = 0.0
            for _ in range(2):  # both directions
                loss += tf.reduce_sum(model.token_losses(
                    hidden, targets, mask, seed if samples else None))
        grads = tape.gradient(loss, [hidden, model.softmax_kernel, model.softmax_bias])
        return [tf.reduce_sum(tf.convert_to_tensor(g)) for g in grads]

    del strategy
    softmax_only(hidden)
    softmax_times = []
    for _ in range(steps):
        started = time.perf_counter()
        [float(x) for x in softmax_only(hidden)]
        softmax_times.append(time.perf_counter() - started)
    return {
        "config": name,
        "softmax": "sampled" if samples else "full",
        "xla": bool(jit_compile),
        "steps": steps,
        "tokens_per_second": tokens_per_step / step_seconds,
        "step_seconds": step_seconds,
        "softmax_share": statistics.median(softmax_times) / step_seconds,
        "peak_rss_mb": _maxrss_mb(),
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["tiny", "small", "original"])
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--vocabulary-size", type=int, default=33278)
    parser.add_argument("--samples", type=int, default=8192)
    parser.add_argument("--steps", type=int, help="timed steps per row (default: per config)")
    parser.add_argument("--xla", action="store_true", help="also time each row under XLA")
    parser.add_argument("--json", type=pathlib.Path, help="write the rows here")
    args = parser.parse_args()
    import tensorflow as tf

    vocabulary = _vocabulary(args.vocabulary_size)
    print(f"batch {args.batch_size} x 20 tokens, vocabulary {len(vocabulary)}, sampled softmax "
          f"{args.samples} candidates; data {_data()}; TF {tf.__version__}, "
          f"{os.cpu_count()} CPUs; medians")
    print(f"| config | softmax | XLA | steps | s/step | tokens/s | vs full | softmax share "
          f"| peak MB |\n|---|---|---|---|---|---|---|---|---|", flush=True)
    rows = []
    for name in args.configs:
        steps = args.steps or STEPS[name]
        for xla in (False, True) if args.xla else (False,):
            pair = [bench(name, vocabulary, args.batch_size, samples, steps, xla)
                    for samples in (args.samples, 0)]
            for row in pair:
                row["vs_full"] = row["tokens_per_second"] / pair[1]["tokens_per_second"]
                rows.append(row)
                print(f"| {name} | {row['softmax']} | {'yes' if xla else 'no'} | {steps} | "
                      f"{row['step_seconds']:.3f} | {row['tokens_per_second']:.0f} | "
                      f"{row['vs_full']:.2f}x | {row['softmax_share']:.0%} | "
                      f"{row['peak_rss_mb']:.0f} |", flush=True)
    if args.json:
        args.json.write_text(json.dumps(
            {"batch_size": args.batch_size, "vocabulary": len(vocabulary),
             "samples": args.samples, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
