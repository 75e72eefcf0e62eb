"""Training: bilm-tf's perplexity check, replica equality, exact resume, outputs, callbacks."""

import io
import math
import os
import re
import signal
import sys
import types

import keras
import numpy as np
import pytest
import tensorflow as tf

from elmo_keras.training.common.evaluation import evaluate_model
from elmo_keras.training.model_files import load_language_model, save_language_model
from elmo_keras.training.tf.trainer import Trainer


def _weights(trainer):
    return [v.numpy() for v in trainer.model.trainable_variables]


def _max_diff(a, b):
    return max(float(np.max(np.abs(x - y))) for x, y in zip(a, b, strict=True))


def test_bilm_tf_training_check(train_text, train_vocab, tiny_config):
    """bilm-tf's tests/test_training.py: a tiny char model on data.txt, held-out perplexity < 20."""
    config = dict(tiny_config)
    config.update(
        batch_size=2,
        unroll_steps=10,
        n_negative_samples_batch=16,
        dropout=0.1,
        all_clip_norm_val=1.0,
    )
    config["char_cnn"].update(
        filters=[[1, 8], [2, 8], [3, 16], [4, 32], [5, 64]],
        activation="tanh",
        max_characters_per_token=10,
        n_highway=1,
        embedding={"dim": 4},
    )
    trainer = Trainer(config, train_vocab, seed=1)
    result = trainer.fit(train_text, epochs=50, log_every=10**6)
    assert result["stopped"] == "epochs"
    metrics = trainer.evaluate(train_text, batch_size=1)
    assert metrics["tokens"] == 139  # 134 words + 5 </S>
    assert metrics["perplexity"] < 20.0, metrics


def test_two_replicas_equal_one(train_text, train_vocab, tiny_config):
    """MirroredStrategy over 2 logical CPUs == 1 device, same global batch (last batch padded).

    Sampled softmax (candidates keyed by the step) and carried state included.
    """
    one = Trainer(tiny_config, train_vocab, seed=3)
    result_one = one.fit(train_text, epochs=1, log_every=10**6)
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    two = Trainer(tiny_config, train_vocab, strategy=mirrored, seed=3)
    result_two = two.fit(train_text, epochs=1, log_every=10**6)
    # One 88-token sentence keeps one row busy while the others run dry: the last batches
    # are mostly padding.
    assert result_one["steps"] == result_two["steps"] == 15
    assert result_one["tokens"] == result_two["tokens"] == 139
    assert _max_diff(_weights(one), _weights(two)) < 1e-5
    np.testing.assert_allclose(one.state_h.numpy(), two.state_h.numpy(), atol=1e-5)


def test_resume_after_signal_is_exact(train_text, train_vocab, tiny_config, tmp_path):
    """A run stopped by SIGINT at step 4 and resumed ends like an uninterrupted run."""
    tiny_config.update(dropout=0.1, batch_size=2)
    reference = Trainer(tiny_config, train_vocab, seed=5)
    reference.fit(train_text, steps=10, output_dir=tmp_path / "a", log_every=10**6)

    def interrupt(step, metrics):
        if step == 4:
            os.kill(os.getpid(), signal.SIGINT)

    first = Trainer(tiny_config, train_vocab, seed=5)
    stopped = first.fit(
        train_text,
        steps=10,
        output_dir=tmp_path / "b",
        on_step=interrupt,
        checkpoint_every=3,
        log_every=10**6,
    )
    assert stopped["stopped"] == "signal" and stopped["steps"] == 4
    assert sorted(p.name for p in (tmp_path / "b" / "checkpoints").glob("*.index")) == [
        "ckpt-3.index",
        "ckpt-4.index",
    ]
    resumed = Trainer(tiny_config, train_vocab, seed=5)
    assert resumed.restore(tmp_path / "b" / "checkpoints").endswith("ckpt-4")
    result = resumed.fit(train_text, steps=10, output_dir=tmp_path / "b", log_every=10**6)
    assert result["steps"] == 10
    # Bit for bit (tests/training/test_faults.py does the same after a SIGKILL at a random step).
    pairs = zip(_weights(reference), _weights(resumed), strict=True)
    assert all(np.array_equal(a, b) for a, b in pairs)
    np.testing.assert_array_equal(reference.state_c.numpy(), resumed.state_c.numpy())


