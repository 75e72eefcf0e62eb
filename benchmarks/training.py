"""Training throughput on this machine: tokens/s per configuration, sampled vs full softmax.

For each configuration, one `Trainer` step (forward, backward, clipping, Adagrad update) is
timed on real WikiText-2 windows (the bilm-tf fixture corpus where WikiText-2 is absent), after
one warm-up step that traces the graph; "softmax share" is the time of the softmax's forward and
backward pass alone (same hidden-state shapes) over the time of a whole step.

    python benchmarks/training.py [--configs tiny small original] [--batch-size 16]
"""

import argparse
import os
import pathlib
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")

ROOT = pathlib.Path(__file__).resolve().parents[1]
STEPS = {"tiny": 20, "cpu": 5, "small": 3, "medium": 2, "original": 2}


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


def bench(name, vocabulary, batch_size, samples, steps):
    import tensorflow as tf

    from elmo_keras.training.configs import get_config
    from elmo_keras.training.data import SentenceStream, WindowPacker
    from elmo_keras.training.trainer import Trainer

    config = get_config(name)
    config.update(batch_size=batch_size, n_negative_samples_batch=samples, dropout=0.1)
    trainer = Trainer(config, vocabulary, seed=0)
    packer = WindowPacker(SentenceStream(_data(), shuffle=False), vocabulary, batch_size,
                          config["unroll_steps"], config["char_cnn"]["max_characters_per_token"])
    batches = iter(packer)
    step_fn = trainer._make_train_step()
    strategy = trainer.strategy

    def run_step():
        batch = {k: tf.constant(v) for k, v in next(batches).items()}
        return [float(x) for x in step_fn(batch)[:4]]

    run_step()  # trace
    tokens, started = 0.0, time.perf_counter()
    for _ in range(steps):
        tokens += run_step()[2]
    step_seconds = (time.perf_counter() - started) / steps
    tokens_per_step = tokens / steps

    model = trainer.model
    dim = model.projection_dim
    hidden = tf.random.normal([batch_size, config["unroll_steps"], dim])
    targets = tf.random.uniform([batch_size, config["unroll_steps"]], 0, len(vocabulary),
                                tf.int32)
    mask = tf.ones_like(targets, tf.bool)
    seed = tf.constant([0, 1], tf.int64)

    @tf.function
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
    started = time.perf_counter()
    for _ in range(steps):
        [float(x) for x in softmax_only(hidden)]
    softmax_seconds = (time.perf_counter() - started) / steps
    return {
        "tokens_per_second": tokens_per_step / step_seconds,
        "step_seconds": step_seconds,
        "softmax_share": softmax_seconds / step_seconds,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["tiny", "small", "original"])
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--vocabulary-size", type=int, default=33278)
    parser.add_argument("--samples", type=int, default=8192)
    args = parser.parse_args()
    vocabulary = _vocabulary(args.vocabulary_size)
    print(f"batch {args.batch_size} x 20 tokens, vocabulary {len(vocabulary)}, "
          f"sampled softmax {args.samples} candidates; data {_data()}")
    print(f"{'config':<10} {'softmax':<8} {'steps':>5} {'s/step':>8} {'tokens/s':>9} "
          f"{'softmax share':>14}")
    for name in args.configs:
        for label, samples in (("sampled", args.samples), ("full", 0)):
            row = bench(name, vocabulary, args.batch_size, samples, STEPS[name])
            print(f"{name:<10} {label:<8} {STEPS[name]:>5} {row['step_seconds']:>8.3f} "
                  f"{row['tokens_per_second']:>9.0f} {row['softmax_share']:>13.0%}", flush=True)


if __name__ == "__main__":
    main()
