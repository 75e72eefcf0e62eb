"""The wheel installs and runs outside the repository, by extra as Keras 3's installs go.

The wheel is built once per session from a copy of the sources (`tests/wheel_build.py`; nothing
is written into the checkout). `installed`: the wheel in a virtual environment whose
dependencies (TensorFlow, ...) are not downloaded again: a `.pth` file puts this environment's
site-packages after the new one's, and this environment's editable install of elmo-keras is not
active there (its hook is a `.pth` file of a site folder that the new environment does not
process). The `slow` tests install `[runtime]` and `[jax]` alone into fresh environments with
pip (from the package registries, through pip's cache) and check that each runs without what it
leaves out. The commands run from a temporary folder, and the tests check that `elmo_keras` came
from the wheel.
"""

import json
import os
import re
import site
import sys
import textwrap
import zipfile

import h5py
import numpy as np
import pytest

from tests.fresh_interpreter import last_line_json, script_report
from tests.fresh_interpreter import run_command as _run
from tests.wheel_build import BUILD_LOG, PIP, ROOT


def test_the_wheel_builds_without_warnings_and_holds_the_package(wheel):
    """No warning from the build backend (a deprecated license table, data folders missing
    from `packages`: each one a build that stops working with a later setuptools); the
    license, the export package under `elmo_keras` and the packaged models are in it."""
    output = (wheel.parents[1] / BUILD_LOG).read_text(encoding="utf-8")
    warned = [
        line.strip()
        for line in output.splitlines()
        if "BuildBackendWarning" in line or re.search(r"\bdeprecated\b", line, re.I)
    ]
    assert not warned, warned
    names = zipfile.ZipFile(wheel).namelist()
    version = wheel.name.split("-")[1]
    assert f"elmo_keras-{version}.dist-info/licenses/LICENSE" in names
    assert not [n for n in names if n.startswith("export/")], "a top-level `export` package"
    assert "elmo_keras/export/writer.py" in names
    assert "elmo_keras/assets/tiny_allennlp/lm_weights.hdf5" in names
    assert "elmo_keras/assets/mini_en/softmax.hdf5" in names


@pytest.fixture(scope="module")
def installed(wheel, tmp_path_factory):
    """`(venv, work)`: a virtual environment with the wheel installed, an empty folder."""
    tmp = tmp_path_factory.mktemp("install")
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp)
    new_site = _site_packages(venv)
    (new_site / "zz_dependencies.pth").write_text(
        "\n".join(site.getsitepackages()) + "\n", encoding="utf-8"
    )
    python = venv / "bin" / "python"
    # pip from this environment, run by the new one's Python, installs into the new one;
    # `--ignore-installed` leaves the editable install it can see alone.
    _run(
        [python, *PIP[1:], "install", "--no-deps", "--no-index", "--ignore-installed", wheel],
        cwd=tmp,
    )
    work = tmp / "work"
    work.mkdir()
    return venv, work


def _site_packages(venv):
    (path,) = (venv / "lib").glob("python3*/site-packages")
    return path


def _environment():
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    for name in ("PYTHONPATH", "TF_CPP_MIN_LOG_LEVEL", "ELMO_KERAS_DEBUG", "PYTHONWARNINGS"):
        env.pop(name, None)
    return env


def test_the_package_comes_from_the_wheel(installed):
    venv, work = installed
    code = textwrap.dedent(
        """
        import importlib.metadata, importlib.util, json
        import elmo_keras, elmo_keras.export, elmo_keras.cli
        print(json.dumps({
            "files": [elmo_keras.__file__, elmo_keras.export.__file__, elmo_keras.cli.__file__],
            "version": elmo_keras.__version__,
            "metadata_version": importlib.metadata.version("elmo-keras"),
            "top_level_export": importlib.util.find_spec("export") is not None,
        }))
        """
    )
    report = script_report(code, python=venv / "bin" / "python", cwd=work, env=_environment())
    site_packages = str(_site_packages(venv))
    assert all(path.startswith(site_packages) for path in report["files"]), report["files"]
    assert not any(str(ROOT) in path for path in report["files"])
    assert report["version"] == report["metadata_version"]
    assert report["top_level_export"] is False
    assert not (_site_packages(venv) / "export").exists()
    version = _run([venv / "bin" / "elmo-keras", "--version"], cwd=work, env=_environment())
    assert version.stdout == f"elmo-keras {report['version']}\n"


