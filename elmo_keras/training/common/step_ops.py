"""The arithmetic of the training and evaluation steps, written once in `keras.ops`.

Both trainers call these inside their compiled steps (`tf.function` under a `tf.distribute`
replica context; `jax.jit`), so the numbers are defined in one place:

- the loss: `0.5 * (forward NLL sum + backward NLL sum) / global tokens` (`mean_loss`), the token
  count floored at 1 (`denominator`);
- freezing: zeros for the biLM's gradients while `step < freeze_bilm_steps` (`freeze`); with
  Adagrad and Adam a zero gradient leaves a variable exactly as it is, so a frozen biLM keeps its
  weights bit for bit;
- clipping: the global norm of all gradients (`global_norm`) and the factor that brings it down
  to the clip norm (`clip_scale`; 0: no clipping);
- evaluation: the full softmax's NLL sums, tokens, float32 state and basis tokens of one window
  (`eval_outputs`), dropout off.
"""

from keras import ops


def token_count(mask):
    """The tokens of a `[batch, time]` mask, float32 (TensorFlow: this replica's)."""
    return ops.sum(ops.cast(mask, "float32"))


def denominator(tokens):
    """What the loss divides by: the global token count, at least 1."""
    return ops.maximum(tokens, 1.0)


def mean_loss(out, denominator):
    """The loss that is differentiated: the mean NLL of both directions per global token."""
    return 0.5 * (out["forward_nll"] + out["backward_nll"]) / denominator


def freeze(grads, frozen, hold):
    """`grads` with zeros where `frozen` (a bool per gradient) and `hold` (a bool scalar)."""
    return [
        ops.where(hold, ops.zeros_like(g), g) if f else g
        for g, f in zip(grads, frozen, strict=True)
    ]


def squared_norm(grads):
    """The sum of the squares of every entry of `grads` (dense tensors)."""
    return sum(ops.sum(ops.square(g)) for g in grads)


def global_norm(grads):
    """The global L2 norm of `grads` (dense tensors)."""
    return ops.sqrt(squared_norm(grads))


def clip_scale(norm, clip):
    """The factor that clips gradients of global norm `norm` to `clip` (0: no clipping)."""
    if clip > 0:
        return clip / ops.maximum(norm, clip)
    return ops.ones_like(norm)


def eval_outputs(model, batch, state_h, state_c, in_basis):
    """One evaluation window: forward and backward NLL sums, tokens, the final state (float32)
    and the targets inside the word basis `in_basis` (0 without one); full softmax, no
    dropout (`LanguageModel.window_nll`)."""
    out = model.window_nll(batch, state_h, state_c, training=False, in_basis=in_basis)
    return (
        out["forward_nll"],
        out["backward_nll"],
        out["tokens"],
        ops.cast(out["state_h"], "float32"),
        ops.cast(out["state_c"], "float32"),
        out.get("basis_tokens", ops.zeros((), "float32")),
    )
