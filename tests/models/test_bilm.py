"""The biLM against the published fixtures (bilm-tf and AllenNLP) and the NumPy reference."""

import contextlib
import json

import h5py
import keras
import numpy as np
import pytest

from benchmarks import fixture_check
from elmo_keras.models import BiLM
from elmo_keras.text import batch_to_char_ids, bos_char_ids, eos_char_ids
from elmo_keras.weights import read_options, save_weights
from tests import numpy_reference as ref
from tests.fast_path_context import fast_path_inference, without_autograd
from tests.test_case import (
    as_numpy,
    check_keras_file_round_trip,
    run_layer_test,
)

FIXTURES = {
    "bilm-tf": ("bilm_tf/model", "lm_embeddings_sentences.json"),
    "allennlp": ("allennlp", "sentences.json"),
}


def fixture_model(fixtures_dir, name):
    folder = fixtures_dir / FIXTURES[name][0]
    return BiLM.from_bilm_tf(folder / "options.json", folder / "lm_weights.hdf5"), folder


@pytest.mark.parametrize("length_aware", [True, False])
@pytest.mark.parametrize("name", sorted(FIXTURES))
def test_stateful_replay_matches_the_fixture(fixtures_dir, name, length_aware):
    """10 batches of 3 sentences, state carried per row through explicit state in/out; on the
    backend's fast path (TensorFlow's, PyTorch's without autograd, JAX's inside
    `jax_fast_path.inference()`) and on the core path. On JAX every batch is padded to the
    longest sentence (masked positions): each new shape of an eager call compiles anew there
    (3-5 s each), and one shape keeps the JAX run's time down."""
    bilm, folder = fixture_model(fixtures_dir, name)
    bilm.length_aware = bilm.bilstm.length_aware = length_aware
    sentences = json.loads((folder / FIXTURES[name][1]).read_text())
    width = fixture_check.longest(name) if keras.config.backend() == "jax" else None
    expected = [h5py.File(folder / f"lm_embeddings_{k}.hdf5", "r") for k in range(3)]
    state = {}
    worst, worst_stateless = 0.0, 0.0
    for i in range(10):
        batch = [sentences[k][i].split() for k in range(3)]
        ids = batch_to_char_ids(batch, max_length=width)
        with fast_path_inference() if length_aware else without_autograd():
            out = bilm({"char_ids": ids, **state})
            stateless = as_numpy(bilm(ids)["activations"])[:, -1]
        state = {"state_h": out["state_h"], "state_c": out["state_c"]}
        top = as_numpy(out["activations"])[:, -1]
        np.testing.assert_array_equal(as_numpy(out["mask"]).sum(1), [len(s) for s in batch])
        for k in range(3):
            want = expected[k][str(i)][...]
            want = np.concatenate([want[0], want[1]], axis=-1)
            n = len(batch[k])
            worst = max(worst, np.abs(top[k, :n] - want).max())
            if i > 0:
                worst_stateless = max(worst_stateless, np.abs(stateless[k, :n] - want).max())
            else:  # the first batch starts from zero state in the fixture too
                np.testing.assert_allclose(stateless[k, :n], want, atol=1e-5, rtol=0)
    assert worst <= 1e-5, worst
    # The state is what makes batches 1..9 match: from zero state they are far off.
    assert worst_stateless > 1e-2


def test_token_embeddings_match_allennlp(fixtures_dir):
    bilm, folder = fixture_model(fixtures_dir, "allennlp")
    words = (folder / "vocab_test.txt").read_text().split("\n")
    words = [w for w in words if w]
    expected = h5py.File(folder / "elmo_token_embeddings.hdf5", "r")["embedding"][...]
    assert len(words) == expected.shape[0] == 458
    got = as_numpy(bilm.char_cnn(batch_to_char_ids([words])))[0]
    np.testing.assert_allclose(got, expected, atol=1e-5, rtol=0)
    # The model's own <S>/</S> vectors equal those of the literal tokens.
    boundary = as_numpy(bilm.char_cnn(np.stack([bos_char_ids(), eos_char_ids()])[None]))[0]
    np.testing.assert_allclose(
        boundary, expected[[words.index("<S>"), words.index("</S>")]], atol=1e-5
    )


