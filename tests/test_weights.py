import json
import shutil

import h5py
import numpy as np
import pytest

from elmo_keras.models import BiLM
from elmo_keras.weights import load_bilm, load_weights, read_options, save_weights, write_options


def datasets(path):
    out = {}
    with h5py.File(path, "r") as f:
        f.visititems(
            lambda name, item: (
                out.__setitem__(name, item[...]) if isinstance(item, h5py.Dataset) else None
            )
        )
    return out


@pytest.mark.parametrize("folder", ["bilm_tf/model", "allennlp"])
def test_load_save_load_is_bit_exact(fixtures_dir, tmp_path, folder):
    src = fixtures_dir / folder
    bilm = load_bilm(src / "options.json", src / "lm_weights.hdf5")
    save_weights(bilm, tmp_path / "out.hdf5")
    original, written = datasets(src / "lm_weights.hdf5"), datasets(tmp_path / "out.hdf5")
    assert sorted(original) == sorted(written)
    for name in original:
        assert original[name].dtype == written[name].dtype
        np.testing.assert_array_equal(original[name], written[name], err_msg=name)
    write_options(bilm.to_options(), tmp_path / "options.json")
    again = load_bilm(tmp_path / "options.json", tmp_path / "out.hdf5")
    for a, b in zip(bilm.weights, again.weights, strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert read_options(tmp_path / "options.json") == json.loads((src / "options.json").read_text())


def test_forget_bias_and_gate_order_conventions(fixtures_dir):
    src = fixtures_dir / "bilm_tf" / "model"
    bilm = load_bilm(src / "options.json", src / "lm_weights.hdf5")
    w0 = datasets(src / "lm_weights.hdf5")["RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0"]
    b = datasets(src / "lm_weights.hdf5")["RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/B"]
    cell = bilm.bilstm.forward_cells[0]
    units = cell.lstm_units
    # Keras block 1 (forget) is TensorFlow block 2 (f); Keras block 2 (candidate) is TF block 1 (j).
    np.testing.assert_array_equal(
        np.asarray(cell.kernel)[:, units : 2 * units], w0[:16, 2 * units : 3 * units]
    )
    np.testing.assert_array_equal(
        np.asarray(cell.recurrent_kernel)[:, 2 * units : 3 * units], w0[16:, units : 2 * units]
    )
    np.testing.assert_array_equal(
        np.asarray(cell.bias)[units : 2 * units], b[2 * units : 3 * units]
    )
    assert cell.forget_bias == 1.0  # added at run time, as TensorFlow's LSTMCell
    np.testing.assert_array_equal(np.asarray(bilm.char_cnn.char_embedding.embeddings)[0], 0.0)


def copy_fixture(fixtures_dir, tmp_path):
    for name in ("options.json", "lm_weights.hdf5"):
        shutil.copy(fixtures_dir / "allennlp" / name, tmp_path / name)
    return tmp_path / "options.json", tmp_path / "lm_weights.hdf5"


def test_missing_dataset_is_named(fixtures_dir, tmp_path):
    options, weights = copy_fixture(fixtures_dir, tmp_path)
    with h5py.File(weights, "a") as f:
        del f["CNN_high_1/W_carry"]
    with pytest.raises(
        ValueError,
        match=r"no dataset 'CNN_high_1/W_carry' \(expected shape "
        r"\(124, 124\)",
    ):
        load_bilm(options, weights)


def test_wrong_shape_is_named_with_both_shapes(fixtures_dir, tmp_path):
    options, weights = copy_fixture(fixtures_dir, tmp_path)
    opts = json.loads(options.read_text())
    opts["lstm"]["dim"] = 32
    options.write_text(json.dumps(opts))
    with pytest.raises(
        ValueError,
        match=r"dataset 'RNN_0/RNN/MultiRNNCell/Cell0/LSTMCell/W_0' "
        r"has shape \(32, 256\), but the options need "
        r"\(32, 128\)",
    ):
        load_bilm(options, weights)


def test_nothing_is_assigned_when_a_later_dataset_is_wrong(fixtures_dir, tmp_path):
    options, weights = copy_fixture(fixtures_dir, tmp_path)
    bilm = BiLM.from_options(read_options(options))
    bilm.build()
    before = [np.asarray(w).copy() for w in bilm.weights]
    with h5py.File(weights, "a") as f:
        del f["RNN_1/RNN/MultiRNNCell/Cell1/LSTMCell/W_P_0"]
    with pytest.raises(ValueError, match="W_P_0"):
        load_weights(bilm, weights)
    for a, b in zip(before, bilm.weights, strict=True):
        np.testing.assert_array_equal(a, np.asarray(b))


def test_training_options_with_261_characters_are_explained(fixtures_dir, tmp_path):
    options, weights = copy_fixture(fixtures_dir, tmp_path)
    opts = json.loads(options.read_text())
    opts["char_cnn"]["n_characters"] = 261
    options.write_text(json.dumps(opts))
    with pytest.raises(
        ValueError,
        match=r"n_characters=261, the value bilm-tf uses while "
        r"training.*Set \"n_characters\": 262",
    ):
        load_bilm(options, weights)


def test_bad_files(tmp_path, fixtures_dir):
    options, weights = copy_fixture(fixtures_dir, tmp_path)
    with pytest.raises(FileNotFoundError, match="weight file not found"):
        load_bilm(options, tmp_path / "missing.hdf5")
    with pytest.raises(FileNotFoundError, match="options file not found"):
        load_bilm(tmp_path / "missing.json", weights)
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        read_options(tmp_path / "bad.json")
    (tmp_path / "bad.hdf5").write_bytes(b"not an hdf5 file")
    with pytest.raises(ValueError, match="not a readable hdf5 file"):
        load_bilm(options, tmp_path / "bad.hdf5")
    opts = json.loads(options.read_text())
    del opts["lstm"]["projection_dim"]
    (tmp_path / "partial.json").write_text(json.dumps(opts))
    with pytest.raises(ValueError, match="missing the key `lstm.projection_dim`"):
        read_options(tmp_path / "partial.json")


@pytest.mark.parametrize(
    "edit, message",
    [
        (lambda o: o.update(lstm=None), "`lstm` must be a JSON object. Received: None"),
        (
            lambda o: o["lstm"].update(dim=64.7),
            "`lstm.dim` must be an integer >= 1. Received: 64.7",
        ),
        (
            lambda o: o["lstm"].update(dim="64"),
            "`lstm.dim` must be an integer >= 1. Received: '64'",
        ),
        (lambda o: o["lstm"].update(cell_clip="3"), "`lstm.cell_clip` must be a finite number"),
        (lambda o: o["lstm"].update(use_skip_connections=1), "`lstm.use_skip_connections` must be"),
        (lambda o: o["char_cnn"].update(filters=[[1, 4.5]]), "`char_cnn.filters` must be"),
        (
            lambda o: o["char_cnn"].update(n_highway=-1),
            "`char_cnn.n_highway` must be an integer >= 0",
        ),
        (lambda o: o["char_cnn"].update(activation="gelu"), "`char_cnn.activation` must be one of"),
    ],
)
def test_bad_option_values_name_file_key_and_value(tmp_path, fixtures_dir, edit, message):
    options, _ = copy_fixture(fixtures_dir, tmp_path)
    opts = json.loads(options.read_text())
    edit(opts)
    options.write_text(json.dumps(opts))
    with pytest.raises(ValueError) as error:
        read_options(options)
    assert str(options) in str(error.value) and message in str(error.value)


def test_whole_number_floats_are_accepted_as_integers(tmp_path, fixtures_dir):
    options, _ = copy_fixture(fixtures_dir, tmp_path)
    opts = json.loads(options.read_text())
    opts["lstm"]["dim"] = float(opts["lstm"]["dim"])  # JSON writers may emit 64.0
    options.write_text(json.dumps(opts))
    assert BiLM.from_options(read_options(options)).lstm_units == int(opts["lstm"]["dim"])


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_non_finite_weights_are_refused_unless_asked(tmp_path, fixtures_dir, value):
    options, weights = copy_fixture(fixtures_dir, tmp_path)
    with h5py.File(weights, "r+") as handle:
        data = handle["CNN_proj/W_proj"][...]
        data[0, 0] = value
        handle["CNN_proj/W_proj"][...] = data
    with pytest.raises(ValueError, match=r"dataset 'CNN_proj/W_proj' holds 1 NaN or infinite"):
        load_bilm(options, weights)
    bilm = load_bilm(options, weights, check_finite=False)  # the scan can be skipped for speed
    assert not np.isfinite(np.asarray(bilm.char_cnn.projection.kernel)).all()
