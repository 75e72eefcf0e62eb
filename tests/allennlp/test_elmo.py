"""`elmo_keras.allennlp.Elmo` and `batch_to_ids` against AllenNLP's outputs: the AllenNLP fixture
(`tests/fixtures/allennlp`, AllenNLP's own expected top layer) and, for every mix option, the
NumPy float64 reference of `tests/numpy_reference.py` with AllenNLP's mix rules written out
here (layer-norm statistics over the tokens and `<S>`/`</S>`, epsilon 1e-13). Runs with
`KERAS_BACKEND=torch` (`KERAS_BACKEND=torch pytest tests/allennlp`); skips without torch or on
another backend."""

import json

import h5py
import keras
import numpy as np
import pytest

from tests import numpy_reference as ref

torch = pytest.importorskip("torch")
if keras.config.backend() != "torch":
    pytest.skip("elmo_keras.allennlp runs on KERAS_BACKEND=torch", allow_module_level=True)

from elmo_keras.allennlp import Elmo, batch_to_ids  # noqa: E402

# Byte ids of REFERENCE.md section 1, before the +1 shift.
BOS, EOS, BOW, EOW, PAD = 256, 257, 258, 259, 260
TINY = [-9e10, -9e10, 0.0]  # pre-softmax mix weights selecting the top layer
MIXES = [None, [0.3, -0.5, 1.2]]  # learned (starts even, gamma 1), and fixed
SHORT = [["The", "bank", "closed", "."], ["I", "read", "it"], ["Hi"]]  # for the quick tests


def reference_ids(token):
    """AllenNLP's 50 character ids of one token, written from REFERENCE.md."""
    if token in ("<S>", "</S>"):
        row = [BOW, BOS if token == "<S>" else EOS, EOW]
    else:
        row = [BOW, *token.encode("utf-8", "ignore")[:48], EOW]
    return np.array(row + [PAD] * (50 - len(row))) + 1


@pytest.fixture(scope="module")
def files(allennlp_fixture):
    return str(allennlp_fixture / "options.json"), str(allennlp_fixture / "lm_weights.hdf5")


@pytest.fixture(scope="module")
def batch(allennlp_fixture):
    """The fixture's first batch (rows from zero state, as AllenNLP ran it)."""
    sentences = json.loads((allennlp_fixture / "sentences.json").read_text())
    return [sentences[k][0].split() for k in range(3)]


@pytest.fixture(scope="module")
def reference(allennlp_fixture):
    """Sentences -> per sentence, the float64 layers `[3, n + 2, 32]` with `<S>` and `</S>`."""
    with h5py.File(allennlp_fixture / "lm_weights.hdf5", "r") as handle:
        arrays = {}
        handle.visititems(
            lambda n, x: (
                arrays.__setitem__(n, x[...].astype(np.float64))
                if isinstance(x, h5py.Dataset)
                else None
            )
        )
    cells = ref.published_cells(arrays, 2)

    def layers(sentences):
        out = []
        for sentence in sentences:
            ids = np.stack([reference_ids(t) for t in ["<S>", *sentence, "</S>"]])
            tokens = ref.char_cnn_from_published(arrays, 5, ids)
            lstm, _ = ref.bilstm_sentence(tokens, cells, True, 3.0, 3.0)
            out.append(np.concatenate([np.concatenate([tokens, tokens], -1)[None], lstm]))
        return out

    return layers


def allennlp_mix(layers, weights, do_layer_norm, keep_sentence_boundaries):
    """AllenNLP's `Elmo` output from the reference layers: the mix over the padded batch with
    the boundaries in (so the layer-norm statistics include them), then boundaries removed."""
    longest = max(x.shape[1] for x in layers)
    padded = np.zeros((len(layers), 3, longest, 32))
    mask = np.zeros((len(layers), longest), bool)
    for row, x in enumerate(layers):
        padded[row, :, : x.shape[1]], mask[row, : x.shape[1]] = x, True
    mixed = ref.scalar_mix(padded, mask, np.array(weights), 1.0, do_layer_norm, epsilon=1e-13)
    if keep_sentence_boundaries:
        return mixed, mask
    out = np.zeros((len(layers), longest - 2, 32))
    for row, x in enumerate(layers):
        out[row, : x.shape[1] - 2] = mixed[row, 1 : x.shape[1] - 1]
    return out, mask[:, 2:]


def test_batch_to_ids_gives_allennlp_character_ids():
    sentences = [["Hello", "wörld", "<S>", "x" * 60], ["Hi"], []]
    ids = batch_to_ids(sentences)
    assert ids.dtype == torch.int64 and tuple(ids.shape) == (3, 4, 50)
    for row, sentence in enumerate(sentences):
        for column in range(4):
            want = reference_ids(sentence[column]) if column < len(sentence) else np.zeros(50)
            np.testing.assert_array_equal(ids[row, column].detach().numpy(), want)


