"""What the training step does with each replica's gradients before the optimizer applies them.

`freeze` zeroes the biLM's gradients for the first steps of a run that starts from a pretrained
biLM with a new softmax; `apply_clipped` sums the replicas' gradients for their global norm,
clips and applies them. Both run inside `strategy.run` (the replica context).
"""

import tensorflow as tf


def freeze(grads, variables, frozen_variables, frozen):
    """`grads` with zeros for `frozen_variables` where `frozen` (a boolean scalar tensor) holds.

    With Adagrad and Adam a zero gradient leaves a variable exactly as it is (its slots stay
    zero or unchanged), so a frozen biLM keeps its weights bit for bit.
    """
    ids = {id(v) for v in frozen_variables}
    return [
        tf.where(frozen, tf.zeros_like(g), g) if id(v) in ids else g
        for g, v in zip(grads, variables, strict=True)
    ]


def apply_clipped(ctx, optimizer, variables, grads, clip):
    """Applies the gradients clipped by the global norm of their cross-replica sum.

    Args:
        ctx: `tf.distribute.ReplicaContext`.
        optimizer: `keras.optimizers.Optimizer`.
        variables: the trainable variables, in the order of `grads`.
        grads: this replica's gradients (each already divided by the global token count).
        clip: float. The largest global norm (0: no clipping).

    Returns:
        The global norm of the summed gradients, before clipping.
    """
    summed = grads
    if ctx.num_replicas_in_sync > 1:
        summed = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads)
    norm = tf.linalg.global_norm(summed)
    scale = clip / tf.maximum(norm, clip) if clip > 0 else tf.constant(1.0)
    # Keras' optimizer sums the replicas' gradients itself: hand it each replica's share.
    optimizer.apply_gradients(zip([g * scale for g in grads], variables, strict=True))
    return norm
