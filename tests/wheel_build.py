"""The elmo-keras wheel as a user gets it, built once per test session (`tests/conftest.py`'s
`wheel` fixture) from a copy of the sources: nothing is written into the checkout.

tests/test_install.py installs it into fresh environments; tests/test_docs_examples.py runs the
README's and docs' examples against it from an empty folder.
"""

import pathlib
import shutil
import sys

from tests.fresh_interpreter import run_command

ROOT = pathlib.Path(__file__).resolve().parents[1]
SOURCES = ["pyproject.toml", "README.md", "LICENSE", "elmo_keras", "export"]
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "--no-input"]
BUILD_LOG = "build.log"  # beside the wheel's folder: what the build printed


def build_wheel(tmp):
    """Builds the wheel under the folder `tmp` (this environment's setuptools, no network);
    returns its path. The build's output, its warnings included, is `tmp / BUILD_LOG`."""
    tmp = pathlib.Path(tmp)
    source = tmp / "source"
    source.mkdir()
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(ROOT / name, source / name, ignore=ignore)
        else:
            shutil.copy2(ROOT / name, source / name)
    command = [*PIP, "wheel", "--verbose", "--no-deps", "--no-build-isolation", "--no-index"]
    build = run_command([*command, "-w", tmp / "dist", source], cwd=tmp)
    (tmp / BUILD_LOG).write_text(build.stdout + build.stderr, encoding="utf-8")
    (path,) = (tmp / "dist").glob("elmo_keras-*.whl")
    return path


def install_for_this_python(wheel, target):
    """Installs `wheel` without its dependencies into the folder `target`: with `target` first
    on `PYTHONPATH`, this environment's Python runs the wheel's package (with this
    environment's TensorFlow, Keras, ...) instead of the checkout's editable install."""
    run_command([*PIP, "install", "--no-deps", "--no-index", "--target", target, wheel], cwd=target)
    return pathlib.Path(target)
