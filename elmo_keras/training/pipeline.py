"""End-to-end pretraining: text files -> vocabulary -> trained biLM -> published weight files."""

import json
import pathlib
import time

from elmo_keras.text.vocabulary import Vocabulary
from elmo_keras.training.configs import get_config
from elmo_keras.training.data import build_vocabulary

CONFIG_FILE = "training_config.json"


def train(train, output_dir, config="small", valid=None, steps=None, epochs=None,
          batch_size=None, strategy="auto", resume=False, seed=0, vocab=None, min_count=1,
          max_vocab_size=None, tokenization="whitespace", checkpoint_every=1000,
          keep_checkpoints=3, time_budget_s=None, mixed_precision=None, jit_compile=False,
          carry_state=True, n_negative_samples=None, optimizer=None, learning_rate=None,
          log_every=50, progress=None, eval_batch_size=16, eval_max_tokens=None, verbose=True):
    """Pretrains a biLM on text files and writes it in the published layout.

    Writes to `output_dir`: `vocab.txt` (bilm-tf format), `training_config.json`,
    `checkpoints/` (rotated), `logs/` (TensorBoard), and at the end `options.json`,
    `lm_weights.hdf5` (bilm-tf hdf5 layout, `n_characters` 262: ready for `elmo-keras embed`,
    AllenNLP and bilm-tf) and `softmax.hdf5` (for `elmo-keras evaluate`).

    Args:
        train: str or list. Glob(s) of text files, one sentence or paragraph per line.
        output_dir: path. The run's folder.
        config: str or dict. A named configuration (`tiny`, `cpu`, `small`, `medium`,
            `original`) or a JSON file / dict of bilm-tf options.
        valid: path or None. Held-out text: its full-softmax perplexity is reported.
        steps, epochs: when to stop (at least one of them).
        batch_size: int or None. Global batch (rows of windows); overrides the configuration.
        strategy: `"auto"`, `"default"`, `"mirrored"`, `"multi-worker"` or a
            `tf.distribute.Strategy`.
        resume: bool. Continue the run in `output_dir` from its latest checkpoint, with its
            saved configuration, vocabulary and data position.
        seed: int. Weights, data order and softmax samples.
        vocab: path or None. An existing vocabulary file (else one is built from `train`).
        min_count, max_vocab_size: vocabulary building.
        tokenization: `"whitespace"` (pre-tokenized text) or `"punctuation"`.
        time_budget_s: float or None. Stop after this much training time.
        mixed_precision: None or `"bfloat16"`. jit_compile: bool (XLA).
        carry_state: bool. Truncated backpropagation: carry the LSTM state across windows.
        n_negative_samples, optimizer, learning_rate: override the configuration.
        eval_batch_size, eval_max_tokens: the held-out evaluation.

    Returns:
        A summary dict (training result, held-out perplexities, paths).
    """
    import tensorflow as tf

    from elmo_keras.training.trainer import Trainer, make_strategy

    output_dir = pathlib.Path(output_dir)
    config_path = output_dir / CONFIG_FILE
    if resume:
        if not config_path.is_file():
            raise ValueError(
                f"`resume` needs a previous run in {output_dir} ({CONFIG_FILE} not found)."
            )
        saved, vocabulary = _load_run(output_dir)
        run_config, seed = saved["config"], saved["seed"]
        tokenization, carry_state = saved["tokenization"], saved["carry_state"]
    else:
        if (output_dir / "checkpoints").is_dir() and any((output_dir / "checkpoints").iterdir()):
            raise ValueError(
                f"{output_dir} already holds checkpoints: pass `resume` to continue that run, "
                "or choose a new output folder."
            )
        run_config = get_config(config)
        overrides = {"batch_size": batch_size, "n_negative_samples_batch": n_negative_samples,
                     "optimizer": optimizer, "learning_rate": learning_rate}
        run_config.update({k: v for k, v in overrides.items() if v is not None})
        run_config = get_config(run_config)
        if vocab is not None:
            vocabulary = Vocabulary.load(vocab)
        else:
            started = time.perf_counter()
            vocabulary = build_vocabulary(train, min_count, max_vocab_size, tokenization)
            if verbose:
                print(f"vocabulary: {len(vocabulary)} tokens "
                      f"({time.perf_counter() - started:.1f} s)", flush=True)
    if isinstance(strategy, str):
        strategy = make_strategy(strategy)
    trainer = Trainer(run_config, vocabulary, strategy=strategy, seed=seed,
                      carry_state=carry_state, mixed_precision=mixed_precision,
                      jit_compile=jit_compile)
    if trainer.is_chief:
        output_dir.mkdir(parents=True, exist_ok=True)
        vocabulary.save(output_dir / "vocab.txt")
        config_path.write_text(json.dumps({
            "config": trainer.config, "seed": seed, "tokenization": tokenization,
            "carry_state": carry_state, "train": train if isinstance(train, str) else list(train),
        }, indent=2) + "\n", encoding="utf-8")
    restored = trainer.restore(output_dir / "checkpoints") if resume else None
    if resume and restored is None:
        raise ValueError(f"`resume`: no checkpoint found in {output_dir / 'checkpoints'}.")
    if verbose and trainer.is_chief:
        replicas = trainer.strategy.num_replicas_in_sync
        print(f"training on {replicas} replica(s), global batch {trainer.batch_size} x "
              f"{trainer.unroll_steps} tokens, {type(trainer.strategy).__name__}"
              + (f", resumed from {restored}" if restored else ""), flush=True)
    result = trainer.fit(
        train, steps=steps, epochs=epochs, output_dir=output_dir,
        checkpoint_every=checkpoint_every, keep_checkpoints=keep_checkpoints,
        time_budget_s=time_budget_s, log_every=log_every, tokenization=tokenization,
        progress=progress,
    )
    summary = {"train": result, "output_dir": str(output_dir)}
    if valid is not None:
        summary["valid"] = trainer.evaluate(
            valid, batch_size=eval_batch_size, max_tokens=eval_max_tokens,
            tokenization=tokenization,
        )
    if trainer.is_chief:
        trainer.export(output_dir)
    summary["trainer"] = trainer
    del tf
    return summary


