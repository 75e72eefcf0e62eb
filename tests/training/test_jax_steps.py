"""The JAX trainer's step in this process (the second, `KERAS_BACKEND=jax` run of `make test`):
the sparse softmax update equals the dense one, a frozen biLM stays bit for bit, bfloat16 trains,
the settings reach the step."""

import copy
import re
import socket

import keras
import numpy as np
import pytest

from elmo_keras.training.configs import get_config

pytestmark = pytest.mark.skipif(
    keras.config.backend() != "jax", reason="needs KERAS_BACKEND=jax (the second `make test`)"
)


def _config(**changes):
    config = get_config("tiny")
    config.update(batch_size=4, unroll_steps=5, n_negative_samples_batch=16, dropout=0.0)
    config["lstm"].update(dim=16, projection_dim=8)
    config.update(changes)
    return config


def _trainer(config, vocabulary, **kwargs):
    from elmo_keras.training.jax.jax_trainer import JaxTrainer

    return JaxTrainer(copy.deepcopy(config), vocabulary, seed=2, **kwargs)


def _values(variables):
    return [np.asarray(v.value) for v in variables]


def test_sparse_softmax_rows_equal_the_dense_update(train_text, train_vocab):
    """Adagrad on the gathered rows (repeated ids summed) == Adagrad on the whole kernel,
    after 4 steps with clipping: weights and the kernel's accumulator (1e-6)."""
    config = _config(all_clip_norm_val=0.5)
    dense = _trainer(config, train_vocab, sparse_softmax=False)
    sparse = _trainer(config, train_vocab, sparse_softmax=True)
    for trainer in (dense, sparse):
        trainer.fit(train_text, steps=4, log_every=10**6)
    for a, b in zip(_values(dense.model.variables), _values(sparse.model.variables), strict=True):
        np.testing.assert_allclose(a, b, atol=1e-6, rtol=1e-6)
    kernel = dense.model.softmax_kernel
    index = next(i for i, v in enumerate(dense.optimizer._trainable_variables) if v is kernel)
    dense_accumulator = np.asarray(dense.optimizer._accumulators[index].value)
    np.testing.assert_allclose(dense_accumulator, np.asarray(sparse.state.accumulator), rtol=1e-6)
    assert np.any(dense_accumulator != 1.0)  # some rows were trained
    with pytest.raises(ValueError, match="`sparse_softmax` needs Adagrad and a sampled softmax"):
        _trainer(_config(optimizer="adam"), train_vocab, sparse_softmax=True)


def test_frozen_bilm_keeps_its_weights_bit_for_bit(train_text, train_vocab):
    trainer = _trainer(_config(), train_vocab, freeze_bilm_steps=3)
    before = _values(trainer.model.bilm.trainable_variables)
    softmax = np.asarray(trainer.model.softmax_kernel.value)
    trainer.fit(train_text, steps=3, log_every=10**6)
    for a, b in zip(before, _values(trainer.model.bilm.trainable_variables), strict=True):
        np.testing.assert_array_equal(a, b)
    assert np.any(np.asarray(trainer.model.softmax_kernel.value) != softmax)
    trainer.fit(train_text, steps=4, log_every=10**6)  # step 3 is past the frozen ones
    changed = [
        np.any(a != b)
        for a, b in zip(before, _values(trainer.model.bilm.trainable_variables), strict=True)
    ]
    assert any(changed)


def test_bfloat16_trains_close_to_float32(train_text, train_vocab):
    """bf16 compute with float32 variables: finite losses within 5% of float32 after 6 steps;
    the variables and the optimizer stay float32."""
    losses = {}
    for precision in (None, "bfloat16"):
        trainer = _trainer(_config(), train_vocab, mixed_precision=precision)
        logs = losses[precision] = []
        trainer.fit(
            train_text,
            steps=6,
            log_every=10**6,
            on_step=lambda s, out, logs=logs: logs.append(out["loss"]),
        )
        assert {v.dtype for v in trainer.model.trainable_variables} == {"float32"}
    assert np.all(np.isfinite(losses["bfloat16"]))
    np.testing.assert_allclose(losses["bfloat16"], losses[None], rtol=0.05)


def test_time_budget_alone_ends_the_run(train_text, train_vocab, tmp_path):
    """Neither steps nor epochs: the time budget stops it, with a checkpoint and TensorBoard
    scalars (read back by the event-file reader of the tests, no TensorFlow here)."""
    trainer = _trainer(_config(), train_vocab)
    result = trainer.fit(train_text, time_budget_s=3.0, log_every=2, output_dir=tmp_path)
    assert result["stopped"] == "time" and result["steps"] >= 1
    assert (tmp_path / "checkpoints" / f"ckpt-{result['steps']}.npz").is_file()
    assert list((tmp_path / "logs").glob("events.out.tfevents.*"))