def test_top_layer_equals_allennlps_expected_output(files, allennlp_fixture, batch):
    elmo = Elmo(*files, 1, dropout=0.0, scalar_mix_parameters=TINY)
    out = elmo(batch_to_ids(batch))
    (representation,), mask = out["elmo_representations"], out["mask"]
    longest = max(len(s) for s in batch)
    assert tuple(representation.shape) == (3, longest, 32) and representation.dtype == torch.float32
    assert mask.dtype == torch.bool and mask.sum(1).tolist() == [len(s) for s in batch]
    for k, sentence in enumerate(batch):
        with h5py.File(allennlp_fixture / f"lm_embeddings_{k}.hdf5", "r") as handle:
            forward, backward = handle["0"][...]
        want = np.concatenate([forward, backward], axis=-1)
        np.testing.assert_allclose(
            representation[k, : len(sentence)].detach().numpy(), want, atol=1e-5
        )
        assert torch.all(representation[k, len(sentence) :] == 0)


def test_the_reference_reproduces_allennlps_expected_output(allennlp_fixture, batch, reference):
    """Ties the NumPy reference used below to the fixture's own expected top layer."""
    for k, layers in enumerate(reference(batch)):
        with h5py.File(allennlp_fixture / f"lm_embeddings_{k}.hdf5", "r") as handle:
            want = np.concatenate(handle["0"][...], axis=-1)
        np.testing.assert_allclose(layers[2, 1:-1], want, atol=1e-5)


@pytest.mark.parametrize("keep_sentence_boundaries", [False, True])
@pytest.mark.parametrize("do_layer_norm", [False, True])
@pytest.mark.parametrize("mix", MIXES)
def test_outputs_equal_allennlps_mix_rules(
    files, reference, mix, do_layer_norm, keep_sentence_boundaries
):
    elmo = Elmo(
        *files,
        2,
        dropout=0.0,
        do_layer_norm=do_layer_norm,
        keep_sentence_boundaries=keep_sentence_boundaries,
        scalar_mix_parameters=mix,
    )
    out = elmo(batch_to_ids(SHORT))
    want, mask = allennlp_mix(
        reference(SHORT), mix or [0.0] * 3, do_layer_norm, keep_sentence_boundaries
    )
    np.testing.assert_array_equal(out["mask"].detach().numpy(), mask)
    assert len(out["elmo_representations"]) == 2
    for representation in out["elmo_representations"]:
        np.testing.assert_allclose(representation.detach().numpy(), want, atol=1e-5)


@pytest.mark.parametrize("do_layer_norm", [False, True])
def test_vocab_to_cache_takes_word_ids(files, reference, do_layer_norm):
    vocab = ["@@PADDING@@"] + sorted({t for s in SHORT for t in s})
    elmo = Elmo(*files, 1, dropout=0.0, vocab_to_cache=vocab, do_layer_norm=do_layer_norm)
    words = torch.zeros((3, max(len(s) for s in SHORT)), dtype=torch.int64)
    for row, sentence in enumerate(SHORT):
        words[row, : len(sentence)] = torch.tensor([vocab.index(t) for t in sentence])
    ids = batch_to_ids(SHORT)
    out = elmo(ids, word_inputs=words)
    want, mask = allennlp_mix(reference(SHORT), [0.0] * 3, do_layer_norm, False)
    np.testing.assert_array_equal(out["mask"].detach().numpy(), mask)
    np.testing.assert_allclose(out["elmo_representations"][0].detach().numpy(), want, atol=1e-5)
    # An index outside the cache falls back to the character ids, as AllenNLP's does.
    words[0, 0] = len(vocab)
    fallback = elmo(ids, word_inputs=words)["elmo_representations"][0]
    np.testing.assert_allclose(fallback.detach().numpy(), want, atol=1e-5)


def test_more_leading_dimensions_are_kept(files):
    elmo = Elmo(*files, 1, dropout=0.0)
    ids = batch_to_ids(SHORT)
    out = elmo(torch.stack([ids, ids]))
    assert tuple(out["elmo_representations"][0].shape) == (2, *ids.shape[:2], 32)
    assert tuple(out["mask"].shape) == (2, *ids.shape[:2])
    flat = elmo(ids)["elmo_representations"][0]
    np.testing.assert_allclose(
        out["elmo_representations"][0][1].detach().numpy(), flat.detach().numpy(), atol=1e-6
    )


