"""`elmo-keras embed --model FOLDER` with an ELMoForManyLangs folder gives EFML's numbers."""

import json

import h5py
import numpy as np
import pytest

from elmo_keras.cli import main

ATOL = 2e-5


@pytest.mark.parametrize("layers, group", [("all", "all_layers"), ("average", "average")])
def test_embed_an_efml_folder(tmp_path, efml_fixture, layers, group):
    sentences = json.loads((efml_fixture / "sentences.json").read_text(encoding="utf-8"))
    # whitespace-split lines: the sentences whose tokens hold no whitespace and are not empty
    chosen = [
        i
        for i, s in enumerate(sentences["sentences"])
        if s and all(t and not any(c.isspace() for c in t) for t in s)
    ]
    lines = [" ".join(sentences["sentences"][i]) for i in chosen]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    output = tmp_path / "out.hdf5"
    model = efml_fixture / "cnn_elmo_words"
    argv = ["embed", "--model", str(model), "--input", str(source), "--output", str(output)]
    argv += ["--tokenization-mode", "whitespace", "--layers", layers, "--batch-size", "7"]
    assert main(argv) == 0
    with (
        h5py.File(output, "r") as got,
        h5py.File(efml_fixture / "cnn_elmo_words.expected.h5") as h5,
    ):
        for line, i in enumerate(chosen):
            np.testing.assert_allclose(got[str(line)][()], h5[group][f"{i:03d}"][()], atol=ATOL)
    assert len(chosen) > 20
