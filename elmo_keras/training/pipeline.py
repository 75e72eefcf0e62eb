"""End-to-end pretraining: text files -> vocabulary -> trained biLM -> published weight files.

`train(TrainingRun(...))` runs it: a new run, one that starts from a trained biLM
(`init_from`), or a resumed one (`run_plan.plan_run` resolves which). `export_checkpoint` writes
any kept checkpoint of a run in the same layout; `quickstart` is the README's WikiText-2 demo.
"""

import contextlib
import json
import os
import pathlib
import sys
import time

from elmo_keras.file_io.files import write_text
from elmo_keras.training.model_files import MODEL_FILES
from elmo_keras.training.run.run_folder import (
    CHECKPOINTS,
    LOCK_FILE,
    checkpoint_written,
    find_checkpoint,
    lock_run,
)
from elmo_keras.training.run.run_record import RunRecord
from elmo_keras.training.run.training_run import TrainingRun


def train(run=None, *args, callbacks=None, **kwargs):
    """Pretrains a biLM on text files and writes it in the published layout.

    Writes to `run.output_dir`: `vocab.txt` (bilm-tf format), `training_config.json`,
    `checkpoints/` (rotated), `logs/` (TensorBoard), and at the end `options.json`,
    `lm_weights.hdf5` (bilm-tf hdf5 layout, `n_characters` 262: ready for `elmo-keras embed`,
    AllenNLP and bilm-tf) and `softmax.hdf5` (for `elmo-keras evaluate`).

    With `run.init_from` the weights start from a trained biLM (`init_source`); with
    `run.resume` the run goes on from its newest readable checkpoint, and settings that differ
    from the saved ones are refused unless `run.override` (`run_plan`). A failed write of a
    checkpoint or of the model files raises `checkpoints.CheckpointWriteError` (an `OSError`)
    whose one-line message names the checkpoint to resume from.

    The settings are one `TrainingRun` (checked when it is made); the old positional form,
    `train(train, output_dir, ...)`, is a `TypeError` saying so.

    Args:
        run: `TrainingRun`. The settings.
        callbacks: list of `keras.callbacks.Callback` or None. Passed to `Trainer.fit`
            (`on_train_begin` sees the weights before the first step).

    Returns:
        A summary dict: `train` (what `Trainer.fit` returns), `valid` (held-out perplexities,
        with `valid_files`), `output_dir`, `init_from` (None, or the training_config.json
        record of where the weights started), `started_from` (the same as one line, or None),
        and `trainer` (the `Trainer`).

    Example:
    >>> summary = train(TrainingRun("corpus/*.txt", "runs/tiny", config="tiny", steps=10))
    ... # doctest: +SKIP
    """
    from elmo_keras.training.run.init_source import describe

    if not isinstance(run, TrainingRun) or args or kwargs:
        raise TypeError(
            "train() takes one `TrainingRun`: train(TrainingRun(train_files=..., "
            f"output_dir=..., ...)). Received: {_call_text(run, args, kwargs)}"
        )
    with contextlib.ExitStack() as held:
        trainer, plan = _start(run, held)
        run, record = plan.run, plan.record.init_from
        summary = {
            "train": trainer.fit_run(run, callbacks),
            "output_dir": str(run.output_dir),
            "init_from": record,
            "started_from": None if record is None else describe(record),
        }
        if run.valid_files is not None:
            summary["valid"] = trainer.evaluate(
                run.valid_files, run.eval_batch_size, run.eval_max_tokens, run.tokenization_mode
            )
        if trainer.is_chief:
            _export(trainer, pathlib.Path(run.output_dir))
    summary["trainer"] = trainer
    return summary


def _make_trainer(plan):
    """The trainer of the running Keras backend (`backends.training_backend`)."""
    from elmo_keras.training.backends import training_backend

    run = plan.run
    common = {
        "seed": run.seed,
        "carry_state": run.carry_state,
        "mixed_precision": run.mixed_precision,
        "freeze_bilm_steps": run.freeze_bilm_steps,
        "tf32": run.tf32,
        "unroll": run.unroll,
        "stack_directions": run.stack_directions,
    }
    trainer = training_backend().make_trainer(
        plan.config, plan.vocabulary, run.strategy, run.jit_compile, **common
    )
    trainer.feed_workers = run.feed_workers
    return trainer


