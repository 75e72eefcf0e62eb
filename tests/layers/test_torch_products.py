"""`torch_products`: the fast paths' products of the weights, kept while the weights live and
remade when one changes."""

import gc

import keras
import numpy as np
import pytest

from tests.fast_path_context import fast_path_inference
from tests.layers.test_packed_bilstm import assert_same, make_pair, random_batch

pytestmark = pytest.mark.skipif(keras.config.backend() != "torch", reason="PyTorch's products")


@pytest.fixture
def products(monkeypatch):
    from elmo_keras.layers import torch_products

    monkeypatch.setattr(torch_products, "_PRODUCTS", {})
    return torch_products


def test_kept_then_remade_after_an_assign(products):
    import torch

    rng = np.random.default_rng(0)
    packed, plain = make_pair(rng, 8, 4, 3)
    cell = packed.forward_cells[0]
    first = products.cell_products(cell, torch.float32)
    assert products.cell_products(cell, torch.float32) is first
    new_kernel = rng.normal(size=cell.kernel.shape).astype("float32")
    for layer in (packed, plain):
        layer.forward_cells[0].kernel.assign(new_kernel)
    assert products.cell_products(cell, torch.float32) is not first
    x, mask = random_batch(rng, [5, 2, 0], 3)
    with fast_path_inference():  # the fast path reads the new kernel
        assert_same(packed(x, mask=mask), plain(x, mask=mask))


def test_dropped_with_the_weights(products):
    import torch

    packed, _ = make_pair(np.random.default_rng(1), 8, 4, 3)
    for cell in packed.forward_cells:
        products.cell_products(cell, torch.float32)
    assert len(products._PRODUCTS) == 2
    del packed, cell
    gc.collect()
    assert products._PRODUCTS == {}


def test_nothing_kept_for_a_cast_at_each_call(products):
    import torch

    packed, _ = make_pair(np.random.default_rng(2), 8, 4, 3)
    cell = packed.forward_cells[0]
    with torch.inference_mode():  # as the fast path casts: a new inference tensor each call
        first = products.cell_products(cell, torch.float64)
        assert products.cell_products(cell, torch.float64) is not first
    assert products._PRODUCTS == {}
