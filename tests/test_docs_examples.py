"""The Python examples of the README and docs/ run as written.

The blocks of one page run in order in one namespace (a later block may use an earlier one's
names), from the repository root, with `/tmp/` pointed at a temporary folder. A block that
reads what a shell command of its page writes (an export, Beam shards) or that needs a download
is listed in `NEEDS` with the reason and the test that covers it instead; every other block runs.
A block that sets `KERAS_BACKEND` runs in a process of its own.
"""

import os
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[1]
PAGES = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]

# A text in a block -> why the block does not run here, and where what it shows is tested.
NEEDS = {
    "/tmp/elmo_export": "reads the export a shell command writes (tests/export/test_savedmodel.py, "
    "tests/export/test_onnx.py, tests/runtime)",
    "/tmp/elmo_onnx": "reads the export a shell command writes (tests/beam)",
    "/tmp/embeddings": "reads Beam shards a shell command writes (tests/beam/test_records.py)",
    "/tmp/token_embeddings.hdf5": "reads what `dump-token-embeddings` writes "
    "(tests/cli/test_dump_token_embeddings.py)",
    '"efml_chinese"': "downloads an ELMoForManyLangs model (tests/test_efml_presets.py: a "
    "language through a loopback mirror; tests/models/test_efml_models.py: the numbers)",
}


def _blocks(page):
    text = page.read_text(encoding="utf-8")
    return [
        (text.count("\n", 0, match.start()) + 1, match.group(1))
        for match in re.finditer(r"^```python\n(.*?)^```", text, re.S | re.M)
    ]


def _needs(code):
    return next((reason for text, reason in NEEDS.items() if text in code), None)


PAGE_BLOCKS = [(page, _blocks(page)) for page in PAGES]
RUNNABLE = [
    (page, [(line, code) for line, code in blocks if _needs(code) is None])
    for page, blocks in PAGE_BLOCKS
]


def test_every_block_runs_or_says_why_not():
    blocks = [code for _, page_blocks in PAGE_BLOCKS for _, code in page_blocks]
    skipped = [code for code in blocks if _needs(code)]
    assert len(blocks) >= 15 and len(blocks) - len(skipped) >= 10, (len(blocks), len(skipped))


@pytest.mark.parametrize(
    ("page", "blocks"),
    [(page, blocks) for page, blocks in RUNNABLE if blocks],
    ids=[page.name for page, blocks in RUNNABLE if blocks],
)
def test_the_examples_of_a_page_run(page, blocks, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(REPO)
    namespace = {"__name__": "__docs__"}
    for line, code in blocks:
        code = code.replace("/tmp/", f"{tmp_path}/")
        where = f"{page.name}:{line}"
        if "KERAS_BACKEND" in code:
            result = subprocess.run(
                [sys.executable, "-c", code],
                capture_output=True,
                text=True,
                timeout=300,
                env={**os.environ, "PYTHONPATH": str(REPO)},
                cwd=REPO,
            )
            assert result.returncode == 0, f"{where}: {result.stderr[-2000:]}"
            continue
        try:
            exec(compile(code, where, "exec"), namespace)
        except Exception as error:  # noqa: BLE001 - the failing block, named
            pytest.fail(f"{where}: {type(error).__name__}: {error}")
    capsys.readouterr()