def test_demo_and_embed_run_from_the_installed_wheel(installed):
    """Both print their own lines only: no TensorFlow log lines on stderr."""
    venv, work = installed
    command = venv / "bin" / "elmo-keras"
    demo = _run([command, "demo"], cwd=work, env=_environment())  # the packaged mini_en
    assert "The senses of a word, in the biLM 'mini_en'" in demo.stdout
    assert "site-packages" in demo.stdout  # the wheel's copy, not the repository's
    assert demo.stderr == ""

    tiny = _site_packages(venv) / "elmo_keras" / "assets" / "tiny_allennlp"
    (work / "sentences.txt").write_text("The bank raised its rates .\n\nHi\n", encoding="utf-8")
    args = ["embed", "--model", tiny, "--input", "sentences.txt", "--output", "out.hdf5"]
    embed = _run([command, *args], cwd=work, env=_environment())
    assert embed.stdout.startswith("wrote 3 sentences (7 tokens)")
    assert embed.stderr == ""
    with h5py.File(work / "out.hdf5") as handle:
        assert sorted(handle) == ["0", "1", "2"]
        assert handle["0"].shape == (3, 6, 32) and handle["1"].shape == (3, 0, 32)


# Distributions that the `[runtime]` environment must not hold (the client's promise).
HEAVY = {"tensorflow", "tensorflow-cpu", "tensorflow-text", "keras", "tf-keras", "jax", "jaxlib"}
SENTENCES = [["The", "bank", "raised", "its", "rates", "."], ["Hi"], [], ["Déjà", "vu", "!"]]
REPORT = """
import importlib.metadata, json, sys
import elmo_keras
print(json.dumps({
    "installed": sorted({d.metadata["Name"].lower() for d in importlib.metadata.distributions()}),
    "loaded": sorted({m.split(".")[0] for m in sys.modules} & {"tensorflow", "keras", "jax"}),
    "file": elmo_keras.__file__,
}))
"""
RUNTIME_CHILD = """
import json, sys
import numpy as np
from elmo_keras.runtime import OnnxEmbedder
layers = OnnxEmbedder(sys.argv[1], batch_size=2).embed(json.loads(sys.argv[2]))
np.savez(sys.argv[3], *layers)
"""
JAX_CHILD = """
import json, pathlib, sys
import numpy as np
try:
    import tensorflow  # noqa: F401
    tensorflow_importable = True
except ModuleNotFoundError:
    tensorflow_importable = False
from elmo_keras.models import BiLM, ElmoEmbedding  # before Keras: it picks JAX for Keras
import keras
from elmo_keras.text import batch_to_char_ids
ids = batch_to_char_ids(json.loads(sys.argv[1]))
activations = np.asarray(BiLM.from_preset("tiny")(ids)["activations"])
mixed = np.asarray(ElmoEmbedding.from_preset("tiny")(ids, training=False))
np.savez(sys.argv[2], activations=activations, mixed=mixed)
print(json.dumps({"backend": keras.config.backend(), "tensorflow": tensorflow_importable}))
"""


def _fresh_venv(wheel, extra, tmp):
    """A virtual environment with `wheel[extra]` and what pip resolves for it, from the
    package registries through pip's cache (this environment's pip installs into it)."""
    venv = tmp / f"venv_{extra}"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp)
    python = venv / "bin" / "python"
    _run(
        [*PIP, "--python", python, "install", "--quiet", f"{wheel}[{extra}]"], cwd=tmp, timeout=900
    )
    return venv, script_report(REPORT, python=python, cwd=tmp, env=_environment())


def _one_line_error(command, cwd, env):
    """Runs a command that must fail as a usage error; returns its one stderr line."""
    result = _run(command, cwd=cwd, env=env, timeout=120, returncode=2)
    assert result.stderr.count("\n") == 1, result.stderr
    return result.stderr


