"""The shipped `mini_en` biLM: its files match the model card, and it loads and runs offline."""

import hashlib
import re

import numpy as np
import pytest

from elmo_keras import presets
from elmo_keras.file_io import download

FILES = ("options.json", "lm_weights.hdf5", "vocab.txt", "softmax.hdf5")


def _folder():
    return presets.preset_sources("mini_en")[0].parent


def _card_rows():
    """`{file: (bytes, sha256)}` from the card's "Files" table."""
    card = (_folder() / "MODEL_CARD.md").read_text(encoding="utf-8")
    section = card.split("## Files", 1)[1]
    rows = re.findall(r"\| `([^`]+)` \| ([\d,]+) \| `([0-9a-f]{64})` \|", section)
    return {name: (int(size.replace(",", "")), digest) for name, size, digest in rows}


def test_the_files_match_the_model_card():
    rows = _card_rows()
    assert sorted(rows) == sorted(FILES)
    for name, (size, digest) in rows.items():
        data = (_folder() / name).read_bytes()
        assert len(data) == size, name
        assert hashlib.sha256(data).hexdigest() == digest, name


def test_the_card_states_its_perplexities_and_rebuild_command():
    card = (_folder() / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert "experiments/mini_en_v2/reproduce.sh" in card
    test_row = re.search(r"\| WikiText-2 test \(all [\d,]+ tokens\) \|([^\n]+)", card).group(1)
    forward, backward, average, unigram = (
        float(cell.strip(" *")) for cell in test_row.split("|")[:4]
    )
    assert 1 < average < unigram  # better than the add-one unigram
    assert min(forward, backward) <= average <= max(forward, backward) * 1.01


def test_loads_without_network_and_runs(monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("mini_en must not download anything")

    monkeypatch.setattr(download, "cached_path", no_network)
    monkeypatch.setattr(presets, "cached_path", no_network)
    from elmo_keras.models import BiLM
    from elmo_keras.models.bilm_embedder import BiLMEmbedder

    options, weights = presets.resolve_preset("mini_en")
    bilm = BiLM.from_bilm_tf(options, weights)
    assert (bilm.n_layers, bilm.projection_dim) == (2, 128)
    (vectors,) = BiLMEmbedder(bilm).embed([["The", "bank", "raised", "its", "rates", "."]])
    assert vectors.shape == (3, 6, 256)
    assert np.isfinite(vectors).all()
    # Layer 0 is context-free: "bank" gets the same token vector in another sentence.
    (other,) = BiLMEmbedder(bilm).embed([["The", "river", "bank", "flooded", "."]])
    np.testing.assert_allclose(other[0, 2], vectors[0, 1], atol=1e-5)
    assert not np.allclose(other[2, 2], vectors[2, 1], atol=1e-3)


@pytest.mark.parametrize("name", ["mini_en", "MINI_EN"])
def test_is_a_local_preset(name):
    options, weights = presets.preset_sources(name)
    assert options.is_file() and weights.is_file()
    assert "mini_en" in presets.PRESETS


def test_the_packaging_script_writes_the_files_and_their_table(tmp_path):
    """experiments/mini_en_v2/package.py: the four files copied whole, the card's body kept and
    its "## Files" table rewritten with their sizes and sha256 (checked here with hashlib)."""
    import importlib.util
    import pathlib

    script = pathlib.Path(__file__).parents[1] / "experiments" / "mini_en_v2" / "package.py"
    spec = importlib.util.spec_from_file_location("package_v2", script)
    package = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(package)
    card = tmp_path / "card.md"
    card.write_text("# a card\n\nThe body stays.\n\n## Files\n\nstale rows\n", encoding="utf-8")
    out = tmp_path / "out"
    assert package.main([str(_folder()), "--card", str(card), "--output", str(out)]) == 0
    written = (out / "MODEL_CARD.md").read_text(encoding="utf-8")
    assert written.startswith("# a card\n\nThe body stays.\n\n## Files\n")
    assert "stale" not in written
    rows = re.findall(r"\| `([^`]+)` \| ([\d,]+) \| `([0-9a-f]{64})` \|", written)
    assert [name for name, _, _ in rows] == list(FILES)
    for name, size, digest in rows:
        data = (out / name).read_bytes()
        assert data == (_folder() / name).read_bytes()
        assert (int(size.replace(",", "")), digest) == (len(data), hashlib.sha256(data).hexdigest())
    assert not list(out.glob(".*.partial"))
    with pytest.raises(SystemExit, match="has no"):
        package.main([str(tmp_path), "--output", str(out)])
