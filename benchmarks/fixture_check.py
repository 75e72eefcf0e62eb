"""The accelerator checks' exactness part, on any backend: both fixtures' top layer.

`accelerator.py` (JAX) and `accelerator_torch.py` (PyTorch) run the same walk: 10 batches of 3
sentences of each fixture, the LSTM state carried between batches, the max |diff| of the top
layer against the fixture's expected outputs. Only numpy and h5py are imported here.
"""

import json
import pathlib

import h5py
import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = {
    "bilm-tf": ("tests/fixtures/bilm_tf/model", "lm_embeddings_sentences.json"),
    "allennlp": ("tests/fixtures/allennlp", "sentences.json"),
}


def top_layer_diffs(load):
    """{fixture: max |diff|}. `load(folder)` gives `run(inputs) -> (top layer [3, T, 2P] as a
    NumPy array, state dict for the next call)` of the fixture's biLM; `inputs` holds
    `char_ids` and, after the first batch, the state."""
    from elmo_keras.text.char_ids import batch_to_char_ids  # noqa: PLC0415 (after the backend)

    worst = {}
    for name, (folder, sentences_file) in FIXTURES.items():
        folder = REPO / folder
        run = load(folder)
        sentences = json.loads((folder / sentences_file).read_text())
        expected = [h5py.File(folder / f"lm_embeddings_{k}.hdf5", "r") for k in range(3)]
        state, diff = {}, 0.0
        for i in range(10):
            batch = [sentences[k][i].split() for k in range(3)]
            top, state = run({"char_ids": batch_to_char_ids(batch), **state})
            for k, sentence in enumerate(batch):
                want = expected[k][str(i)][...]
                want = np.concatenate([want[0], want[1]], axis=-1)
                diff = max(diff, float(np.abs(top[k, : len(sentence)] - want).max()))
        worst[name] = diff
    return worst