def test_a_torch_module_parameters_state_dict_dropout_no_grad(files):
    elmo = Elmo(*files, 1)  # dropout 0.5
    assert isinstance(elmo, torch.nn.Module) and elmo.get_output_dim() == 32
    trainable = [p for p in elmo.parameters() if p.requires_grad]
    assert sorted(p.numel() for p in trainable) == [1, 3]  # gamma and the 3 layer weights
    n_bilm = sum(p.numel() for p in elmo.bilm.parameters())
    assert n_bilm == elmo.bilm.count_params() and sum(p.numel() for p in elmo.parameters()) > n_bilm
    ids = batch_to_ids(SHORT)
    elmo.eval()
    with torch.no_grad():
        still = elmo(ids)["elmo_representations"][0]
    assert not still.requires_grad
    elmo.train()
    dropped = elmo(ids)["elmo_representations"][0]
    mask = elmo(ids)["mask"]
    zeros = (dropped[mask] == 0).float().mean().item()
    assert 0.3 < zeros < 0.7 and dropped.requires_grad
    # A state_dict (mix weights changed) loads into a new Elmo: the same outputs.
    with torch.no_grad():
        elmo.scalar_mix_0.scalar_weights.assign([0.5, -1.0, 2.0])
    other = Elmo(*files, 1)
    other.load_state_dict(elmo.state_dict())
    elmo.eval(), other.eval()
    with torch.no_grad():
        a, b = elmo(ids)["elmo_representations"][0], other(ids)["elmo_representations"][0]
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert not torch.equal(a, still)


def test_a_torch_classifier_trains_the_mix_not_the_bilm(files):
    torch.manual_seed(0)

    class Classifier(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.elmo = Elmo(*files, 1, dropout=0.1)
            self.out = torch.nn.Linear(32, 2)

        def forward(self, ids):
            elmo = self.elmo(ids)
            vectors, mask = elmo["elmo_representations"][0], elmo["mask"]
            pooled = vectors.sum(1) / mask.sum(1, keepdim=True)
            return self.out(pooled)

    model = Classifier()
    before = {k: v.detach().clone() for k, v in model.state_dict().items()}
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    ids, labels = batch_to_ids(SHORT), torch.tensor([0, 1, 1])
    for _ in range(3):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(ids), labels)
        loss.backward()
        optimizer.step()
    after = model.state_dict()
    moved = {k for k in before if not torch.equal(before[k], after[k])}
    assert moved == {
        "out.weight",
        "out.bias",
        "elmo.scalar_mix_0._torch_params.scalar_mix_0/gamma",
        "elmo.scalar_mix_0._torch_params.scalar_mix_0/scalar_weights",
    }


def test_requires_grad_fine_tunes_the_bilm(files):
    elmo = Elmo(*files, 1, dropout=0.0, requires_grad=True)
    assert all(p.requires_grad for p in elmo.parameters())
    elmo(batch_to_ids(SHORT))["elmo_representations"][0].sum().backward()
    kernel = elmo.bilm.char_cnn.projection.kernel.value
    assert kernel.grad is not None and torch.any(kernel.grad != 0)


def test_the_stateful_line_reproduces_allennlps_stateful_batches(files, allennlp_fixture):
    """AllenNLP carries LSTM state between batches; the documented line does the same."""
    elmo = Elmo(*files, 1, dropout=0.0)
    sentences = json.loads((allennlp_fixture / "sentences.json").read_text())
    state = {}
    for i in range(2):
        batch = [sentences[k][i].split() for k in range(3)]
        out = elmo.bilm({"char_ids": batch_to_ids(batch), **state})
        state = {"state_h": out["state_h"], "state_c": out["state_c"]}
        for k, sentence in enumerate(batch):
            with h5py.File(allennlp_fixture / f"lm_embeddings_{k}.hdf5", "r") as handle:
                want = np.concatenate(handle[str(i)][...], axis=-1)
            got = out["activations"][k, 2, : len(sentence)].detach().numpy()
            np.testing.assert_allclose(got, want, atol=1e-5)


def test_files_may_be_a_preset_name():
    elmo = Elmo("tiny", None, 1, dropout=0.0)
    assert tuple(elmo(batch_to_ids(SHORT))["elmo_representations"][0].shape)[2] == 32


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"num_output_representations": 0}, "`num_output_representations`"),
        ({"dropout": 1.5}, "`dropout`"),
        ({"scalar_mix_parameters": [1.0, 2.0]}, "`scalar_mix_parameters` must be 3 floats"),
        ({"vocab_to_cache": "word"}, "`vocab_to_cache`"),
    ],
)
def test_bad_arguments_are_one_clear_error(files, kwargs, message):
    arguments = {"num_output_representations": 1, **kwargs}
    with pytest.raises(ValueError, match=message):
        Elmo(*files, **arguments)


def test_the_import_names_the_torch_backend(monkeypatch):
    import elmo_keras.allennlp as module

    monkeypatch.setattr(keras.config, "backend", lambda: "tensorflow")
    with pytest.raises(ImportError, match="KERAS_BACKEND=torch.*'tensorflow'"):
        module._check_torch_backend()


def test_docstring_examples():
    import doctest

    import elmo_keras.allennlp.elmo as module

    flags = doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE
    result = doctest.testmod(module, optionflags=flags)
    assert result.attempted >= 4 and result.failed == 0
