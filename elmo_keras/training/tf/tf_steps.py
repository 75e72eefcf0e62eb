"""The TensorFlow trainer's compiled evaluation step (the training step is `trainer.Trainer`'s,
under its strategy)."""

import tensorflow as tf

from elmo_keras.training.common.step_ops import eval_outputs


def make_eval_step(model, in_basis=None):
    """`eval_step(batch, state_h, state_c)` -> `step_ops.eval_outputs`, one `tf.function`."""

    @tf.function(reduce_retracing=True, autograph=False)  # no Python control flow inside
    def eval_step(batch, state_h, state_c):
        return eval_outputs(model, batch, state_h, state_c, in_basis)

    return eval_step