@pytest.mark.slow
def test_the_runtime_extra_embeds_without_tensorflow_keras_or_jax(wheel, onnx_model, tmp_path):
    """`pip install "elmo-keras[runtime]"` alone: the ONNX Runtime client gives this session's
    numbers (1e-6); `embed --model M.onnx` runs; `embed` on Keras names the extra to install."""
    from elmo_keras.runtime import OnnxEmbedder

    venv, report = _fresh_venv(wheel, "runtime", tmp_path)
    assert "onnxruntime" in report["installed"], report["installed"]
    assert not HEAVY & set(report["installed"]), sorted(HEAVY & set(report["installed"]))
    assert report["loaded"] == [] and report["file"].startswith(str(_site_packages(venv)))

    env = _environment()
    args = [onnx_model, json.dumps(SENTENCES), tmp_path / "runtime.npz"]
    _run([venv / "bin" / "python", "-c", RUNTIME_CHILD, *args], cwd=tmp_path, env=env)
    expected = OnnxEmbedder(onnx_model, batch_size=2).embed(SENTENCES)
    with np.load(tmp_path / "runtime.npz") as got:
        for i, layers in enumerate(expected):
            np.testing.assert_allclose(got[f"arr_{i}"], layers, atol=1e-6, rtol=0)

    command = venv / "bin" / "elmo-keras"
    (tmp_path / "in.txt").write_text("The bank raised its rates .\nHi\n", encoding="utf-8")
    embed = [command, "embed", "--input", "in.txt", "--output"]
    _run([*embed, "onnx.hdf5", "--model", onnx_model], cwd=tmp_path, env=env)
    with h5py.File(tmp_path / "onnx.hdf5") as handle:
        assert handle["0"].shape == (3, 6, 32)
    error = _one_line_error([*embed, "keras.hdf5", "--preset", "tiny"], tmp_path, env)
    assert 'pip install "elmo-keras[tensorflow]"' in error, error


@pytest.mark.slow
def test_the_jax_extra_runs_the_bilm_without_tensorflow(wheel, allennlp_fixture, tmp_path):
    """`pip install "elmo-keras[jax]"` alone: no TensorFlow, Keras starts on JAX without
    KERAS_BACKEND, and the packaged `tiny` biLM gives AllenNLP's fixture outputs (1e-5)."""
    venv, report = _fresh_venv(wheel, "jax", tmp_path)
    assert {"keras", "jax", "jaxlib"} <= set(report["installed"]), report["installed"]
    assert not {"tensorflow", "tensorflow-cpu", "onnxruntime"} & set(report["installed"])

    env = _environment()
    env.pop("KERAS_BACKEND", None)  # no keras.json either: Keras' default is TensorFlow
    env.update(
        KERAS_HOME=str(tmp_path / "keras_home"), XLA_FLAGS=os.environ["XLA_FLAGS"]
    )  # tests/conftest.py's
    rows = json.loads((allennlp_fixture / "sentences.json").read_text(encoding="utf-8"))
    batch = [rows[k][0].split() for k in range(3)]  # the fixture's first batch: zero state
    child = [venv / "bin" / "python", "-c", JAX_CHILD, json.dumps(batch), tmp_path / "jax.npz"]
    result = _run(child, cwd=tmp_path, env=env)
    assert last_line_json(result) == {
        "backend": "jax",
        "tensorflow": False,
    }
    with np.load(tmp_path / "jax.npz") as got:
        activations, mixed = got["activations"], got["mixed"]
    for k, sentence in enumerate(batch):
        with h5py.File(allennlp_fixture / f"lm_embeddings_{k}.hdf5") as handle:
            want = np.concatenate([handle["0"][0], handle["0"][1]], axis=-1)
        np.testing.assert_allclose(activations[k, -1, : len(sentence)], want, atol=1e-5, rtol=0)
    # ElmoEmbedding's untrained mix is the layers' mean (softmax of zeros, gamma 1), in float64.
    mask = np.arange(mixed.shape[1])[None, :] < np.array([len(s) for s in batch])[:, None]
    mean = activations.astype(np.float64).mean(axis=1) * mask[..., None]
    np.testing.assert_allclose(mixed, mean, atol=1e-5, rtol=0)

    command = [venv / "bin" / "elmo-keras", "export", "--preset", "tiny", "--output", "out"]
    error = _one_line_error(command, tmp_path, env)
    assert 'pip install "elmo-keras[onnx]"' in error, error