def _start(run, held):
    """The run's trainer and `RunPlan`: the run folder locked for the run first (chief; `held`
    keeps the lock), then the settings resolved and written, the weights restored (resume) or
    loaded from `init_from`."""
    from elmo_keras.training.common.distribute import chief_by_environment
    from elmo_keras.training.run.run_plan import plan_run

    output_dir = pathlib.Path(run.output_dir)
    locked = held.enter_context(contextlib.ExitStack())
    chief = chief_by_environment(run.strategy)
    if chief:  # before the folder is checked or written (issue 39, point 2)
        locked.enter_context(lock_run(output_dir))
    plan = plan_run(run)
    run = plan.run
    trainer = _make_trainer(plan)
    trainer.data_start_step = plan.record.data_start_step
    if chief and not trainer.is_chief:
        locked.close()  # the joined processes said otherwise: the chief holds the folder
    elif trainer.is_chief and not chief:
        locked.enter_context(lock_run(output_dir))
    restored = None
    if run.resume:
        restored = trainer.restore(output_dir / CHECKPOINTS, plan.restore_skip)
        if restored is None:
            raise ValueError(f"`resume`: no checkpoint found in {output_dir / CHECKPOINTS}.")
        if plan.changes:
            _apply_overrides(trainer, plan, output_dir)
        elif plan.settings_changed and trainer.is_chief:  # a new `log_every`, kept from now on
            plan.record.write(output_dir, plan.vocabulary)
    else:
        if plan.source is not None:
            plan.source.initialize(trainer.model)
        if trainer.is_chief:
            plan.record.write(output_dir, plan.vocabulary)
    if run.verbose and trainer.is_chief:
        _announce(trainer, restored, plan)
    return trainer, plan


def _apply_overrides(trainer, plan, output_dir):
    """A resumed run's overrides: the learning rate (the checkpoint restored the old one), the
    data's new start, and their record in training_config.json."""
    trainer.optimizer.learning_rate = float(plan.config.learning_rate)
    plan.record_overrides(trainer.global_step)
    trainer.data_start_step = plan.record.data_start_step
    if trainer.is_chief:
        plan.record.write(output_dir, plan.vocabulary)
        print(
            f"resume: applied at step {trainer.global_step}: {plan.describe_changes()}",
            file=sys.stderr,
            flush=True,
        )


def _call_text(run, args, kwargs):
    """What a `train(...)` call that is not `train(TrainingRun(...))` passed, in short."""
    given = [type(value).__name__ for value in (run, *args) if value is not None]
    given += [f"{name}=" for name in kwargs]
    return f"train({', '.join(given)})"


def _announce(trainer, restored, plan):
    from elmo_keras.training.run.init_source import describe

    record = plan.record.init_from
    print(
        f"training on {trainer.replicas} replica(s), global batch {trainer.batch_size} x "
        f"{trainer.unroll_steps} tokens, {trainer.placement}"
        + (f", resumed from {restored}" if restored else "")
        + (f", started from {describe(record)}" if record else ""),
        flush=True,
    )


def _export(trainer, output_dir):
    """Writes the model files; a failed write is one line naming the checkpoint to resume from."""
    from elmo_keras.training.common.checkpoints import CheckpointWriteError, one_line, resume_hint

    try:
        trainer.export(output_dir)
    except (OSError, RuntimeError) as error:  # h5py reports a full disk as either
        raise CheckpointWriteError(
            f"could not write the model files to {output_dir} ({one_line(error)}); "
            + resume_hint(output_dir / CHECKPOINTS)
        ) from None


def export_checkpoint(run_dir, output_dir, checkpoint=None):
    """Writes a training checkpoint's weights in the published layout, without training.

    For a run that is still going (or was stopped): the biLM at any kept checkpoint becomes
    `options.json`, `lm_weights.hdf5`, `vocab.txt` and `softmax.hdf5` in `output_dir`, as at
    the end of training. Runs on the default strategy, whatever the run used. A training run's
    folder as `output_dir` is locked meanwhile (`lock_run`): a live run's is refused. A
    checkpoint the running training deletes while it is read (its rotation) is replaced by its
    newest one when none was named, else it is one line.

    Args:
        run_dir: path. The folder of an `elmo-keras train` run (its `training_config.json`,
            `vocab.txt` and `checkpoints/`).
        output_dir: path. Where the files go (created).
        checkpoint: str or None. A checkpoint prefix (`run_dir/checkpoints/ckpt-2000`), a bare
            name (`ckpt-2000`), or None for the latest.

    Returns:
        The checkpoint prefix that was written out.

    Raises:
        finite.NonFiniteError: the checkpoint's weights hold NaN or infinite values (a run
            that diverged); nothing is written.
    """
    with contextlib.ExitStack() as held:
        if os.path.lexists(pathlib.Path(output_dir) / LOCK_FILE):
            held.enter_context(lock_run(output_dir))  # reentrant for a caller holding it
        return _export_checkpoint(run_dir, output_dir, checkpoint)


def _export_checkpoint(run_dir, output_dir, checkpoint):
    from elmo_keras.training.common.finite import check_weights
    from elmo_keras.training.model_files import save_language_model

    saved, vocabulary = RunRecord.read(run_dir)
    config = saved.config
    for attempt in range(_RACES):
        prefix = find_checkpoint(run_dir, checkpoint)
        try:
            model = _checkpoint_model(prefix, config, vocabulary, saved)
            break
        except Exception:
            if checkpoint_written(prefix):
                raise  # not deleted meanwhile: the error is the checkpoint's own
            if checkpoint is None and attempt + 1 < _RACES:
                continue  # the running training rotated it away: its newest one now
            hint = "name a newer one" if checkpoint is not None else "run the snapshot again"
            raise ValueError(
                f"the checkpoint {prefix} was deleted while it was read (the running training "
                f"keeps only its newest checkpoints); {hint}"
            ) from None
    check_weights(model, f"checkpoint {prefix}'s weights", "nothing was written")
    save_language_model(model, vocabulary, output_dir)
    return prefix


