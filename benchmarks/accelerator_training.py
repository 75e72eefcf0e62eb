"""The training part of benchmarks/accelerator.py: the real JAX trainer's step, and a short run.

(d) the step of `JaxTrainer` (the one `elmo-keras train --backend jax` runs: sampled softmax
    with 8,192 log-uniform candidates and Adagrad on the gathered rows of a 793,471-word
    softmax, clipping, carried state) for `original` at 128 x 20 and 512 x 20 tokens, in bf16
    (`mixed_bfloat16`), TF32 and fp32 (`highest`), for each loop setting of `LOOPS` asked for
    (`unroll`, `stack_directions`), on random windows already on the device (the reference's
    setting): tokens/s of `--steps` steps dispatched one after another as `fit` does (the
    metrics read after the last), the median of single steps waited for one by one (as the
    reference times them), and the compiled step's memory (arguments + temporaries, XLA's
    `memory_analysis`); one more row at 128 x 20 bf16 through `fit` itself (the NumPy window
    packer and its prefetching thread feeding the step; the wall time of `--fit-steps` steps
    after two compiling ones, the feed's start included), which says whether the host keeps up;
(e) a short real run: WikiText-2 (from `--wikitext-dir`), a vocabulary of its training split,
    the `cpu` configuration, `--run-seconds` of training (or exactly `--run-steps` steps), the
    held-out perplexity of the first valid tokens before and after (it must fall).

`--small` shrinks (d) to a small configuration and vocabulary, and (e) to the `tiny`
configuration, for a CPU.
"""

import statistics
import time

import jax
import numpy as np

from elmo_keras.text.vocabulary import Vocabulary
from elmo_keras.training.common.stopping import StopRequests
from elmo_keras.training.configs import get_config
from elmo_keras.training.feed.data import build_vocabulary
from elmo_keras.training.jax.jax_trainer import JaxTrainer

WORDS = 793_471  # the published model's softmax
TOKENS = 20
# (rows, precision) in the order they are measured: the most telling first, for the budget.
STEP_ROWS = [
    (128, "bf16"),
    (128, "tf32"),
    (512, "bf16"),
    (512, "tf32"),
    (128, "fp32"),
    (512, "fp32"),
]


# Loop settings by name: "plain", "uN" (unroll N), "sN" (both directions stacked, unroll N).
def loop_settings(name):
    """`(unroll, stack_directions)` of a loop name: `plain`, `u4`, `s4`, `s1`..."""
    if name == "plain":
        return 1, False
    if name[:1] in ("u", "s") and name[1:].isdigit() and int(name[1:]) >= 1:
        return int(name[1:]), name[0] == "s"
    raise ValueError(f"a loop is plain, uN or sN (N >= 1). Received: {name!r}")


def _vocabulary(size):
    return Vocabulary(["<S>", "</S>", "<UNK>"] + [f"w{i}" for i in range(size - 3)])


def _trainer(config, vocabulary, precision, loop="plain"):
    unroll, stack_directions = loop_settings(loop)
    return JaxTrainer(
        config,
        vocabulary,
        devices=jax.devices()[:1],
        mixed_precision="bfloat16" if precision == "bf16" else None,
        tf32=precision != "fp32",
        unroll=unroll,
        stack_directions=stack_directions,
    )


def _random_windows(rng, config, vocabulary_size, count):
    """Windows shaped as `WindowPacker` makes them: random characters and Zipf word ids."""
    rows, chars = config["batch_size"], config["char_cnn"]["max_characters_per_token"]
    batches = []
    for _ in range(count):
        char_ids = rng.integers(1, 260, size=(2, rows, TOKENS, chars), dtype=np.int32)
        char_ids[..., 12:] = 0  # tokens of up to 10 characters plus begin and end marks
        targets = np.minimum(rng.zipf(1.2, size=(2, rows, TOKENS)), vocabulary_size) - 1
        batches.append(
            {
                "forward_char_ids": char_ids[0],
                "backward_char_ids": char_ids[1],
                "forward_targets": targets[0].astype(np.int32),
                "backward_targets": targets[1].astype(np.int32),
            }
        )
    return batches


def _step_memory_gib(trainer, batch):
    """Arguments + temporaries of the compiled step, GiB (None when XLA does not say)."""
    try:
        lowered = trainer._train_step.lower(
            trainer.state.on_devices(),
            batch,
            trainer._placement.put(trainer.candidates(0), False),
            np.int32(0),
            np.float32(0.1),
        )
        analysis = lowered.compile().memory_analysis()
        used = analysis.argument_size_in_bytes + analysis.temp_size_in_bytes
        return used / 2**30
    except Exception:  # noqa: BLE001 - a figure the backend may not give
        return None


