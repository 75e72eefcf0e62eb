"""The contexts in which the running backend's fast inference path can apply.

PyTorch's runs only where no gradient is tracked (`torch_fast_path.applies`), JAX's only inside
`jax_fast_path.inference()` (BiLMEmbedder's context); TensorFlow's needs neither.
"""

import contextlib

import keras


def without_autograd():
    """A context where no gradient is tracked: `torch.no_grad()` on PyTorch (where the biLM's
    fast path needs it, `torch_fast_path.applies`), nothing on the other backends."""
    if keras.config.backend() == "torch":
        import torch

        return torch.no_grad()
    return contextlib.nullcontext()


def fast_path_inference():
    """A context where the running backend's fast path can apply: `without_autograd()` on
    PyTorch, `jax_fast_path.inference()` (BiLMEmbedder's context) on JAX, nothing on
    TensorFlow."""
    if keras.config.backend() == "jax":
        from elmo_keras.layers import jax_fast_path

        return jax_fast_path.inference()
    return without_autograd()
