"""The accelerator checks' exactness part, on any backend: both fixtures' top layer.

`accelerator.py` (JAX) and `accelerator_torch.py` (PyTorch) run the same walk: 10 batches of 3
sentences of each fixture, the LSTM state carried between batches, the max |diff| of the top
layer against the fixture's expected outputs, or against tests/numpy_reference.py's float64
ELMo on the same weights (`expected="float64"`), which shares no code with the package.

The fixtures' expected outputs were computed in float32 by bilm-tf and AllenNLP, so they carry
their own round-off: `fixture_rounding()` is their distance from float64 arithmetic, 6.9e-7
(bilm-tf) and 1.14e-6 (AllenNLP, where the top layer reaches 4.6), measured with this file. A
float32 run's distance from a fixture is its own round-off and the fixture's together.
Only numpy and h5py are imported here (and the package's character ids).
"""

import functools
import json
import pathlib
import sys

import h5py
import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = {
    "bilm-tf": ("tests/fixtures/bilm_tf/model", "lm_embeddings_sentences.json"),
    "allennlp": ("tests/fixtures/allennlp", "sentences.json"),
}
BATCHES = 10


def top_layer_diffs(load, expected="fixture", one_shape=False):
    """{fixture: max |diff|}. `load(folder)` gives `run(inputs) -> (top layer [3, T, 2P] as a
    NumPy array, state dict for the next call)` of the fixture's biLM; `inputs` holds
    `char_ids` and, after the first batch, the state. `expected`: "fixture" (the fixture's
    outputs) or "float64" (the NumPy reference's). `one_shape`: every batch padded to the
    fixture's longest sentence (`longest`; masked positions), so that the 10 calls share one
    shape: JAX compiles each new shape of an eager call anew (3-5 s for these tiny models)."""
    from elmo_keras.text.char_ids import batch_to_char_ids  # noqa: PLC0415 (after the backend)

    worst = {}
    for name, (folder, _) in FIXTURES.items():
        run = load(REPO / folder)
        wanted = fixture_outputs(name) if expected == "fixture" else float64_outputs(name)
        width = longest(name) if one_shape else None
        state, diff = {}, 0.0
        for i, batch in enumerate(batches(name)):
            top, state = run({"char_ids": batch_to_char_ids(batch, max_length=width), **state})
            for k, sentence in enumerate(batch):
                diff = max(diff, float(np.abs(top[k, : len(sentence)] - wanted[i][k]).max()))
        worst[name] = diff
    return worst


def fixture_rounding():
    """{fixture: max |fixture's expected output - float64 reference|} of the top layer."""
    return {
        name: max(
            float(np.abs(want - exact).max())
            for row, exact_row in zip(fixture_outputs(name), float64_outputs(name), strict=True)
            for want, exact in zip(row, exact_row, strict=True)
        )
        for name in FIXTURES
    }


def batches(name):
    """The walk's 10 batches: batch `i` holds sentence `i` of each of the 3 streams."""
    folder, sentences_file = FIXTURES[name]
    sentences = json.loads((REPO / folder / sentences_file).read_text())
    return [[sentences[k][i].split() for k in range(3)] for i in range(BATCHES)]


def longest(name):
    """The number of tokens of the fixture's longest sentence in the walk."""
    return max(len(sentence) for batch in batches(name) for sentence in batch)


@functools.cache
def fixture_outputs(name):
    """`[i][k]`: the fixture's top layer `[T, 2P]` for sentence `i` of stream `k`."""
    folder = REPO / FIXTURES[name][0]
    outputs = [[None] * 3 for _ in range(BATCHES)]
    for k in range(3):
        with h5py.File(folder / f"lm_embeddings_{k}.hdf5", "r") as f:
            for i in range(BATCHES):
                want = f[str(i)][...]
                outputs[i][k] = np.concatenate([want[0], want[1]], axis=-1)
    return outputs


@functools.cache
def float64_outputs(name):
    """`fixture_outputs`' layout, from tests/numpy_reference.py in float64 (each stream's state
    carried from sentence to sentence, as the walk carries it)."""
    sys.path.insert(0, str(REPO))
    from elmo_keras.text.char_ids import batch_to_char_ids, bos_char_ids, eos_char_ids
    from elmo_keras.weights import read_options
    from tests import numpy_reference

    folder = REPO / FIXTURES[name][0]
    arrays = {}
    with h5py.File(folder / "lm_weights.hdf5", "r") as f:
        f.visititems(
            lambda key, item: (
                arrays.__setitem__(key, item[...].astype(np.float64))
                if isinstance(item, h5py.Dataset)
                else None
            )
        )

    def with_boundaries(sentence):
        return np.concatenate([bos_char_ids()[None], batch_to_char_ids([sentence])[0], eos])

    eos = eos_char_ids()[None]
    walk = batches(name)
    streams = [[with_boundaries(batch[k]) for batch in walk] for k in range(3)]
    options = read_options(folder / "options.json")
    return numpy_reference.top_layers_of_streams(arrays, options, streams)


def main():
    """Prints the top layer's distances for the running backend (`KERAS_BACKEND`): float32,
    as a user runs it (on PyTorch under `torch.no_grad`, its fast path), against the fixtures
    and the float64 reference, and the fixtures against the float64 reference."""
    import contextlib

    import keras

    from elmo_keras.models import BiLM

    backend = keras.config.backend()
    if backend == "torch":
        import torch

        no_grad = torch.no_grad
    else:
        no_grad = contextlib.nullcontext

    def load(folder):
        bilm = BiLM.from_bilm_tf(folder / "options.json", folder / "lm_weights.hdf5")

        def run(inputs):
            with no_grad():
                out = bilm(inputs, training=False)
            state = {"state_h": out["state_h"], "state_c": out["state_c"]}
            return keras.ops.convert_to_numpy(out["activations"][:, -1]), state

        return run

    rows = {
        "fixture vs float64 reference": fixture_rounding(),
        f"{backend}, float32, vs fixture": top_layer_diffs(load),
        f"{backend}, float32, vs float64 reference": top_layer_diffs(load, "float64"),
    }
    print(f"| top layer, max abs diff | {' | '.join(FIXTURES)} |")
    print("|---|" + "---|" * len(FIXTURES))
    for name, diffs in rows.items():
        print(f"| {name} | " + " | ".join(f"{diffs[f]:.2e}" for f in FIXTURES) + " |")


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    main()
