"""The Python examples of the README and docs/ run as written, on the installed wheel, from any
folder.

The wheel (`tests/wheel_build.py`, once per session) is installed without its dependencies into
a temporary folder put first on `PYTHONPATH`, and the examples run in one child process of this
environment's Python from an empty temporary folder: a path relative to a clone
(`elmo_keras/assets/...`) or a module that only the source tree has fails there, as it fails for
a user. The blocks of one page run in order in one namespace (a later block may use an earlier
one's names), with `/tmp/` pointed at a temporary folder. A block that reads what a shell
command of its page writes (an export, Beam shards) or that needs a download is listed in
`NEEDS` with the reason and the test that covers it instead; every other block runs. A block
that sets `KERAS_BACKEND` runs in a process of its own.
"""

import json
import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests.wheel_build import install_for_this_python

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

# Runs in the child: each page's blocks in one namespace; the first failure of a page, named.
RUN_PAGES = """
import json, sys, traceback
pages = json.loads(open(sys.argv[1], encoding="utf-8").read())
results = {}
for page, blocks in pages.items():
    namespace = {"__name__": "__docs__"}
    results[page] = None
    for where, code in blocks:
        try:
            exec(compile(code, where, "exec"), namespace)
        except BaseException as error:  # the failing block, named
            results[page] = f"{where}: {type(error).__name__}: {error}"
            break
import elmo_keras
results["elmo_keras"] = elmo_keras.__file__
open(sys.argv[2], "w", encoding="utf-8").write(json.dumps(results))
"""


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
RUN_HERE = [page.name for page, blocks in RUNNABLE if blocks]


def test_every_block_runs_or_says_why_not():
    blocks = [code for _, page_blocks in PAGE_BLOCKS for _, code in page_blocks]
    skipped = [code for code in blocks if _needs(code)]
    assert len(blocks) >= 15 and len(blocks) - len(skipped) >= 10, (len(blocks), len(skipped))


def test_no_example_names_a_path_inside_a_clone():
    """The packaged models are named by preset (`tiny`, `mini_en`) or by the path a helper
    prints (`resolve_preset`, `elmo-keras presets NAME`), never as `elmo_keras/assets/...`,
    which exists only in a clone's root (the `python experiments/...` scripts need a clone
    anyway)."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(r"^```(?:python|bash)\n(.*?)^```", text, re.S | re.M):
            first = text.count("\n", 0, match.start()) + 2
            # A command continued over lines ("\\" at the end) is one line here.
            commands = re.sub(r"\\\n", " ", match.group(1)).splitlines()
            for command in commands:
                if "elmo_keras/assets/" in command and "experiments/" not in command:
                    found.append(f"{page.name} (block at line {first}): {command.strip()}")
    assert not found, "\n".join(found)


def test_pages_that_save_keras_files_say_how_to_load_them():
    """`keras.models.load_model` needs `import elmo_keras` first (it registers the layers):
    every page that says a model saves as `.keras` says so."""
    for page in (REPO / "README.md", REPO / "docs" / "embedding.md"):
        text = " ".join(page.read_text(encoding="utf-8").split())
        assert "as `.keras`" in text, page.name
        assert "`.keras` file needs `import elmo_keras` first" in text, page.name


@pytest.fixture(scope="module")
def examples_run(wheel, tmp_path_factory):
    """`(results, tmp)`: every runnable page's blocks run in one child process, on the wheel
    installed into a temporary folder first on `PYTHONPATH`, from an empty folder."""
    tmp = tmp_path_factory.mktemp("docs_examples")
    target = install_for_this_python(wheel, tmp_path_factory.mktemp("wheel_target"))
    work = tmp / "work"
    work.mkdir()
    env = {**os.environ, "PYTHONPATH": str(target)}
    pages, separate = {}, []
    for page, blocks in RUNNABLE:
        pages[page.name] = []
        for line, code in blocks:
            where = f"{page.name}:{line}"
            code = code.replace("/tmp/", f"{tmp}/")
            if "KERAS_BACKEND" in code:
                separate.append((page.name, where, code))
            else:
                pages[page.name].append((where, code))
    (tmp / "pages.json").write_text(json.dumps(pages), encoding="utf-8")
    command = [sys.executable, "-c", RUN_PAGES, tmp / "pages.json", tmp / "results.json"]
    result = subprocess.run(command, capture_output=True, text=True, timeout=900, env=env, cwd=work)
    assert result.returncode == 0, result.stderr[-3000:]
    results = json.loads((tmp / "results.json").read_text(encoding="utf-8"))
    for name, where, code in separate:
        child = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=300,
            env=env,
            cwd=work,
        )
        if child.returncode != 0 and results[name] is None:
            results[name] = f"{where}: {child.stderr.strip().splitlines()[-1:]}"
    return results, target


def test_the_examples_ran_on_the_wheel(examples_run):
    results, target = examples_run
    assert results["elmo_keras"].startswith(str(target)), results["elmo_keras"]


@pytest.mark.parametrize("page", RUN_HERE)
def test_the_examples_of_a_page_run(page, examples_run):
    results, _ = examples_run
    assert results[page] is None, results[page]