def step_speed(rows, precision, small, steps, loop="plain", memory=True):
    """One row of (d): the trainer's step alone on device-resident random windows
    (`memory`: also the compiled step's memory, which compiles it a second time)."""
    config = get_config("tiny" if small else "original")
    words = 5_000 if small else WORDS
    config.update(
        batch_size=rows, unroll_steps=TOKENS, n_negative_samples_batch=64 if small else 8192
    )
    trainer = _trainer(config, _vocabulary(words), precision, loop)
    rng = np.random.default_rng(0)
    batches = []
    for index, batch in enumerate(_random_windows(rng, config, words, 4)):
        batch = {k: trainer._placement.put(v, True) for k, v in batch.items()}
        batch["candidates"] = trainer._placement.put(trainer.candidates(index), False)
        batches.append(batch)
    requests = StopRequests(handle_signals=False)

    def run(i):  # `_run_step` takes the batch's candidates out: give it a copy
        return trainer._run_step(dict(batches[i % len(batches)]), requests)[0]

    started = time.perf_counter()
    run(0)()  # compiles; reading the logs waits for the step
    compile_s = time.perf_counter() - started
    waited = []
    for i in range(steps):
        started = time.perf_counter()
        run(i)()
        waited.append(time.perf_counter() - started)
    started = time.perf_counter()
    pending = [run(i) for i in range(steps)]
    for logs in pending:
        logs()
    dispatched = (time.perf_counter() - started) / steps
    return {
        "rows": rows,
        "precision": precision,
        "loop": loop,
        "tokens_per_s": rows * TOKENS / dispatched,
        "waited_tokens_per_s": rows * TOKENS / statistics.median(waited),
        "step_s": dispatched,
        "compile_s": compile_s,
        "step_memory_gib": _step_memory_gib(trainer, batches[0]) if memory else None,
        "sparse_softmax": trainer.sparse_softmax,
    }


def fit_speed(rows, text, small, steps, loop="plain"):
    """The (d) row through `fit`: real text packed on the host by the prefetching feed. Two
    steps compile first (a `fit` of their own); then `fit` takes `steps` more, timed whole."""
    config = get_config("tiny" if small else "original")
    config.update(
        batch_size=rows, unroll_steps=TOKENS, n_negative_samples_batch=64 if small else 8192
    )
    vocabulary = build_vocabulary(str(text), min_count=1, max_size=(5_000 if small else WORDS))
    trainer = _trainer(config, vocabulary, "bf16", loop)
    trainer.fit(str(text), steps=2, log_every=10**6, handle_signals=False)
    started = time.perf_counter()
    trainer.fit(str(text), steps=2 + steps, log_every=10**6, handle_signals=False)
    seconds = time.perf_counter() - started
    return {
        "rows": rows,
        "precision": "bf16",
        "loop": loop,
        "through_fit": True,
        "tokens_per_s": rows * TOKENS * steps / seconds,
    }


def short_run(wikitext_dir, small, seconds, steps=None):
    """(e): held-out perplexity before and after `seconds` of training on WikiText-2, or after
    exactly `steps` steps when given (what a test asserts on: a step count does not depend on the
    machine's speed, seconds do)."""
    train, valid = wikitext_dir / "train.raw.txt", wikitext_dir / "valid.raw.txt"
    vocabulary = build_vocabulary(str(train), min_count=3)
    config = get_config("tiny" if small else "cpu")
    trainer = JaxTrainer(config, vocabulary, devices=jax.devices()[:1])
    budget = 3_000 if small else 50_000
    before = trainer.evaluate(str(valid), batch_size=16, max_tokens=budget)
    limit = {"time_budget_s": seconds} if steps is None else {"steps": steps}
    result = trainer.fit(str(train), log_every=10**6, handle_signals=False, **limit)
    after = trainer.evaluate(str(valid), batch_size=16, max_tokens=budget)
    return {
        "config": "tiny" if small else "cpu",
        "vocabulary": len(vocabulary),
        "steps": result["steps"],
        "train_tokens_per_s": result["tokens_per_second"],
        "valid_tokens": after["tokens"],
        "perplexity_before": before["perplexity"],
        "perplexity_after": after["perplexity"],
    }


def report(training):
    lines = [
        "",
        "| training step | precision | loop | tokens/s | waited one by one | compile s "
        "| step memory GiB |",
        "|---|---|---|---|---|---|---|",
    ]
    for row in training["steps"]:
        name = f"{row['rows']} x {TOKENS}" + (" (through fit)" if row.get("through_fit") else "")
        loop = row.get("loop", "plain")
        if "skipped" in row:
            lines.append(f"| {name} | {row['precision']} | {loop} | skipped | | | |")
            continue
        memory, compile_s = row.get("step_memory_gib"), row.get("compile_s")
        waited = row.get("waited_tokens_per_s")
        lines.append(
            f"| {name} | {row['precision']} | {loop} | {row['tokens_per_s']:,.0f} | "
            f"{'-' if waited is None else f'{waited:,.0f}'} | "
            f"{'-' if compile_s is None else f'{compile_s:.1f}'} | "
            f"{'-' if memory is None else f'{memory:.2f}'} |"
        )
    run = training.get("run")
    if run:
        lines += [
            "",
            f"Short run ({run['config']}, {run['steps']} steps, {run['train_tokens_per_s']:,.0f} "
            f"tokens/s): held-out perplexity {run['perplexity_before']:,.1f} -> "
            f"{run['perplexity_after']:,.1f} ({run['valid_tokens']} WikiText-2 valid tokens)",
        ]
    return "\n".join(lines)