def test_checkpoint_rotation_and_export(train_text, train_vocab, tiny_config, tmp_path):
    trainer = Trainer(tiny_config, train_vocab, seed=0)
    trainer.fit(
        train_text,
        steps=6,
        output_dir=tmp_path,
        checkpoint_every=1,
        keep_checkpoints=2,
        log_every=2,
    )
    names = sorted(p.name for p in (tmp_path / "checkpoints").glob("*.index"))
    assert names == ["ckpt-5.index", "ckpt-6.index"]
    assert list((tmp_path / "logs").iterdir())  # TensorBoard events
    save_language_model(trainer.model, train_vocab, tmp_path / "model")
    import h5py

    from elmo_keras.weights import read_options

    options = read_options(tmp_path / "model" / "options.json")
    assert options["char_cnn"]["n_characters"] == 262
    with h5py.File(tmp_path / "model" / "lm_weights.hdf5") as handle:
        assert handle["char_embed"].shape == (261, 8)
        assert "RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0" in handle
    model, vocab = load_language_model(tmp_path / "model")
    assert vocab == train_vocab
    expected = trainer.evaluate(train_text, batch_size=3)
    got = evaluate_model(model, vocab, train_text, batch_size=3, unroll_steps=5)
    assert got["perplexity"] == pytest.approx(expected["perplexity"], rel=1e-5)


def test_errors(train_vocab, tiny_config):
    tiny_config["n_negative_samples_batch"] = 32
    with pytest.raises(ValueError, match="larger than its sample count"):
        Trainer(tiny_config, train_vocab)
    tiny_config["n_negative_samples_batch"] = 16
    tiny_config["batch_size"] = 3
    mirrored = tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"])
    with pytest.raises(ValueError, match="multiple of the number of replicas"):
        Trainer(tiny_config, train_vocab, strategy=mirrored)
    tiny_config["batch_size"] = 4
    trainer = Trainer(tiny_config, train_vocab)
    with pytest.raises(ValueError, match="give `steps`, `epochs` or `time_budget_s`"):
        trainer.fit("x.txt")
    with pytest.raises(ValueError, match="No text file matches"):
        trainer.fit("/nonexistent/*.txt", steps=1)
    with pytest.raises(ValueError, match="`log_every` must be an integer >= 1"):
        trainer.fit("x.txt", steps=1, log_every=0)
    with pytest.raises(ValueError, match="`shuffle_buffer` must be an integer >= 0. Received"):
        trainer.fit("x.txt", steps=1, shuffle_buffer=None)
    with pytest.raises(TypeError, match="unexpected keyword argument 'stepz'"):
        trainer.fit("x.txt", steps=1, stepz=2)
    # The old name of `tokenization_mode` still works, with a warning.
    with pytest.deprecated_call(match="tokenization_mode"):
        with pytest.raises(ValueError, match="No text file matches"):
            trainer.fit("/nonexistent/*.txt", steps=1, tokenization="punctuation")
    with pytest.raises(ValueError, match="`mixed_precision` must be one of"):
        Trainer(tiny_config, train_vocab, mixed_precision="float16")


class _Recorder(keras.callbacks.Callback):
    """Records every hook the trainer calls, with a copy of its logs."""

    def __init__(self, stop_at=None):
        super().__init__()
        self.calls = []
        self.stop_at = stop_at

    def on_train_begin(self, logs=None):
        self.calls.append(("train_begin", None, logs))

    def on_train_batch_end(self, batch, logs=None):
        self.calls.append(("batch_end", batch, dict(logs)))
        if batch == self.stop_at:
            self.model.stop_training = True

    def on_epoch_end(self, epoch, logs=None):
        self.calls.append(("epoch_end", epoch, dict(logs)))

    def on_train_end(self, logs=None):
        self.calls.append(("train_end", None, dict(logs)))


def test_callbacks_see_steps_epochs_and_losses(train_text, train_vocab, tiny_config):
    recorder = _Recorder()
    trainer = Trainer(tiny_config, train_vocab, seed=0)
    result = trainer.fit(train_text, epochs=2, log_every=10**6, callbacks=[recorder])
    assert recorder.model is trainer.model
    hooks = [name for name, _, _ in recorder.calls]
    assert hooks[0] == "train_begin" and hooks[-1] == "train_end"
    batches = [(step, logs) for name, step, logs in recorder.calls if name == "batch_end"]
    assert [step for step, _ in batches] == list(range(1, result["steps"] + 1))
    for _, logs in batches:
        expected = 0.5 * (logs["forward_nll"] + logs["backward_nll"]) / max(logs["tokens"], 1.0)
        assert logs["loss"] == pytest.approx(expected)
        assert math.isfinite(logs["grad_norm"])
    assert batches[0][1]["loss"] > 0
    assert sum(logs["tokens"] for _, logs in batches) == result["tokens"] == 2 * 139
    # One epoch end when the data starts its second pass (mid-run), one after the last pass.
    epochs = [(epoch, logs) for name, epoch, logs in recorder.calls if name == "epoch_end"]
    assert [epoch for epoch, _ in epochs] == [0, 1]
    after_first = hooks[hooks.index("epoch_end") + 1 :]
    assert after_first.count("batch_end") > 1  # the steps of the second pass
    assert all(logs["loss"] > 0 and logs["perplexity_forward"] > 1 for _, logs in epochs)
    end = recorder.calls[-1][2]
    assert end["stopped"] == "epochs" and end["steps"] == result["steps"]


