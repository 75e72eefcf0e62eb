"""The safe torch state-dict reader: both formats, device tags, and hostile pickles refused."""

import io
import os
import pickle
import zipfile

import numpy as np
import pytest

from elmo_keras.torch_pickle import read_state_dict
from tests.efml_writer import write_state_dict

ARRAYS = {
    "a.weight": np.arange(12, dtype=np.float32).reshape(3, 4),
    "b.bias": np.array([-1.5, 2.5], np.float32),
    "c.count": np.array(7, np.int64),
}


def check_same(got, want):
    assert list(got) == list(want)
    for name in want:
        assert got[name].dtype == want[name].dtype and got[name].shape == want[name].shape
        np.testing.assert_array_equal(got[name], want[name])


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_reads_what_torch_save_writes(efml_fixture, legacy):
    # EFML's fixture: torch 2.13's own files (zip for one model, legacy for the other).
    name = "cnn_elmo_words" if legacy else "cnn_elmo_chars"
    expected = np.load(efml_fixture / f"{name}.weights.npz")
    for part in ("token_embedder", "encoder"):
        state = read_state_dict(efml_fixture / name / f"{part}.pkl")
        want = {k.split("/", 1)[1]: expected[k] for k in expected.files if k.startswith(part)}
        check_same(state, want)


@pytest.mark.parametrize("legacy", [False, True], ids=["zip", "legacy"])
def test_cuda_tagged_storages_load_on_cpu(tmp_path, legacy):
    path = tmp_path / "state.pkl"
    write_state_dict(path, ARRAYS, legacy=legacy, location="cuda:0")
    check_same(read_state_dict(path), ARRAYS)


class _Hostile:
    def __reduce__(self):
        return (os.system, ("touch HOSTILE_RAN",))


@pytest.mark.parametrize("packing", ["legacy", "zip"])
def test_a_pickle_calling_os_system_is_refused_unrun(tmp_path, monkeypatch, packing):
    monkeypatch.chdir(tmp_path)
    payload = pickle.dumps({"weight": _Hostile()}, protocol=2)
    path = tmp_path / "hostile.pkl"
    if packing == "zip":
        with zipfile.ZipFile(path, "w") as archive:
            archive.writestr("archive/data.pkl", payload)
    else:
        header = b"".join(pickle.dumps(v, protocol=2) for v in (0x1950A86A20F9469CFC6C, 1001, {}))
        path.write_bytes(header + payload)
    with pytest.raises(ValueError, match=r"names `(posix|os)\.system`.*refused without running"):
        read_state_dict(path)
    assert not (tmp_path / "HOSTILE_RAN").exists()


def test_anything_but_a_state_dict_is_one_line(tmp_path):
    path = tmp_path / "x.pkl"
    path.write_bytes(b"not a pickle")
    with pytest.raises(ValueError, match="x.pkl") as error:
        read_state_dict(path)
    assert "\n" not in str(error.value)
    path.write_bytes(pickle.dumps(0x1950A86A20F9469CFC6C, 2) + pickle.dumps(1001, 2) + b"\x80")
    with pytest.raises(ValueError, match="x.pkl"):
        read_state_dict(path)


def test_a_tensor_past_its_storage_is_refused(tmp_path):
    data = io.BytesIO()
    write_state_dict(data, {"w": np.zeros((2, 2), np.float32)})
    with zipfile.ZipFile(data) as archive:
        files = {n: archive.read(n) for n in archive.namelist()}
    files["archive/data/0"] = files["archive/data/0"][:8]  # 2 values for 4
    path = tmp_path / "short.pkl"
    with zipfile.ZipFile(path, "w") as archive:
        for name, value in files.items():
            archive.writestr(name, value)
    with pytest.raises(ValueError, match="shorter than its 4 values"):
        read_state_dict(path)
