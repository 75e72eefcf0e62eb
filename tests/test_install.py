"""The wheel installs and runs outside the repository.

The wheel is built from a copy of the sources (nothing is written into the checkout) and
installed into a fresh virtual environment. Its dependencies (TensorFlow, ...) are not
downloaded again: a `.pth` file puts this environment's site-packages after the new one's, and
this environment's editable install of elmo-keras is not active there (its hook is a `.pth`
file of a site folder that the new environment does not process). The commands run from a
temporary folder, and the test checks that `elmo_keras` came from the wheel.
"""

import json
import os
import pathlib
import shutil
import site
import subprocess
import sys
import textwrap
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCES = ["pyproject.toml", "README.md", "elmo_keras", "export"]


def _run(command, cwd, env=None, timeout=300):
    result = subprocess.run(
        [str(c) for c in command],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        timeout=timeout,
    )
    assert result.returncode == 0, f"{command}\n{result.stdout[-2000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """`(venv, work)`: a virtual environment with the wheel installed, an empty folder."""
    tmp = tmp_path_factory.mktemp("install")
    source = tmp / "source"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, source / name)
    pip = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
    _run(
        [
            *pip,
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-w",
            tmp / "dist",
            source,
        ],
        cwd=tmp,
    )
    (wheel,) = (tmp / "dist").glob("elmo_keras-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.startswith("export/")], "a top-level `export` package"
    assert "elmo_keras/export/writer.py" in names
    assert "elmo_keras/assets/tiny_allennlp/lm_weights.hdf5" in names

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
        [python, *pip[1:], "install", "--no-deps", "--no-index", "--ignore-installed", wheel],
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
    result = _run([venv / "bin" / "python", "-c", code], cwd=work, env=_environment())
    report = json.loads(result.stdout.strip().splitlines()[-1])
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
    import h5py

    with h5py.File(work / "out.hdf5") as handle:
        assert sorted(handle) == ["0", "1", "2"]
        assert handle["0"].shape == (3, 6, 32) and handle["1"].shape == (3, 0, 32)
