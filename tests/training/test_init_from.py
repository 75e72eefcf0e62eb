"""`TrainingRun(init_from=...)`: training that starts from a run folder or published biLM files.

The expectations come from the source files themselves (read with h5py) and from the source
model evaluated on its own, never from the run under test.
"""

import hashlib
import json
import random

import h5py
import keras
import numpy as np
import pytest

from elmo_keras.text.vocabulary import Vocabulary
from elmo_keras.training import TrainingRun, get_config, train
from elmo_keras.training.common.evaluation import evaluate_model
from elmo_keras.training.model_files import load_language_model
from elmo_keras.weights import save_weights

PUBLISHED = ("options.json", "lm_weights.hdf5")


def _hdf5(path):
    """Every dataset of an hdf5 file as a NumPy array."""
    out = {}
    with h5py.File(path) as handle:
        handle.visititems(
            lambda name, obj: (
                out.__setitem__(name, obj[()]) if isinstance(obj, h5py.Dataset) else None
            )
        )
    return out


class _Watch(keras.callbacks.Callback):
    """Keeps the biLM's and the softmax's values before the first step and after some steps."""

    def __init__(self, steps=(), stop_at=None):
        super().__init__()
        self.steps, self.stop_at, self.seen = set(steps), stop_at, {}

    def _keep(self, key):
        bilm = [v.numpy() for v in self.model.bilm.trainable_variables]
        softmax = [self.model.softmax_kernel.numpy(), self.model.softmax_bias.numpy()]
        self.seen[key] = (bilm, softmax)

    def on_train_begin(self, logs=None):
        self._keep(0)

    def on_train_batch_end(self, step, logs=None):
        if step in self.steps:
            self._keep(step)
        if step == self.stop_at:
            self.model.stop_training = True


def _equal(a, b):
    return all(np.array_equal(x, y) for x, y in zip(a, b, strict=True))


@pytest.fixture(scope="module")
def source_run(tmp_path_factory, bilm_tf_fixture):
    """A tiny run folder trained a few steps on bilm-tf's corpus (what `init_from` reads)."""
    config = get_config("tiny")  # tests/training/conftest.py's `tiny_config`
    config.update(batch_size=4, unroll_steps=5, n_negative_samples_batch=16, dropout=0.0)
    config["lstm"].update(dim=16, projection_dim=8)
    folder = tmp_path_factory.mktemp("source") / "run"
    data = str(bilm_tf_fixture / "train" / "data.txt")
    train(TrainingRun(data, folder, config=config, steps=6, strategy="default", verbose=False))
    return folder