def test_callback_stops_the_run(train_text, train_vocab, tiny_config, tmp_path):
    recorder = _Recorder(stop_at=3)
    steps_seen = []
    trainer = Trainer(tiny_config, train_vocab, seed=0)
    result = trainer.fit(
        train_text,
        steps=10,
        output_dir=tmp_path,
        log_every=10**6,
        callbacks=[recorder],
        on_step=lambda step, logs: steps_seen.append(step),
    )
    assert result["stopped"] == "callback" and result["steps"] == 3
    assert steps_seen == [1, 2, 3]
    assert sorted(p.name for p in (tmp_path / "checkpoints").glob("*.index")) == ["ckpt-3.index"]


def test_xla_matches_graph(train_text, train_vocab, tiny_config):
    """`jit_compile=True` (XLA per replica) trains to the same weights as the plain graph."""
    tiny_config.update(dropout=0.0)
    plain = Trainer(tiny_config, train_vocab, seed=2)
    plain.fit(train_text, steps=3, log_every=10**6)
    xla = Trainer(tiny_config, train_vocab, seed=2, jit_compile=True)
    xla.fit(train_text, steps=3, log_every=10**6)
    assert _max_diff(_weights(plain), _weights(xla)) < 1e-5


def test_bfloat16_mixed_precision(train_text, train_vocab, tiny_config, tmp_path):
    """bfloat16 compute: float32 variables, learning that tracks float32 training, and exported
    weights in float32 that reproduce the trained model's activations to bfloat16 precision."""
    tiny_config.update(batch_size=2, unroll_steps=10, learning_rate=0.2)
    runs = {}
    for policy in (None, "bfloat16"):
        trainer = Trainer(tiny_config, train_vocab, seed=4, mixed_precision=policy)
        assert all(v.dtype == "float32" for v in trainer.model.trainable_variables)
        before = trainer.evaluate(train_text, batch_size=2)["perplexity"]
        trainer.fit(train_text, epochs=3, log_every=10**6)
        runs[policy] = (trainer, before, trainer.evaluate(train_text, batch_size=2)["perplexity"])
    trainer, before, after = runs["bfloat16"]
    assert after < 0.5 * before, (before, after)
    # bfloat16 keeps 8 bits of mantissa: the two runs drift apart, but not far.
    assert after == pytest.approx(runs[None][2], rel=0.1)

    save_language_model(trainer.model, train_vocab, tmp_path / "model")
    from elmo_keras.models import BiLM
    from elmo_keras.text.char_ids import batch_to_char_ids

    bilm = BiLM.from_bilm_tf(
        tmp_path / "model" / "options.json", tmp_path / "model" / "lm_weights.hdf5"
    )
    ids = batch_to_char_ids([["The", "cat", "sat", "."], ["A", "dog", "."]])
    exported = bilm(ids)["activations"].numpy()
    trained = tf.cast(trainer.bilm(ids)["activations"], tf.float32).numpy()
    assert exported.dtype == np.float32
    scale = float(np.max(np.abs(exported)))
    assert float(np.max(np.abs(exported - trained))) < 0.05 * scale


def test_each_mirrored_strategy_gets_its_own_collective_keys():
    """Every `MirroredStrategy` numbers its collectives from the same key, so a second training
    on the same devices in one process failed with "Shape mismatch in the collective instance"
    (the freeze test of test_init_from.py, then `test_two_replicas_equal_one`)."""
    from elmo_keras.training.common.distribute import make_strategy

    strategies = [make_strategy("mirrored"), make_strategy("mirrored")]
    strategies.append(tf.distribute.MirroredStrategy(["/cpu:0", "/cpu:1"]))  # made elsewhere
    keys = {
        s.extended._collective_keys.get_group_key(s.extended.worker_devices) for s in strategies
    }
    assert len(keys) == 3