def test_a_damaged_newest_checkpoint_falls_back_to_the_previous_one(
    train_text, train_vocab, tmp_path, capsys
):
    """A truncated ckpt-4.npz: `restore` says so in one line and goes on from ckpt-2, which
    holds step 2's weights; a checkpoint of another run's shapes is refused by name."""
    trainer = _trainer(_config(), train_vocab)
    trainer.fit(train_text, steps=2, log_every=10**6, output_dir=tmp_path, checkpoint_every=2)
    at_two = _values(trainer.model.variables)
    trainer.fit(train_text, steps=4, log_every=10**6, output_dir=tmp_path, checkpoint_every=2)
    newest = tmp_path / "checkpoints" / "ckpt-4.npz"
    newest.write_bytes(newest.read_bytes()[:1000])
    resumed = _trainer(_config(), train_vocab)
    restored = resumed.restore(tmp_path / "checkpoints")
    assert restored.endswith("ckpt-2") and resumed.global_step == 2
    assert "skipped unreadable checkpoint ckpt-4" in capsys.readouterr().err
    for a, b in zip(at_two, _values(resumed.model.variables), strict=True):
        np.testing.assert_array_equal(a, b)
    wider = _config()
    wider["lstm"]["projection_dim"] = 16
    other = _trainer(wider, train_vocab)
    with pytest.raises(ValueError, match="ckpt-2.npz does not fit this run"):
        other.restore_file(tmp_path / "checkpoints" / "ckpt-2")


@pytest.mark.parametrize("step", [-100, 2**62])
def test_a_checkpoint_step_outside_the_range_is_refused(train_vocab, tmp_path, step):
    """Issue 39, point 17: step -100 gave "`seed` must be ..." and 2**62 was accepted."""
    from elmo_keras.training.jax.array_checkpoints import variable_arrays, write_arrays

    trainer = _trainer(_config(), train_vocab)
    arrays = variable_arrays("model", trainer.model.variables, np.asarray)
    arrays.update(step=np.asarray(step, np.int64), state_h=trainer.state_h)
    arrays.update(state_c=trainer.state_c)
    write_arrays(tmp_path / "ckpt-3.npz", arrays)
    with pytest.raises(ValueError, match=rf"ckpt-3.npz holds step {step}; a checkpoint's step"):
        trainer.restore_file(tmp_path / "ckpt-3", skip=("optimizer",))


def test_leftovers_of_a_killed_save_are_removed(tmp_path):
    """A temporary file of a save whose process is gone is deleted when a manager opens the
    folder; a finished checkpoint is kept."""
    from elmo_keras.training.jax.array_checkpoints import ArrayCheckpointManager, read_arrays

    manager = ArrayCheckpointManager(tmp_path, keep=2)
    manager.save(1, {"step": np.asarray(1)})
    host = re.sub(r"[^A-Za-z0-9-]", "", socket.gethostname())[:32] or "host"  # as files.py
    leftover = tmp_path / f".ckpt-2.npz.partial-{host}.999999.abcdefgh"
    leftover.write_bytes(b"half")
    ArrayCheckpointManager(tmp_path, keep=2)
    assert not leftover.exists()
    assert int(read_arrays(tmp_path / "ckpt-1.npz")["step"]) == 1
    for step in (2, 3):
        manager.save(step, {"step": np.asarray(step)})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ckpt-2.npz", "ckpt-3.npz"]


def test_init_from_a_run_folder_starts_from_its_files(train_text, tmp_path):
    """`train(TrainingRun(init_from=run_folder))` on JAX: before the first step the biLM and the
    softmax are the source run's files, bit for bit; the frozen biLM stays so for 2 steps."""
    from elmo_keras.training.pipeline import train
    from elmo_keras.training.run.training_run import TrainingRun
    from elmo_keras.weights import load_softmax

    common = {"steps": 3, "log_every": 10**6, "verbose": False, "progress": False}
    train(TrainingRun(train_text, tmp_path / "source", config=_config(), seed=1, **common))

    class Snapshot(keras.callbacks.Callback):
        def on_train_begin(self, logs=None):
            self.kernel = np.asarray(self.model.softmax_kernel.value)
            self.bilm = _values(self.model.bilm.trainable_variables)

        def on_train_batch_end(self, batch, logs=None):
            if batch == 2:
                self.frozen = _values(self.model.bilm.trainable_variables)

    snapshot = Snapshot()
    run = TrainingRun(
        train_text,
        tmp_path / "tuned",
        init_from=str(tmp_path / "source"),
        freeze_bilm_steps=2,
        **common,
    )
    summary = train(run, callbacks=[snapshot])
    kernel, _ = load_softmax(tmp_path / "source" / "softmax.hdf5")
    np.testing.assert_array_equal(snapshot.kernel, kernel)
    from elmo_keras.models import BiLM

    source = BiLM.from_bilm_tf(
        tmp_path / "source" / "options.json", tmp_path / "source" / "lm_weights.hdf5"
    )
    for a, b in zip(_values(source.trainable_variables), snapshot.bilm, strict=True):
        np.testing.assert_array_equal(a, b)
    for a, b in zip(snapshot.bilm, snapshot.frozen, strict=True):
        np.testing.assert_array_equal(a, b)
    assert summary["init_from"]["kind"] == "run"
    assert summary["train"]["steps"] == 3