def _load_run(run_dir):
    """A run folder's saved settings (`training_config.json`) and its vocabulary."""
    run_dir = pathlib.Path(run_dir)
    saved = json.loads((run_dir / CONFIG_FILE).read_text(encoding="utf-8"))
    return saved, Vocabulary.load(run_dir / "vocab.txt")


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

    from elmo_keras.training.trainer import Trainer

    run_dir = pathlib.Path(run_dir)
    config_path = run_dir / CONFIG_FILE
    if not config_path.is_file():
        raise ValueError(
            f"`run_dir` must be the folder of an `elmo-keras train` run; {config_path} was not "
            f"found. Received: run_dir={str(run_dir)!r}"
        )
    checkpoints = run_dir / "checkpoints"
    if checkpoint is None:
        checkpoint = tf.train.latest_checkpoint(str(checkpoints))
        if checkpoint is None:
            raise ValueError(f"No checkpoint in {checkpoints}.")
    elif not pathlib.Path(f"{checkpoint}.index").is_file():
        if pathlib.Path(f"{checkpoints / checkpoint}.index").is_file():
            checkpoint = str(checkpoints / checkpoint)
        else:
            kept = sorted(p.name[: -len(".index")] for p in checkpoints.glob("*.index"))
            raise ValueError(
                f"`checkpoint` must name a checkpoint of {checkpoints} (kept: "
                f"{', '.join(kept) or 'none'}). Received: checkpoint={checkpoint!r}"
            )
    saved, vocabulary = _load_run(run_dir)
    trainer = Trainer(saved["config"], vocabulary, strategy=tf.distribute.get_strategy(),
                      seed=saved["seed"], carry_state=saved["carry_state"])
    trainer.checkpoint.restore(str(checkpoint)).assert_existing_objects_matched()
    trainer.export(output_dir)
    return str(checkpoint)


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
    pathlib.Path(destination).write_text("".join(lines), encoding="utf-8")
    return len(lines), tokens


def quickstart(output_dir, time_budget_s=180, data_dir=None, config="cpu", eval_tokens=50_000,
               min_count=3, seed=0, verbose=True):
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
    from elmo_keras.training.baselines import unigram_perplexity
    from elmo_keras.training.datasets import wikitext2

    output_dir = pathlib.Path(output_dir)
    paths = wikitext2(local_dir=data_dir)
    summary = train(
        str(paths["train"]), output_dir, config=config, epochs=None, steps=10**9,
        time_budget_s=time_budget_s, seed=seed, checkpoint_every=500, log_every=50,
        min_count=min_count, verbose=verbose,
    )
    trainer = summary.pop("trainer")
    output_dir.mkdir(parents=True, exist_ok=True)
    test_file = output_dir / "test_prefix.txt"
    n_lines, n_words = _test_prefix(paths["test"], eval_tokens, test_file)
    started = time.perf_counter()
    test = trainer.evaluate(str(test_file), batch_size=16)
    test["seconds"] = time.perf_counter() - started
    test["lines"], test["words"] = n_lines, n_words
    unigram = unigram_perplexity(str(paths["train"]), str(test_file), trainer.vocabulary)
    bilm = trainer.bilm
    from elmo_keras.text.char_ids import batch_to_char_ids

    sentences = [["The", "game", "was", "released", "in", "Japan", "."],
                 ["The", "river", "flows", "into", "the", "sea", "."]]
    activations = bilm(batch_to_char_ids(sentences))["activations"]
    result = {
        "config": config,
        "time_budget_s": time_budget_s,
        "train": summary["train"],
        "test": test,
        "unigram_perplexity": unigram,
        "vocabulary_size": len(trainer.vocabulary),
        "embedding_shape": list(activations.shape),
        "output_dir": str(output_dir),
        "files": {name: str(output_dir / name) for name in
                  ("options.json", "lm_weights.hdf5", "vocab.txt", "softmax.hdf5")},
    }
    (output_dir / "summary.json").write_text(json.dumps(result, indent=2) + "\n")
    if verbose:
        print(
            f"WikiText-2 test ({n_words} words, {n_lines} lines): perplexity forward "
            f"{test['perplexity_forward']:.1f}, backward {test['perplexity_backward']:.1f}, "
            f"average {test['perplexity']:.1f}; unigram {unigram:.1f}", flush=True,
        )
    return result