def test_log_lines_name_the_epoch_when_epochs_are_given(
    train_text, train_vocab, tiny_config, capsys
):
    tiny_config.update(batch_size=2)  # 40 tokens a step: several steps in each pass
    trainer = Trainer(tiny_config, train_vocab, seed=3)
    result = trainer.fit(train_text, epochs=2, log_every=1)
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("step ")]
    epochs = [re.match(r"step (\d+) \(epoch (\d) of 2\): loss", line) for line in lines]
    assert all(epochs) and len(epochs) == result["steps"], lines
    passes = [int(match.group(2)) for match in epochs]
    assert passes[0] == 1 and passes[-1] == 2 and passes == sorted(passes), passes
    trainer.fit(train_text, steps=result["steps"] + 1, log_every=1)
    assert f"step {result['steps'] + 1}: loss" in capsys.readouterr().out  # no epochs: none named


def test_a_text_file_changed_under_the_run_stops_it_with_its_own_error(
    train_text, train_vocab, tiny_config, monkeypatch
):
    """Issue 39, point 9: the packer's error (a training file changed during an epoch) reaches
    the caller as itself, one line, not as TensorFlow's `OpError` with a traceback inside."""
    from elmo_keras.training.feed.file_changes import ChangedFileError
    from elmo_keras.training.tf import trainer as trainer_module

    def changed_stream(*args):
        yield ["a", "b"]
        raise ChangedFileError("The training file T changed while the run read it (...)")

    class Stream:
        epoch = 0

        def __init__(self, *args):
            self.args = args

        def __iter__(self):
            return changed_stream()

    monkeypatch.setattr(trainer_module, "SentenceStream", Stream)
    trainer = Trainer(tiny_config, train_vocab, seed=0)
    with pytest.raises(ChangedFileError, match="^The training file T changed"):
        list(trainer._batches(train_text, None, "whitespace", 0, 0))


@pytest.mark.parametrize("step", [-100, 2**62])
def test_a_checkpoint_step_outside_the_range_is_refused(train_vocab, tiny_config, tmp_path, step):
    """Issue 39, point 17: step -100 gave "`seed` must be ..." and 2**62 was accepted."""
    trainer = Trainer(tiny_config, train_vocab, seed=5)
    trainer.state.step.assign(step)
    tf.train.CheckpointManager(trainer.state.checkpoint, str(tmp_path), 1).save(3)
    with pytest.raises(ValueError, match=rf"ckpt-3 holds step {step}; a checkpoint's step is"):
        Trainer(tiny_config, train_vocab, seed=5).restore(tmp_path)


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_on_a_terminal_the_log_lines_and_the_progress_bar_both_show(
    train_text, train_vocab, tiny_config, monkeypatch
):
    """Issue 39, point 18: with the bar on, every `log_every` line is printed too (the bar's
    line is cleared first, and the bar drawn again below it); was the bar alone."""
    terminal = _Terminal()
    monkeypatch.setattr(sys, "stdout", terminal)
    trainer = Trainer(tiny_config, train_vocab, seed=3)
    trainer.fit(train_text, steps=4, log_every=2)
    printed = terminal.getvalue()
    assert "\r\x1b[Kstep 2: loss " in printed and "\r\x1b[Kstep 4: loss " in printed
    assert "4/4" in printed and "loss:" in printed  # the bar, with its running loss


def test_the_time_budget_counts_from_the_end_of_the_first_step(
    train_text, train_vocab, tiny_config, monkeypatch
):
    """Issue 39, point 18: compiling the step (here a first step that takes 100 s of a fake
    clock) does not count against the time budget (was: 1 step, then "time"); the budget
    still ends the run once 10 s of training have passed."""
    from elmo_keras.training.common import stopping

    clock = [0.0]
    monkeypatch.setattr(stopping, "time", types.SimpleNamespace(perf_counter=lambda: clock[0]))
    trainer = Trainer(tiny_config, train_vocab, seed=3)
    run_step = trainer._run_step

    def step(batch, requests):
        clock[0] += {0: 100.0, 2: 11.0}.get(trainer.global_step, 0.0)
        return run_step(batch, requests)

    trainer._run_step = step
    result = trainer.fit(train_text, steps=10, time_budget_s=10, log_every=10**6)
    assert (result["steps"], result["stopped"]) == (3, "time")