def test_bilm_matches_numpy_reference_through_the_published_layout(fixtures_dir, tmp_path):
    """A random model is written in bilm-tf's layout; the NumPy reference reads that file."""
    options = read_options(fixtures_dir / "allennlp" / "options.json")
    options["lstm"]["cell_clip"] = 0.5  # make the clips act
    options["lstm"]["proj_clip"] = 0.2
    keras.utils.set_random_seed(7)
    bilm = BiLM.from_options(options)
    bilm.build()
    for w in bilm.weights:  # move biases and embeddings off their initial values
        w.assign(w + np.random.default_rng(0).normal(size=w.shape).astype("float32") * 0.1)
    save_weights(bilm, tmp_path / "w.hdf5")
    with h5py.File(tmp_path / "w.hdf5", "r") as f:
        arrays = {name: f[name][...].astype(np.float64) for name in _datasets(f)}
    sentences = [["The", "bank", "of", "the", "river", "."], ["Money", "in", "a", "bank"], ["Ok"]]
    out = bilm(batch_to_char_ids(sentences))
    cells = ref.published_cells(arrays, 2)
    for b, sentence in enumerate(sentences):
        ids = np.concatenate(
            [bos_char_ids()[None], batch_to_char_ids([sentence])[0], eos_char_ids()[None]]
        )
        tokens = ref.char_cnn_from_published(arrays, 5, ids)
        layers, _ = ref.bilstm_sentence(tokens, cells, True, 0.5, 0.2)
        n = len(sentence)
        np.testing.assert_allclose(
            as_numpy(out["token_embeddings"])[b, :n], tokens[1:-1], atol=1e-5
        )
        np.testing.assert_allclose(
            as_numpy(out["activations"])[b, 1:, :n], layers[:, 1:-1], atol=1e-5
        )
        np.testing.assert_array_equal(as_numpy(out["activations"])[b, :, n:], 0.0)


def _datasets(group, prefix=""):
    for key, item in group.items():
        if isinstance(item, h5py.Dataset):
            yield prefix + key
        else:
            yield from _datasets(item, prefix + key + "/")


def test_padding_invariance_every_layer_both_directions(fixtures_dir):
    bilm, _ = fixture_model(fixtures_dir, "allennlp")
    sentence = "The bank raised its interest rates .".split()
    alone = as_numpy(bilm(batch_to_char_ids([sentence]))["activations"])[0]
    batch = [
        ["A"],
        "In the spring the river burst its bank and the fields flooded .".split(),
        sentence,
        "Short one".split(),
    ]
    inside = as_numpy(bilm(batch_to_char_ids(batch))["activations"])[2, :, : len(sentence)]
    assert alone.shape == (3, len(sentence), 32)
    np.testing.assert_allclose(inside, alone, atol=1e-6, rtol=0)


def test_output_structure_and_empty_sentences(fixtures_dir):
    bilm, _ = fixture_model(fixtures_dir, "bilm-tf")
    ids = batch_to_char_ids([["a", "b", "c"], []])
    out = bilm(ids)
    assert out["token_embeddings"].shape == (2, 3, 16)
    assert out["activations"].shape == (2, 3, 3, 32)
    assert out["state_h"].shape == (2, 2, 2, 16) and out["state_c"].shape == (2, 2, 2, 64)
    np.testing.assert_array_equal(as_numpy(out["mask"]), [[True] * 3, [False] * 3])
    np.testing.assert_array_equal(as_numpy(out["activations"])[1], 0.0)
    layer0 = as_numpy(out["activations"])[0, 0]
    np.testing.assert_array_equal(layer0[:, :16], as_numpy(out["token_embeddings"])[0])
    np.testing.assert_array_equal(layer0[:, 16:], as_numpy(out["token_embeddings"])[0])


def test_keras_file_round_trip_is_identical(fixtures_dir, tmp_path):
    bilm, _ = fixture_model(fixtures_dir, "allennlp")
    ids = batch_to_char_ids([["Hello", "world"], ["Keras", "saves", "this", "."]])
    loaded = check_keras_file_round_trip(bilm, ids, tmp_path)
    assert isinstance(loaded, BiLM)
    assert loaded.get_config() == bilm.get_config()


