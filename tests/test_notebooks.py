"""Every notebook in `notebooks/` runs top to bottom (with the tiny model), so none can rot.

`ELMO_KERAS_NOTEBOOK_TINY=1` makes the notebooks use the tiny packaged biLM and small data;
the committed copies were executed with the WikiText-2 biLM and keep their outputs.
"""

import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
# In tiny mode only the downstream notebook reads `../shared/data` (the MR sentences); the others
# use the fixtures and the packaged model, so they run in a clean clone too.
NEEDS_SHARED_DATA = {"03_downstream"}


def test_there_are_notebooks():
    names = [path.name for path in NOTEBOOKS]
    assert names == [
        "01_quickstart.ipynb",
        "02_train_bilm.ipynb",
        "03_downstream.ipynb",
        "04_export_serving.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_top_to_bottom(path, monkeypatch):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    if path.stem in NEEDS_SHARED_DATA and not (ROOT.parent / "shared" / "data").is_dir():
        pytest.skip("needs the shared data folder (the MR sentences)")
    monkeypatch.setenv("ELMO_KERAS_NOTEBOOK_TINY", "1")
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=180,
        kernel_name="python3",
        resources={"metadata": {"path": str(path.parent)}},
    )
    client.execute()  # raises CellExecutionError, with the cell and traceback, on failure
    errors = [
        output
        for cell in notebook.cells
        if cell.cell_type == "code"
        for output in cell.get("outputs", [])
        if output.get("output_type") == "error"
    ]
    assert not errors