def test_loop_settings_train_as_the_plain_loop_for_200_steps(train_text, train_vocab):
    """Issue 43, point 1: an unrolled loop with both directions stacked trains as the plain
    loop: the same first step (1e-6) and, after 200 steps, the same weights (1e-5; float
    round-off of the batched products accumulates)."""
    config = _config(all_clip_norm_val=1.0)
    plain = _trainer(config, train_vocab)
    looped = _trainer(config, train_vocab, unroll=3, stack_directions=True)
    assert looped.model.bilm.bilstm.unroll == 3 and looped.model.bilm.bilstm.stack_directions
    first = []
    for trainer in (plain, looped):
        trainer.fit(
            train_text, steps=1, log_every=10**6, on_step=lambda s, logs: first.append(logs)
        )
    for key in ("loss", "forward_nll", "backward_nll", "grad_norm"):
        np.testing.assert_allclose(first[1][key], first[0][key], rtol=1e-6)
    for trainer in (plain, looped):
        trainer.fit(train_text, steps=200, log_every=10**6)
    moved = 0.0
    for a, b, start in zip(
        _values(plain.model.variables),
        _values(looped.model.variables),
        _values(_trainer(config, train_vocab).model.variables),
        strict=True,
    ):
        np.testing.assert_allclose(b, a, atol=1e-5, rtol=1e-5)
        moved = max(moved, float(np.abs(a - start).max()))
    assert moved > 1e-2  # the 200 steps trained


def test_metrics_read_later_give_the_same_run(train_text, train_vocab, tmp_path):
    """Issue 43, point 1: the step's metrics are read on the host only at a log line, a
    checkpoint, a stop or every `pending_steps` steps; the run is the one that reads them at
    every step: the same logged lines, checkpoints and weights, bit for bit."""
    runs = {}
    for pending in (1, 16):
        trainer = _trainer(_config(), train_vocab)
        trainer.pending_steps = pending
        out = tmp_path / f"pending{pending}"
        summary = trainer.fit(
            train_text, steps=23, log_every=5, checkpoint_every=10, output_dir=out
        )
        runs[pending] = (trainer, summary, sorted(p.name for p in (out / "checkpoints").iterdir()))
    (one, one_summary, one_files), (later, later_summary, later_files) = runs[1], runs[16]
    assert later_files == one_files and any("ckpt-10" in name for name in one_files)
    for key in ("steps", "tokens", "train_perplexity_forward", "train_perplexity_backward"):
        assert later_summary[key] == one_summary[key], key
    for a, b in zip(_values(one.model.variables), _values(later.model.variables), strict=True):
        np.testing.assert_array_equal(a, b)


def test_feed_workers_give_the_same_run(train_text, train_vocab):
    """Issue 43, point 2: with `feed_workers` (`train --feed-workers N`) processes tokenize the
    text and look up its word ids for the packer; the run is the same, bit for bit."""
    trainers = []
    for workers in (0, 2):
        trainer = _trainer(_config(), train_vocab)
        trainer.feed_workers = workers
        stream = trainer._packer(train_text, None, "whitespace", 0).sentences
        assert (stream.workers, stream.vocabulary is not None) == (workers, workers > 0)
        trainer.fit(train_text, steps=3, log_every=10**6, handle_signals=False)
        trainers.append(trainer)
    for a, b in zip(*(_values(t.model.variables) for t in trainers), strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_loop_defaults_follow_the_devices(train_vocab):
    """`unroll` and `stack_directions` not given: unrolled 4 times and stacked on GPUs and
    TPUs, the plain loop on CPUs; given ones are kept."""
    import types

    from elmo_keras.training.jax.jax_trainer import loop_defaults

    kinds = [types.SimpleNamespace(platform=p) for p in ("cpu", "gpu", "tpu")]
    assert loop_defaults(kinds[:1]) == (1, False)
    assert loop_defaults(kinds[1:2]) == loop_defaults(kinds[2:]) == (4, True)
    bilstm = _trainer(_config(), train_vocab).model.bilm.bilstm
    assert (bilstm.unroll, bilstm.stack_directions) == (1, False)  # this process: CPUs
    given = _trainer(_config(), train_vocab, unroll=2, stack_directions=True).model.bilm.bilstm
    assert (given.unroll, given.stack_directions) == (2, True)