def test_a_run_folder_starts_exactly_from_its_weights(source_run, train_text, tmp_path):
    """The step-0 check: before the first step, the char CNN, the LSTMs and the softmax equal the
    source's files bit for bit, and so does the full-softmax perplexity of the source model."""
    vocabulary = Vocabulary.load(source_run / "vocab.txt")

    class AtStart(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            save_weights(self.model.bilm, tmp_path / "start.hdf5")
            self.softmax = (self.model.softmax_kernel.numpy(), self.model.softmax_bias.numpy())
            self.perplexity = evaluate_model(self.model, vocabulary, train_text, 3, 5)

    at_start = AtStart()
    run = TrainingRun(train_text, tmp_path / "run", init_from=source_run, steps=1, verbose=False)
    summary = train(run, callbacks=[at_start])
    source = _hdf5(source_run / "lm_weights.hdf5")
    start = _hdf5(tmp_path / "start.hdf5")
    assert sorted(start) == sorted(source) and len(source) > 20
    assert all(start[name].tobytes() == source[name].tobytes() for name in source)
    softmax = _hdf5(source_run / "softmax.hdf5")
    assert at_start.softmax[0].tobytes() == softmax["softmax/W"].tobytes()
    assert at_start.softmax[1].tobytes() == softmax["softmax/b"].tobytes()
    model, source_vocabulary = load_language_model(source_run)
    assert source_vocabulary == vocabulary
    assert at_start.perplexity == evaluate_model(model, vocabulary, train_text, 3, 5)
    # The run keeps the source's vocabulary and configuration, and records where it started.
    assert (tmp_path / "run" / "vocab.txt").read_text() == (source_run / "vocab.txt").read_text()
    saved = json.loads((tmp_path / "run" / "training_config.json").read_text())
    source_saved = json.loads((source_run / "training_config.json").read_text())
    assert saved["config"] == source_saved["config"]
    weights = (source_run / "lm_weights.hdf5").read_bytes()
    assert saved["init_from"] == {
        "kind": "run",
        "source": str(source_run),
        "options": str(source_run / "options.json"),
        "weights": str(source_run / "lm_weights.hdf5"),
        "weights_sha256": hashlib.sha256(weights).hexdigest(),
        "softmax": "kept",
    }
    assert summary["started_from"] == f"the run folder {source_run} (biLM, vocabulary and softmax)"


def test_published_files_get_a_new_softmax_over_the_new_vocabulary(
    allennlp_fixture, train_text, tmp_path
):
    watch = _Watch(steps=[3])
    files = tuple(str(allennlp_fixture / name) for name in PUBLISHED)
    run = TrainingRun(
        train_text,
        tmp_path / "run",
        init_from=files,
        batch_size=4,
        n_negative_samples=16,
        steps=3,
        strategy="default",
        verbose=False,
    )
    summary = train(run, callbacks=[watch])
    trainer = summary["trainer"]
    vocabulary = Vocabulary.load(tmp_path / "run" / "vocab.txt")
    assert len(vocabulary) == 80 and trainer.vocabulary == vocabulary  # built from the text
    assert trainer.model.softmax_kernel.shape == (80, 16)  # the source's projection_dim
    # Before the first step the biLM is the published file's, after 3 steps it has moved.
    save_weights(trainer.bilm, tmp_path / "end.hdf5")
    published = _hdf5(allennlp_fixture / "lm_weights.hdf5")
    (bilm, softmax), (bilm_3, softmax_3) = watch.seen[0], watch.seen[3]
    trainer.bilm.set_weights(bilm)
    save_weights(trainer.bilm, tmp_path / "start.hdf5")
    start = _hdf5(tmp_path / "start.hdf5")
    assert all(np.array_equal(start[name], published[name]) for name in start)
    assert not _equal(bilm, bilm_3) and not _equal(softmax, softmax_3)
    assert summary["train"]["steps"] == 3 and np.isfinite(summary["train"]["tokens"])
    saved = json.loads((tmp_path / "run" / "training_config.json").read_text())
    assert saved["init_from"]["kind"] == "files" and saved["init_from"]["softmax"] == "new"
    assert saved["config"]["lstm"]["dim"] == 64 and saved["config"]["batch_size"] == 4


def test_new_vocab_leaves_the_run_folders_vocabulary_behind(source_run, train_text, tmp_path):
    run = TrainingRun(
        train_text,
        tmp_path / "run",
        init_from=source_run,
        new_vocab=True,
        min_count=2,
        steps=1,
        n_negative_samples=0,
        verbose=False,
    )
    trainer = train(run)["trainer"]
    words = (tmp_path / "run" / "vocab.txt").read_text().split()
    assert len(words) < len((source_run / "vocab.txt").read_text().split())
    assert trainer.model.softmax_kernel.shape[0] == len(words)
    saved = json.loads((tmp_path / "run" / "training_config.json").read_text())
    assert saved["init_from"]["softmax"] == "new" and saved["new_vocab"] is True


def test_freeze_bilm_steps_trains_only_the_softmax_first_and_survives_resume(
    allennlp_fixture, train_text, tmp_path
):
    """Two replicas (MirroredStrategy over two logical CPUs): the biLM is bit-for-bit unchanged
    for the first 3 steps while the softmax learns, then it learns too. A run stopped at step 2
    and resumed keeps it frozen through step 3 (the setting and the step are saved)."""

    def run(folder, steps, **changes):
        settings = dict(
            init_from=tuple(str(allennlp_fixture / name) for name in PUBLISHED),
            batch_size=4,
            n_negative_samples=16,
            freeze_bilm_steps=3,
            strategy="default",
            verbose=False,
        )
        settings.update(changes)
        return TrainingRun(train_text, tmp_path / folder, steps=steps, **settings)

    mirrored = _Watch(steps=[3, 4])
    summary = train(run("a", 4, strategy="mirrored"), callbacks=[mirrored])
    assert summary["trainer"].strategy.num_replicas_in_sync == 2
    (bilm_0, softmax_0), (bilm_3, softmax_3) = mirrored.seen[0], mirrored.seen[3]
    assert _equal(bilm_0, bilm_3) and not _equal(softmax_0, softmax_3)
    assert not _equal(bilm_0, mirrored.seen[4][0])

    first = train(run("b", 4), callbacks=[_Watch(stop_at=2)])
    assert first["train"]["stopped"] == "callback" and first["train"]["steps"] == 2
    resumed = _Watch(steps=[3, 4])
    train(run("b", 4, resume=True, init_from=None, freeze_bilm_steps=None), callbacks=[resumed])
    assert _equal(resumed.seen[0][0], bilm_0) and _equal(resumed.seen[3][0], bilm_0)
    assert not _equal(resumed.seen[3][1], resumed.seen[0][1])
    assert not _equal(resumed.seen[4][0], bilm_0)


def _domain_text(path, sentences, seed):
    """Sentences of a small grammar over words of bilm-tf's corpus: a new domain that the
    source's vocabulary covers."""
    subjects = ["neural networks", "language models", "these models", "the neural net"]
    verbs = ["use", "make", "avoid", "help", "estimate"]
    objects = ["continuous representations", "probabilities", "the vocabulary", "this problem"]
    rng = random.Random(seed)
    lines = [
        f"{rng.choice(subjects)} {rng.choice(verbs)} {rng.choice(objects)} .\n"
        for _ in range(sentences)
    ]
    path.write_text("".join(lines))
    return str(path)


def test_fine_tuning_lowers_held_out_perplexity_on_the_new_domain(source_run, tmp_path):
    """The paper's recipe in small: fine-tuning the source biLM (with its softmax) on text of a
    new domain lowers the held-out perplexity there, compared with where it started."""
    train_file = _domain_text(tmp_path / "train.txt", 200, seed=1)
    held_out = _domain_text(tmp_path / "held_out.txt", 40, seed=2)
    model, vocabulary = load_language_model(source_run)
    before = evaluate_model(model, vocabulary, held_out, 4, 5)["perplexity"]
    run = TrainingRun(
        train_file,
        tmp_path / "tuned",
        init_from=source_run,
        valid_files=held_out,
        eval_batch_size=4,
        steps=40,
        seed=0,
        strategy="default",
        verbose=False,
    )
    after = train(run)["valid"]["perplexity"]
    assert after < 0.5 * before, (before, after)


def test_a_packaged_preset_with_a_softmax_brings_its_vocabulary_along():
    from elmo_keras.training.run.init_source import resolve_source

    source = resolve_source("mini_en")
    assert source.kind == "preset"
    assert source.vocab.name == "vocab.txt" and source.softmax.name == "softmax.hdf5"
    assert resolve_source("mini_en", new_vocab=True).softmax is None
    assert resolve_source("tiny").softmax is None  # AllenNLP's test model ships no softmax
