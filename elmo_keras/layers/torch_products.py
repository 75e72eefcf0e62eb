"""The biLM's weights as the products PyTorch's fast paths multiply by, made once per weights.

`torch_fast_path` (the CPU) and `torch_gpu_path` (other devices) take a cell's or the char CNN's
kernels from here rather than from the layers at each call: rearranged for the step (the gates
regrouped by activation, the forget bias in the bias, the two kernels stacked) and, on the CPU
in float32, packed once for oneDNN (`Product`): on this project's AMD CPUs PyTorch's MKL runs a
step's small products (32 rows) at a tenth of oneDNN's speed. They are kept while the weights
live and remade when one changes (`cached`).
"""

import weakref

import keras
import torch


class Product:
    """`x @ kernel + bias` with `kernel` packed once for oneDNN (float32 on the CPU), else a
    plain `torch.addmm`; `sigmoid=True` applies the sigmoid after it (fused where packed).
    `plus(x, other)` is `x @ kernel + other`, fused where packed."""

    def __init__(self, kernel, bias=None):
        self.kernel, self.bias, self.packed = kernel, bias, None
        if ONEDNN and kernel.device.type == "cpu" and kernel.dtype == torch.float32:
            self.packed = torch.ops.mkldnn._reorder_linear_weight(kernel.t().contiguous(), None)
            self.kernel = None  # the packed copy is all that is read

    def __call__(self, x, sigmoid=False):
        if self.packed is not None:
            return torch.ops.mkldnn._linear_pointwise(
                x.contiguous(), self.packed, self.bias, "sigmoid" if sigmoid else "none", [], ""
            )
        y = x @ self.kernel if self.bias is None else torch.addmm(self.bias, x, self.kernel)
        return torch.sigmoid_(y) if sigmoid else y

    def plus(self, x, other):
        if self.packed is not None:
            return torch.ops.mkldnn._linear_pointwise.binary(
                x.contiguous(), other.contiguous(), self.packed, None, "add"
            )
        return torch.addmm(other, x, self.kernel)


ONEDNN = torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")

# A cell's products by its kernel tensor's id (dropped with the tensor), with the weights'
# versions they were made from (`variable.assign` bumps a version: they are made again).
_PRODUCTS = {}


def cached(weights, make):
    """`make(*weights)` (detached), kept while the first weight tensor lives and until one of
    `weights` changes (by its version)."""
    # A cast to another dtype (a mixed policy) is a new tensor at every call: nothing to keep.
    cacheable = not any(w.is_inference() for w in weights)
    stamp = tuple((id(w), w._version) for w in weights) if cacheable else None
    kept = _PRODUCTS.get(stamp[0][0]) if cacheable else None
    if kept is not None and kept[1] == stamp:
        return kept[2]
    made = make(*(w.detach() for w in weights))
    if cacheable:
        key = stamp[0][0]
        reference = weakref.ref(weights[0], lambda _: _PRODUCTS.pop(key, None))
        _PRODUCTS[key] = (reference, stamp, made)
    return made


def cell_products(cell, dtype):
    """A cell's step products in `dtype`, `(stacked, input, recurrent, projection)`, the gates
    in the order (input, forget, output, candidate), the bias holding the forget bias (which the
    core adds at every step). `stacked`: the first three gates, and the candidates, of a step's
    `[x_t, h_{t-1}]` (the two kernels stacked, `[F + P, 4U]`), made on the CPU only (the GPU
    path does not read it: the weights once more); `input` and `recurrent`: the gates' two
    parts (`torch_fast_path._packed_recurrence` says which runs when)."""
    weights = (cell.kernel, cell.bias, cell.recurrent_kernel, cell.projection_kernel)

    def make(kernel, bias, recurrent_kernel, projection_kernel):
        units = cell.lstm_units
        bias = bias.clone()
        bias[units : 2 * units] += cell.forget_bias
        # The core's gates are (input, forget, candidate, output).
        sigmoids = torch.cat([torch.arange(2 * units), torch.arange(3 * units, 4 * units)])
        parts = (sigmoids.to(kernel.device), torch.arange(2 * units, 3 * units).to(kernel.device))
        order = torch.cat(parts)
        stacked = None
        if kernel.device.type == "cpu":
            stacked = tuple(
                Product(torch.cat([kernel[:, part], recurrent_kernel[:, part]]), bias[part])
                for part in parts
            )
        return (  # copies made one by one, only the packed kept
            stacked,
            Product(kernel[:, order], bias[order]),
            Product(recurrent_kernel[:, order]),
            Product(projection_kernel),
        )

    return cached([keras.ops.cast(w, dtype) for w in weights], make)


def char_cnn_products(char_cnn, dtype):
    """`(tables, convolutions, highways, projection)` of `char_cnn` in `dtype`: the embedding
    tables (characters, then words if any), `(width, _Product, bias)` per filter (the bias
    added after the max-pooling), `(carry, transform)` `Product`s per highway layer and the
    projection's `Product`."""
    tables = [char_cnn.char_embedding.embeddings]
    if char_cnn.word_embedding_dim:
        tables.append(char_cnn.word_embedding.embeddings)
    dense = [d for highway in char_cnn.highways for d in (highway.carry, highway.transform)]
    layers = [*char_cnn.convolutions, *dense, char_cnn.projection]
    weights = [*tables, *(w for layer in layers for w in (layer.kernel, layer.bias))]
    n_tables = len(tables)

    def make(*weights):
        pairs = [weights[i : i + 2] for i in range(n_tables, len(weights), 2)]
        convolutions = [
            (kernel.shape[0], Product(kernel.reshape(-1, kernel.shape[-1])), bias)
            for kernel, bias in pairs[: len(char_cnn.convolutions)]
        ]
        products = [Product(kernel, bias) for kernel, bias in pairs[len(convolutions) :]]
        highways = [products[i : i + 2] for i in range(0, len(products) - 1, 2)]
        return weights[:n_tables], convolutions, highways, products[-1]

    return cached([keras.ops.cast(w, dtype) for w in weights], make)
