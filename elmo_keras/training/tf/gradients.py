"""What the training step does with each replica's gradients before the optimizer applies them.

`apply_clipped` sums the replicas' gradients for their global norm, clips and applies them
(inside `strategy.run`, the replica context; the norm and the factor are `common.step_ops`').

With a sampled softmax and Adagrad the softmax kernel's gradient stays what the tape gives: a
`tf.IndexedSlices` of the rows the step read (targets and candidates, repeated ids included).
Its rows are gathered from every replica and summed by id (`summed_rows`), and only those rows
of the kernel and of its Adagrad accumulator are updated (`sparse_adagrad`), as the JAX trainer
does: Adagrad leaves a row whose gradient is zero exactly as it is, so this is the dense update
without the `[vocabulary, projection]` gradient, its two all-reduces and the dense update
(benchmarks/results/tf_softmax_update.md).
"""

import tensorflow as tf

from elmo_keras.training.common import step_ops


def apply_clipped(ctx, optimizer, variables, grads, clip, sparse_index=None):
    """Applies the gradients clipped by the global norm of their cross-replica sum.

    Args:
        ctx: `tf.distribute.ReplicaContext`.
        optimizer: `keras.optimizers.Optimizer`.
        variables: the trainable variables, in the order of `grads`.
        grads: this replica's gradients (each already divided by the global token count).
        clip: float. The largest global norm (0: no clipping).
        sparse_index: int or None. The position of the softmax kernel, whose gradient is a
            `tf.IndexedSlices` updated row by row (`sparse_adagrad`; the optimizer is
            Adagrad); None: every gradient is dense and the optimizer applies them all.

    Returns:
        The global norm of the summed gradients, before clipping.
    """
    dense = [g for i, g in enumerate(grads) if i != sparse_index]
    others = [v for i, v in enumerate(variables) if i != sparse_index]
    summed = dense
    if ctx.num_replicas_in_sync > 1:
        summed = ctx.all_reduce(tf.distribute.ReduceOp.SUM, dense)
    if sparse_index is None:
        norm = step_ops.global_norm(summed)
    else:
        ids, rows = summed_rows(ctx, grads[sparse_index])
        norm = tf.sqrt(step_ops.squared_norm(summed + [rows]))
        learning_rate = tf.cast(optimizer.learning_rate, tf.float32)  # before the optimizer's
    scale = step_ops.clip_scale(norm, clip)
    # Keras' optimizer sums the replicas' gradients itself: hand it each replica's share.
    optimizer.apply_gradients(zip([g * scale for g in dense], others, strict=True))
    if sparse_index is not None:
        kernel = variables[sparse_index]
        sparse_adagrad(ctx, optimizer, kernel, ids, rows * scale, learning_rate)
    return norm


def summed_rows(ctx, slices):
    """The global gradient of a row-gathered variable from this replica's `tf.IndexedSlices`:
    `(ids, rows)`, each id once, its rows summed over repeats and over every replica."""
    ids, values = slices.indices, slices.values
    if ctx.num_replicas_in_sync > 1:
        ids = ctx.all_gather(ids, axis=0)
        values = ctx.all_gather(values, axis=0)
    unique, position = tf.unique(ids)
    return unique, tf.math.unsorted_segment_sum(values, position, tf.size(unique))


def sparse_adagrad(ctx, optimizer, kernel, ids, grads, learning_rate):
    """Keras' Adagrad update (`optimizer`'s own accumulator and epsilon) of the rows `ids`
    (distinct) of `kernel` with the global gradient rows `grads`, on every replica's copy."""
    accumulator = optimizer._accumulators[optimizer._get_variable_index(kernel)]
    accumulated = tf.gather(accumulator.value, ids) + tf.square(grads)
    step = learning_rate * grads / tf.sqrt(accumulated + optimizer.epsilon)
    rows = tf.gather(kernel.value, ids) - step

    def update(strategy, ids, accumulated, rows):
        for variable, values in ((accumulator, accumulated), (kernel, rows)):
            strategy.extended.update(variable.value, _set_rows, args=(ids, values), group=False)

    ctx.merge_call(update, args=(ids, accumulated, rows))


def _set_rows(variable, ids, values):
    return variable.scatter_update(tf.IndexedSlices(values, ids))
