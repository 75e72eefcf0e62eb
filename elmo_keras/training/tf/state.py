"""What a training checkpoint holds, built under the strategy: the model, the optimizer, the step
and the LSTM state carried from window to window."""

import tensorflow as tf

from elmo_keras.training.common import distribute
from elmo_keras.training.common.checkpoints import (
    check_step,
    remove_orphans,
    write_checkpoint,
)
from elmo_keras.training.common.model_setup import make_language_model, make_optimizer


def _first_replica_variable(initial_value, name, dtype=None):
    """A non-trainable variable that the whole step writes once (the first replica's copy)."""
    return tf.Variable(
        initial_value,
        dtype=dtype,
        trainable=False,
        name=name,
        aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
    )


class TrainingState:
    """The variables of a training run and their checkpoints.

    Builds, in `strategy.scope()`, a `LanguageModel` for the configuration, its optimizer, the
    step counter (`step`, int64: also the data position) and the carried LSTM state of the whole
    global batch (`state_h` `[batch_size, 2, n_layers, projection_dim]`, `state_c` with
    `lstm_units`), and the `tf.train.Checkpoint` of all of them (`checkpoint`).

    Every worker of a multi-worker run takes part in a save (a collective); only the chief's
    copy is kept (`distribute.worker_directory`).

    Args:
        config: `TrainingConfig`.
        vocabulary_size: int. Words of the softmax.
        strategy: `tf.distribute.Strategy`.
        seed: int. Seeds the initial weights.
        mixed_precision: None or `"bfloat16"`.
    """

    def __init__(self, config, vocabulary_size, strategy, seed=0, mixed_precision=None):
        self.strategy = strategy
        batch_size = config.batch_size
        with strategy.scope():
            self.model = make_language_model(config, vocabulary_size, seed, mixed_precision)
            bilm = self.model.bilm
            self.optimizer = make_optimizer(config)
            self.optimizer.build(self.model.trainable_variables)
            self.step = _first_replica_variable(0, "step", tf.int64)
            layers = [batch_size, 2, bilm.n_layers]
            self.state_h = _first_replica_variable(
                tf.zeros(layers + [bilm.projection_dim]), "state_h"
            )
            self.state_c = _first_replica_variable(tf.zeros(layers + [bilm.lstm_units]), "state_c")
        self.parts = {
            "model": list(self.model.variables),
            "optimizer": list(self.optimizer.variables),
            "step": self.step,
            "state_h": self.state_h,
            "state_c": self.state_c,
        }
        self.checkpoint = tf.train.Checkpoint(**self.parts)

    def replica_rows(self, ctx, rows):
        """The carried state of this replica's `rows` rows of the global batch (in a step)."""
        start = tf.cast(ctx.replica_id_in_sync_group, tf.int32) * rows
        return self.state_h[start : start + rows], self.state_c[start : start + rows]

    def carry(self, ctx, new_h, new_c):
        """Stores every replica's final LSTM state for the next window (in a step)."""
        new_h = tf.cast(new_h, tf.float32)
        new_c = tf.cast(new_c, tf.float32)
        if ctx.num_replicas_in_sync > 1:
            new_h = ctx.all_gather(new_h, axis=0)
            new_c = ctx.all_gather(new_c, axis=0)
        self.state_h.assign(new_h)
        self.state_c.assign(new_c)

    def manager(self, directory, keep):
        """A `tf.train.CheckpointManager` keeping `keep` checkpoints in `directory`.

        Removes the `ckpt-N_temp/` folders that a save killed earlier left there.
        """
        directory = distribute.worker_directory(directory, self.strategy)
        remove_orphans(directory)
        return tf.train.CheckpointManager(self.checkpoint, str(directory), max_to_keep=keep)

    def save(self, manager):
        """Saves a checkpoint numbered by the step; returns its prefix.

        Raises:
            checkpoints.CheckpointWriteError: the write failed (one line naming the checkpoint
                to resume from); no temporary folder is left.
        """
        step = int(self.step.numpy())
        path = write_checkpoint(
            lambda: manager.save(checkpoint_number=step), manager.directory, step
        )
        distribute.discard_worker_copy(manager.directory, self.strategy)
        return path

    def restore(self, prefix, skip=()):
        """Restores the checkpoint `prefix` (every variable must match).

        Args:
            prefix: str. The checkpoint.
            skip: names of parts to leave as they are: `"optimizer"` (a run resumed with
                another optimizer) and `"state"` (the carried LSTM state, for another batch
                size).
        """
        parts = dict(self.parts)
        for name in skip:
            for key in ("state_h", "state_c") if name == "state" else (name,):
                parts.pop(key)
        checkpoint = tf.train.Checkpoint(**parts) if skip else self.checkpoint
        status = checkpoint.restore(str(prefix)).assert_existing_objects_matched()
        if skip:
            status.expect_partial()
        check_step(self.step.numpy(), prefix)


def read_model(prefix, config, vocabulary_size, seed):
    """The `LanguageModel` of the checkpoint `prefix` (its optimizer and carried state are not
    read: they may differ and are not exported), under the current strategy."""
    state = TrainingState(config, vocabulary_size, tf.distribute.get_strategy(), seed)
    state.restore(prefix, skip=("optimizer", "state"))
    return state.model
