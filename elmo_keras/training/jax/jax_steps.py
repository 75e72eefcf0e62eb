"""The JAX trainer's compiled functions: the training step, the evaluation step.

Both are pure functions of the variables' values (Keras' `StatelessScope`), compiled once with
`jax.jit`. Data parallelism is the compiler's: the batch and the carried LSTM state arrive split
over the devices along the batch axis, the weights replicated, and XLA's partitioner adds the
all-reduces of the token count, the loss and the gradients (the global mean, as one device
would compute it).

The training step, in order (the arithmetic is `common.step_ops`', shared with TensorFlow): the
global token count; the loss `0.5 * (forward + backward) / tokens` and its gradients; zeros for
the biLM's gradients while `step < freeze_bilm_steps`; clipping by the global norm; the
optimizer. With `sparse_softmax` (Adagrad), the softmax kernel
is not differentiated as a whole: the step gathers the rows of its targets and candidates,
differentiates with respect to those rows, sums the gradients of repeated ids, and updates only
those rows and their Adagrad accumulators. Adagrad leaves a row whose gradient is zero exactly as
it is, so this is the dense update, at the cost of the rows used instead of the whole
`[vocabulary, projection]` kernel and its accumulator.
"""

import jax
import jax.numpy as jnp
import keras

from elmo_keras.training.common import step_ops


def values(variables):
    """The current values of Keras variables (JAX arrays)."""
    return [v.value for v in variables]


def _scope(variables, arrays):
    return keras.StatelessScope(state_mapping=list(zip(variables, arrays, strict=True)))


def make_eval_step(model, in_basis=None):
    """`eval_step(variable_values, batch, state_h, state_c)` -> `step_ops.eval_outputs`, with
    the variables' values passed in (one `jax.jit` function)."""
    variables = model.variables

    def eval_step(arrays, batch, state_h, state_c):
        with _scope(variables, arrays):
            return step_ops.eval_outputs(model, batch, state_h, state_c, in_basis)

    return jax.jit(eval_step)


def make_model_eval_step(model, in_basis=None):
    """`eval_step(batch, state_h, state_c)` of `model`'s current weights (`evaluate_model`)."""
    compiled = make_eval_step(model, in_basis)
    return lambda batch, h, c: compiled(values(model.variables), batch, h, c)


