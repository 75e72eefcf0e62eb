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
    python benchmarks/training.py --configs tiny --steps 2   # smoke run

The table ends with the machine line (CPU, its SIMD flags, TensorFlow, threads, oneDNN).
"""

import argparse
import gc
import pathlib
import statistics

import common

common.prefer_onednn(log_level="3")

ROOT = common.REPO
STEPS = {"tiny": 20, "cpu": 10, "small": 5, "medium": 3, "original": 3}


def _data():
    wikitext = common.WIKITEXT_DIR / "train.raw.txt"
    if wikitext.is_file():
        return str(wikitext)
    return str(ROOT / "tests" / "fixtures" / "bilm_tf" / "train" / "data.txt")


def _vocabulary(size):
    from elmo_keras.text.vocabulary import Vocabulary
    from elmo_keras.training.feed.data import build_vocabulary

    vocab = build_vocabulary(_data(), max_size=size)
    extra = [f"<filler{i}>" for i in range(size - len(vocab))]  # tiny corpora: pad to `size`
    return Vocabulary(list(vocab.tokens) + extra)


def _timed_calls(fn, steps):
    """`steps` calls of `fn`: `(what each returned, the wall time of each)`."""
    return zip(*(common.timed(fn) for _ in range(steps)), strict=True)


def _trainer_step(trainer, vocabulary, config):
    """One optimizer step on the next real window: returns the step's token count."""
    import tensorflow as tf

    from elmo_keras.training.feed.data import SentenceStream, WindowPacker

    packer = WindowPacker(
        SentenceStream(_data(), shuffle=False),
        vocabulary,
        config["batch_size"],
        config["unroll_steps"],
        config["char_cnn"]["max_characters_per_token"],
    )
    batches = iter(packer)
    step_fn = trainer._make_train_step()
    candidates = trainer.candidates(0)
    candidates = None if candidates is None else tf.constant(candidates)

    def run_step():
        batch = {k: tf.constant(v) for k, v in next(batches).items()}
        return [float(x) for x in step_fn(batch, candidates)[:4]][2]  # waits for every output

    return run_step


def _softmax_only(model, config, vocabulary_size, samples, jit_compile):
    """The softmax's forward and backward alone, both directions, on the step's shapes."""
    import tensorflow as tf

    shape = [config["batch_size"], config["unroll_steps"]]
    hidden = tf.random.normal(shape + [model.projection_dim])
    targets = tf.random.uniform(shape, 0, vocabulary_size, tf.int32)
    mask = tf.ones_like(targets, tf.bool)
    candidates = tf.constant(model.sample_candidates(0, 1)) if samples else None

    @tf.function(jit_compile=jit_compile)
    def softmax(hidden):
        with tf.GradientTape() as tape:
            tape.watch(hidden)
            loss = 0.0
            for _ in range(2):  # both directions
                loss += tf.reduce_sum(model.token_losses(hidden, targets, mask, candidates))
        grads = tape.gradient(loss, [hidden, model.softmax_kernel, model.softmax_bias])
        return [tf.reduce_sum(tf.convert_to_tensor(g)) for g in grads]

    return lambda: [float(x) for x in softmax(hidden)]


def bench(name, vocabulary, batch_size, samples, steps, jit_compile=False):
    """One table row: `steps` timed training steps after one that traces, and the softmax."""
    import keras

    from elmo_keras.training.configs import get_config
    from elmo_keras.training.tf.trainer import Trainer

    gc.collect()
    keras.backend.clear_session()  # the previous row's graphs and weights
    common.reset_peak_rss()
    config = get_config(name)
    config.update(batch_size=batch_size, n_negative_samples_batch=samples, dropout=0.1)
    trainer = Trainer(config, vocabulary, seed=0, jit_compile=jit_compile)
    step = _trainer_step(trainer, vocabulary, config)
    step()  # trace
    tokens, times = _timed_calls(step, steps)
    step_seconds, tokens_per_step = statistics.median(times), statistics.median(tokens)
    softmax = _softmax_only(trainer.model, config, len(vocabulary), samples, jit_compile)
    softmax()  # trace
    _, softmax_times = _timed_calls(softmax, steps)
    softmax_seconds = statistics.median(softmax_times)
    return {
        "config": name,
        "softmax": "sampled" if samples else "full",
        "xla": bool(jit_compile),
        "steps": steps,
        "tokens_per_second": tokens_per_step / step_seconds,
        "step_seconds": step_seconds,
        "softmax_share": softmax_seconds / step_seconds,
        "peak_rss_mb": common.peak_rss_mb(),
    }


COLUMNS = ["config", "softmax", "XLA", "steps", "s/step", "tokens/s", "vs full"]
COLUMNS += ["softmax share", "peak MB"]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--configs", nargs="+", default=["tiny", "small", "original"])
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--vocabulary-size", type=int, default=33278)
    parser.add_argument("--samples", type=int, default=8192)
    parser.add_argument("--steps", type=int, help="timed steps per row (default: per config)")
    parser.add_argument("--xla", action="store_true", help="also time each row under XLA")
    parser.add_argument("--json", type=pathlib.Path, help="write the rows here")
    args = parser.parse_args(argv)
    unknown = [name for name in args.configs if name not in STEPS]
    if unknown and args.steps is None:  # a config file: its step count is not known here
        parser.error(f"--steps is needed for --configs other than {', '.join(STEPS)}: {unknown}")
    vocabulary = _vocabulary(args.vocabulary_size)
    env = common.environment()
    print(
        f"batch {args.batch_size} x 20 tokens, vocabulary {len(vocabulary)}, sampled softmax "
        f"{args.samples} candidates; data {_data()}; medians\n{common.machine_line(env)}"
    )
    print(common.table_header(COLUMNS), flush=True)
    rows = []
    for name in args.configs:
        steps = args.steps or STEPS[name]
        for xla in (False, True) if args.xla else (False,):
            pair = [
                bench(name, vocabulary, args.batch_size, samples, steps, xla)
                for samples in (args.samples, 0)
            ]
            for row in pair:
                row["vs_full"] = row["tokens_per_second"] / pair[1]["tokens_per_second"]
                rows.append(row)
                cells = [name, row["softmax"], "yes" if xla else "no", steps]
                cells += [f"{row['step_seconds']:.3f}", f"{row['tokens_per_second']:.0f}"]
                cells += [f"{row['vs_full']:.2f}x", f"{row['softmax_share']:.0%}"]
                cells.append(f"{row['peak_rss_mb']:.0f}")
                print(common.table_row(cells), flush=True)
    if args.json:
        results = {"batch_size": args.batch_size, "vocabulary": len(vocabulary)}
        results.update(samples=args.samples, environment=env, rows=rows)
        common.write_json(args.json, results)


if __name__ == "__main__":
    main()
