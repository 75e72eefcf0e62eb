"""End-to-end pretraining: text files -> vocabulary -> trained biLM -> published weight files.

`train(TrainingRun(...))` runs it; `export_checkpoint` writes any kept checkpoint of a run in the
same layout; `quickstart` is the README's WikiText-2 demo.
"""

import dataclasses
import json
import pathlib
import time

from elmo_keras.files import write_text
from elmo_keras.text.vocabulary import Vocabulary
from elmo_keras.training.configs import get_config
from elmo_keras.training.data import build_vocabulary
from elmo_keras.training.model_files import MODEL_FILES
from elmo_keras.training.run_config import TrainingRun, legacy_training_run
from elmo_keras.training.run_folder import (
    CHECKPOINTS,
    CONFIG_FILE,
    find_checkpoint,
    has_checkpoints,
    load_run,
    save_run,
)


def train(run=None, *args, callbacks=None, **kwargs):
    """Pretrains a biLM on text files and writes it in the published layout.

    Writes to `run.output_dir`: `vocab.txt` (bilm-tf format), `training_config.json`,
    `checkpoints/` (rotated), `logs/` (TensorBoard), and at the end `options.json`,
    `lm_weights.hdf5` (bilm-tf hdf5 layout, `n_characters` 262: ready for `elmo-keras embed`,
    AllenNLP and bilm-tf) and `softmax.hdf5` (for `elmo-keras evaluate`).

    The old form, `train(train, output_dir, config=..., steps=..., ...)` with the names of
    `TrainingRun`'s fields (and `train`, `valid`, `vocab`, `tokenization` for `train_files`,
    `valid_files`, `vocab_file`, `tokenization_mode`), still works and warns
    (`DeprecationWarning`).

    Args:
        run: `TrainingRun`. The settings.
        callbacks: list of `keras.callbacks.Callback` or None. Passed to `Trainer.fit`.

    Returns:
        A summary dict: `train` (what `Trainer.fit` returns), `valid` (held-out perplexities,
        with `valid_files`), `output_dir`, and `trainer` (the `Trainer`).

    Example:
    >>> summary = train(TrainingRun("corpus/*.txt", "runs/tiny", config="tiny", steps=10))
    ... # doctest: +SKIP
    """
    if not isinstance(run, TrainingRun) or args or kwargs:
        run = legacy_training_run(args if run is None else (run, *args), kwargs)
    run, config, vocabulary = _run_settings(run)
    trainer = _start(run, config, vocabulary)
    summary = {"train": _fit(trainer, run, callbacks), "output_dir": str(run.output_dir)}
    if run.valid_files is not None:
        summary["valid"] = trainer.evaluate(
            run.valid_files, run.eval_batch_size, run.eval_max_tokens, run.tokenization_mode
        )
    if trainer.is_chief:
        trainer.export(run.output_dir)
    summary["trainer"] = trainer
    return summary


def _start(run, config, vocabulary):
    """The run's `Trainer`: the run folder written (chief), the checkpoint restored (resume)."""
    from elmo_keras.training.distribute import make_strategy
    from elmo_keras.training.trainer import Trainer

    strategy = make_strategy(run.strategy) if isinstance(run.strategy, str) else run.strategy
    trainer = Trainer(
        config,
        vocabulary,
        strategy=strategy,
        seed=run.seed,
        carry_state=run.carry_state,
        mixed_precision=run.mixed_precision,
        jit_compile=run.jit_compile,
    )
    output_dir = pathlib.Path(run.output_dir)
    if trainer.is_chief:
        settings = (run.seed, run.tokenization_mode, run.carry_state, run.train_files)
        save_run(output_dir, trainer.config, vocabulary, *settings)
    restored = trainer.restore(output_dir / CHECKPOINTS) if run.resume else None
    if run.resume and restored is None:
        raise ValueError(f"`resume`: no checkpoint found in {output_dir / CHECKPOINTS}.")
    if run.verbose and trainer.is_chief:
        _announce(trainer, restored)
    return trainer