def test_bilm_as_a_layer():
    ids = batch_to_char_ids([["Hello", "world"], ["Bye"]])
    run_layer_test(
        BiLM,
        {
            "lstm_units": 16,
            "projection_dim": 8,
            "filters": [(1, 4), (2, 4)],
            "n_highway": 1,
            "dropout": 0.1,
            "cell_clip": 2.0,
            "proj_clip": None,
            "activation": "tanh",
        },
        ids,
        {
            "token_embeddings": (2, 2, 8),
            "activations": (2, 3, 2, 16),
            "mask": (2, 2),
            "state_h": (2, 2, 2, 8),
            "state_c": (2, 2, 2, 16),
        },
        # char CNN: embedding, 2 convolutions x 2, 1 highway x 4, projection x 2;
        # biLSTM: 2 directions x 2 layers x 4.
        expected_num_trainable_weights=1 + 4 + 4 + 2 + 16,
        run_keras_round_trip=False,  # `test_keras_file_round_trip_is_identical`, real weights
    )


def test_mixed_float16():
    ids = batch_to_char_ids([["Hello", "world"], ["Bye"]])
    mixed = BiLM(
        lstm_units=16,
        projection_dim=8,
        filters=[(1, 4), (2, 4)],
        n_highway=1,
        dtype="mixed_float16",
    )
    out = mixed(ids)
    assert keras.backend.standardize_dtype(out["activations"].dtype) == "float16"
    assert np.all(np.isfinite(as_numpy(out["activations"]).astype(np.float32)))


def test_published_configuration_parameter_count():
    bilm = BiLM()
    bilm.build()
    # REFERENCE.md: 93.6M without the softmax (our embedding has the extra padding row).
    assert round((bilm.count_params() - 16) / 1e6, 1) == 93.6


def test_bad_inputs_are_named():
    bilm = BiLM(lstm_units=8, projection_dim=4, filters=[(1, 4)], n_highway=0)
    with pytest.raises(ValueError, match="'char_ids'"):
        bilm({"ids": np.zeros((1, 2, 50), "int32")})
    with pytest.raises(ValueError, match="both 'state_h' and 'state_c'"):
        bilm({"char_ids": np.zeros((1, 2, 50), "int32"), "state_h": np.zeros((1, 2, 2, 4))})
    with pytest.raises(ValueError, match=r"\[batch, tokens, max_characters_per_token\]"):
        bilm(np.zeros((2, 50), "int32"))


def test_float64_equals_the_numpy_reference_and_measures_the_fixtures_round_off():
    """Both fixtures' walk (`benchmarks/fixture_check.py`, the state carried) in float64
    against tests/numpy_reference.py on the published arrays: the same numbers to 1e-12, on
    each backend's usual inference path. Both then sit 6.9e-7 (bilm-tf) and 1.14e-6
    (AllenNLP) from the fixtures, which implementations computed in float32: that much of any
    float32 run's distance to a fixture is the fixture's own round-off (docs/exactness.md).
    `floatx` is float64 too (Keras 3.15 computes two float64 operands in `floatx` on JAX and
    PyTorch, keras-team/keras#23704), and JAX runs with `jax_enable_x64`. On JAX Keras 3.15's
    `ops.tanh` still computes in float32 (`result_type("float64", float)` is float32 there), so
    JAX is held to float32's 1e-6: what it shows there is that its fast path runs under
    `jax_enable_x64` (it failed before) and returns float64; its batches are padded to one
    shape there (`one_shape`), compiled once instead of ten times."""

    def load(folder):
        bilm = BiLM.from_bilm_tf(folder / "options.json", folder / "lm_weights.hdf5")

        def run(inputs):
            with fast_path_inference():
                out = bilm(inputs)
            top = as_numpy(out["activations"])[:, -1]
            assert top.dtype == np.float64
            return top, {"state_h": out["state_h"], "state_c": out["state_c"]}

        return run

    x64 = contextlib.nullcontext()
    on_jax = keras.config.backend() == "jax"
    if on_jax:
        import jax

        x64 = jax.enable_x64(True)
    floatx = keras.config.floatx()
    keras.config.set_floatx("float64")
    try:
        with x64:
            to_reference = fixture_check.top_layer_diffs(load, "float64", one_shape=on_jax)
            if not on_jax:
                to_fixture = fixture_check.top_layer_diffs(load)
    finally:
        keras.config.set_floatx(floatx)
    if on_jax:
        assert max(to_reference.values()) <= 1e-6, to_reference
        return
    assert max(to_reference.values()) <= 1e-12, to_reference
    rounded = {name: round(diff, 8) for name, diff in to_fixture.items()}
    assert rounded == {"bilm-tf": 6.9e-7, "allennlp": 1.14e-6}, to_fixture
    assert to_fixture == pytest.approx(fixture_check.fixture_rounding(), abs=1e-12)
