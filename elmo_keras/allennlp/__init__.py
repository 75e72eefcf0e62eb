"""A drop-in for AllenNLP's ELMo: `from elmo_keras.allennlp import Elmo, batch_to_ids` in place
of `from allennlp.modules.elmo import Elmo, batch_to_ids` (docs/allennlp.md).

`Elmo` is a `torch.nn.Module` around this package's `BiLM` and `ScalarMix`, so it needs PyTorch
and Keras's torch backend (`KERAS_BACKEND=torch`, set before Keras is first imported): importing
this module elsewhere is one line saying so.
"""

from elmo_keras.installs import configured_backend, require_module

require_module("torch", "elmo_keras.allennlp", "torch")


def _check_torch_backend():
    import sys  # noqa: PLC0415

    keras = sys.modules.get("keras")
    backend = keras.config.backend() if keras is not None else configured_backend()
    if backend != "torch":
        raise ImportError(
            "`elmo_keras.allennlp` runs on Keras's torch backend: set KERAS_BACKEND=torch "
            f"before Keras is imported. Received: backend={backend!r}"
        )


_check_torch_backend()

# ruff: noqa: E402 (the checks run before Keras is imported by the modules below)
from elmo_keras.allennlp.elmo import Elmo, batch_to_ids

__all__ = ["Elmo", "batch_to_ids"]