def make_train_step(model, optimizer, clip_norm, freeze_bilm_steps, sparse_softmax, carry_state):
    """The jit-compiled global step of `JaxTrainer`.

    `train_step(state, batch, candidates, step, learning_rate)` -> `(state, metrics)`; `state`
    is a dict: `trainable`, `non_trainable` and `optimizer` (lists of arrays, in the order of
    `model.trainable_variables`, `model.non_trainable_variables` and `optimizer.variables`;
    with `sparse_softmax` the optimizer's list leaves the softmax kernel out), `accumulator`
    (the softmax kernel's Adagrad accumulator with `sparse_softmax`, else None), `state_h`,
    `state_c`. `metrics`: `forward_nll`, `backward_nll`, `tokens`, `grad_norm`.
    """
    trainable_variables = model.trainable_variables
    non_trainable_variables = model.non_trainable_variables
    bilm_ids = {id(v) for v in model.bilm.trainable_variables}
    frozen = [id(v) in bilm_ids for v in trainable_variables]
    kernel_index = next(i for i, v in enumerate(trainable_variables) if v is model.softmax_kernel)
    bias_index = next(i for i, v in enumerate(trainable_variables) if v is model.softmax_bias)
    epsilon = float(getattr(optimizer, "epsilon", 1e-7))

    def loss_fn(trainable, non_trainable, batch, state_h, state_c, candidates, denominator, rows):
        with _scope(trainable_variables + non_trainable_variables, trainable + non_trainable) as s:
            if rows is not None:
                ids = model.softmax_row_ids(batch, candidates)
                rows = (rows, jnp.take(trainable[bias_index], ids, axis=0))
            out = model.window_nll(batch, state_h, state_c, candidates, True, rows)
            updated = [s.get_current_value(v) for v in non_trainable_variables]
        return step_ops.mean_loss(out, denominator), (out, updated)

    def train_step(state, batch, candidates, step, learning_rate):
        trainable = list(state["trainable"])
        tokens = step_ops.token_count(model.token_mask(batch["forward_char_ids"]))
        denominator = step_ops.denominator(tokens)
        state_h, state_c = state["state_h"], state["state_c"]
        if not carry_state:
            state_h, state_c = jnp.zeros_like(state_h), jnp.zeros_like(state_c)
        args = (state["non_trainable"], batch, state_h, state_c, candidates, denominator)
        if sparse_softmax:
            ids = model.softmax_row_ids(batch, candidates)
            kernel = trainable[kernel_index]
            others = trainable[:kernel_index] + trainable[kernel_index + 1 :]

            def sparse_loss(others, rows):
                full = others[:kernel_index] + [kernel] + others[kernel_index:]
                return loss_fn(full, *args, rows)

            (_, (out, updated)), (grads, row_grads) = jax.value_and_grad(
                sparse_loss, argnums=(0, 1), has_aux=True
            )(others, jnp.take(kernel, ids, axis=0))
            n = ids.shape[0]
            unique_ids, inverse = jnp.unique(
                ids, size=n, fill_value=kernel.shape[0], return_inverse=True
            )
            row_grads = jax.ops.segment_sum(row_grads, inverse.reshape(-1), num_segments=n)
            frozen_mask = frozen[:kernel_index] + frozen[kernel_index + 1 :]
        else:
            (_, (out, updated)), grads = jax.value_and_grad(loss_fn, has_aux=True)(
                trainable, *args, None
            )
            row_grads, frozen_mask = None, frozen
        if freeze_bilm_steps:
            grads = step_ops.freeze(grads, frozen_mask, step < freeze_bilm_steps)
        norm = step_ops.global_norm(grads + ([] if row_grads is None else [row_grads]))
        scale = step_ops.clip_scale(norm, clip_norm)
        grads = [g * scale for g in grads]
        if sparse_softmax:
            new_others, new_optimizer = optimizer.stateless_apply(state["optimizer"], grads, others)
            kernel, accumulator = _sparse_adagrad(
                kernel,
                state["accumulator"],
                unique_ids,
                row_grads * scale,
                learning_rate,
                epsilon,
            )
            new_trainable = new_others[:kernel_index] + [kernel] + new_others[kernel_index:]
        else:
            new_trainable, new_optimizer = optimizer.stateless_apply(
                state["optimizer"], grads, trainable
            )
            accumulator = state["accumulator"]
        new_state = {
            "trainable": new_trainable,
            "non_trainable": updated,
            "optimizer": new_optimizer,
            "accumulator": accumulator,
            "state_h": out["state_h"].astype(jnp.float32),
            "state_c": out["state_c"].astype(jnp.float32),
        }
        metrics = {
            "forward_nll": out["forward_nll"],
            "backward_nll": out["backward_nll"],
            "tokens": tokens,
            "grad_norm": norm,
        }
        return new_state, metrics

    return jax.jit(train_step, donate_argnums=(0,))


def _sparse_adagrad(kernel, accumulator, ids, grads, learning_rate, epsilon):
    """Keras' Adagrad update of the rows `ids` of `kernel` (ids past the end are padding)."""
    accumulated = accumulator.at[ids].get(mode="fill", fill_value=1.0) + jnp.square(grads)
    rows = kernel.at[ids].get(mode="fill", fill_value=0.0)
    rows = rows - learning_rate * grads / jnp.sqrt(accumulated + epsilon)
    return (
        kernel.at[ids].set(rows, mode="drop"),
        accumulator.at[ids].set(accumulated, mode="drop"),
    )