def _fit(trainer, run, callbacks):
    return trainer.fit(
        run.train_files,
        steps=run.steps,
        epochs=run.epochs,
        output_dir=run.output_dir,
        checkpoint_every=run.checkpoint_every,
        keep_checkpoints=run.keep_checkpoints,
        time_budget_s=run.time_budget_s,
        log_every=run.log_every,
        tokenization_mode=run.tokenization_mode,
        progress=run.progress,
        callbacks=callbacks,
    )


def _announce(trainer, restored):
    replicas = trainer.strategy.num_replicas_in_sync
    print(
        f"training on {replicas} replica(s), global batch {trainer.batch_size} x "
        f"{trainer.unroll_steps} tokens, {type(trainer.strategy).__name__}"
        + (f", resumed from {restored}" if restored else ""),
        flush=True,
    )


def _run_settings(run):
    """`(run, configuration, vocabulary)`: a resumed run's saved ones, else new ones.

    A resumed run keeps its saved seed, tokenization mode and `carry_state` (the returned `run`
    has them); a new run must not write into a folder that holds checkpoints.
    """
    output_dir = pathlib.Path(run.output_dir)
    if run.resume:
        if not (output_dir / CONFIG_FILE).is_file():
            raise ValueError(
                f"`resume` needs a previous run in {output_dir} ({CONFIG_FILE} not found)."
            )
        saved, vocabulary = load_run(output_dir)
        run = dataclasses.replace(
            run,
            seed=saved["seed"],
            tokenization_mode=saved["tokenization_mode"],
            carry_state=saved["carry_state"],
        )
        return run, saved["config"], vocabulary
    if has_checkpoints(output_dir):
        raise ValueError(
            f"{output_dir} already holds checkpoints: pass `resume` to continue that run, "
            "or choose a new output folder."
        )
    return run, _new_config(run), _vocabulary(run)


def _new_config(run):
    """The named or given configuration with the run's overrides, checked."""
    config = get_config(run.config)
    overrides = {
        "batch_size": run.batch_size,
        "n_negative_samples_batch": run.n_negative_samples,
        "optimizer": run.optimizer,
        "learning_rate": run.learning_rate,
    }
    config.update({k: v for k, v in overrides.items() if v is not None})
    return get_config(config)


def _vocabulary(run):
    if run.vocab_file is not None:
        return Vocabulary.load(run.vocab_file)
    started = time.perf_counter()
    vocabulary = build_vocabulary(
        run.train_files, run.min_count, run.max_vocab_size, run.tokenization_mode
    )
    if run.verbose:
        seconds = time.perf_counter() - started
        print(f"vocabulary: {len(vocabulary)} tokens ({seconds:.1f} s)", flush=True)
    return vocabulary


def export_checkpoint(run_dir, output_dir, checkpoint=None):
    """Writes a training checkpoint's weights in the published layout, without training.

    For a run that is still going (or was stopped): the biLM at any kept checkpoint becomes
    `options.json`, `lm_weights.hdf5`, `vocab.txt` and `softmax.hdf5` in `output_dir`, as at
    the end of training. Runs on the default strategy, whatever the run used.

    Args:
        run_dir: path. The folder of an `elmo-keras train` run (its `training_config.json`,
            `vocab.txt` and `checkpoints/`).
        output_dir: path. Where the files go (created).
        checkpoint: str or None. A checkpoint prefix (`run_dir/checkpoints/ckpt-2000`), a bare
            name (`ckpt-2000`), or None for the latest.

    Returns:
        The checkpoint prefix that was written out.
    """
    import tensorflow as tf

    from elmo_keras.training.configs import normalize_config
    from elmo_keras.training.model_files import export_model
    from elmo_keras.training.state import TrainingState

    saved, vocabulary = load_run(run_dir)
    checkpoint = find_checkpoint(run_dir, checkpoint)
    config = normalize_config(saved["config"])
    state = TrainingState(config, len(vocabulary), tf.distribute.get_strategy(), saved["seed"])
    state.restore(checkpoint)
    export_model(state.model, vocabulary, output_dir)
    return checkpoint


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
        steps=10**9,
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