_RACES = 3  # checkpoints rotated away while `export_checkpoint` reads the newest


def _checkpoint_model(checkpoint, config, vocabulary, saved):
    """The `LanguageModel` of a checkpoint prefix of a run, read in the format of the trainer
    that wrote it (`backends.prefix_backend`: JAX's `.npz` on any backend, TensorFlow's)."""
    from elmo_keras.training.backends import prefix_backend

    backend = prefix_backend(checkpoint)
    return backend.read_model(checkpoint, config, len(vocabulary), saved.seed)


def _test_prefix(test_path, max_tokens, destination):
    """Writes the first lines of `test_path` holding at least `max_tokens` tokens."""
    lines, tokens = [], 0
    with open(test_path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            lines.append(line)
            tokens += len(line.split())
            if max_tokens is not None and tokens >= max_tokens:
                break
    write_text(destination, "".join(lines))
    return len(lines), tokens


def quickstart(
    output_dir,
    time_budget_s=180,
    data_dir=None,
    config="cpu",
    eval_tokens=50_000,
    min_count=3,
    seed=0,
    verbose=True,
):
    """Trains a small biLM on WikiText-2 for a bounded time on the CPU and evaluates it.

    Steps: fetch WikiText-2 (`datasets.wikitext2`), build the vocabulary of its training split,
    train the `cpu` configuration (cell 512, projection 128, 1 highway, 384 char filters,
    batch 32 x 20 tokens, sampled softmax 2048, Adam 0.002) for `time_budget_s` seconds of
    training (words seen fewer than `min_count` times map to `<UNK>`, as in WikiText-2's own
    tokenized release), evaluate on the first `eval_tokens` tokens of the test split (whole
    lines; `None` for all 241k), compare with a unigram model on the same lines, write the
    weights, and embed two example sentences.

    Returns:
        A dict with the perplexities (forward, backward, average), the unigram baseline, the
        training statistics and the output paths (also written to `summary.json`).
    """
    from elmo_keras.training.datasets import wikitext2

    output_dir = pathlib.Path(output_dir)
    paths = wikitext2(local_dir=data_dir)
    run = TrainingRun(
        str(paths["train"]),
        output_dir,
        config=config,
        seed=seed,
        time_budget_s=time_budget_s,
        checkpoint_every=500,
        log_every=50,
        min_count=min_count,
        verbose=verbose,
    )
    summary = train(run)
    trainer = summary.pop("trainer")
    output_dir.mkdir(parents=True, exist_ok=True)
    test, unigram = _test_perplexities(trainer, paths, output_dir, eval_tokens)
    result = {
        "config": config,
        "time_budget_s": time_budget_s,
        "train": summary["train"],
        "test": test,
        "unigram_perplexity": unigram,
        "vocabulary_size": len(trainer.vocabulary),
        "embedding_shape": _example_embedding_shape(trainer.bilm),
        "output_dir": str(output_dir),
        "files": {name: str(output_dir / name) for name in MODEL_FILES},
    }
    write_text(output_dir / "summary.json", json.dumps(result, indent=2) + "\n")
    if verbose:
        print(
            f"WikiText-2 test ({test['words']} words, {test['lines']} lines): perplexity forward "
            f"{test['perplexity_forward']:.1f}, backward {test['perplexity_backward']:.1f}, "
            f"average {test['perplexity']:.1f}; unigram {unigram:.1f}",
            flush=True,
        )
    return result


def _test_perplexities(trainer, paths, output_dir, eval_tokens):
    """The biLM's and a unigram model's perplexity on the first lines of the test split."""
    from elmo_keras.training.baselines import unigram_perplexity

    test_file = output_dir / "test_prefix.txt"
    n_lines, n_words = _test_prefix(paths["test"], eval_tokens, test_file)
    started = time.perf_counter()
    test = trainer.evaluate(str(test_file), batch_size=16)
    test["seconds"] = time.perf_counter() - started
    test["lines"], test["words"] = n_lines, n_words
    unigram = unigram_perplexity(str(paths["train"]), str(test_file), trainer.vocabulary)
    return test, unigram


def _example_embedding_shape(bilm):
    """Embeds two example sentences (a smoke test of the trained biLM); returns the shape."""
    from elmo_keras.text.char_ids import batch_to_char_ids

    sentences = [
        ["The", "game", "was", "released", "in", "Japan", "."],
        ["The", "river", "flows", "into", "the", "sea", "."],
    ]
    return list(bilm(batch_to_char_ids(sentences))["activations"].shape)
