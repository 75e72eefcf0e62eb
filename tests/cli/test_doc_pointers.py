"""What the package says to its user (error messages, warnings, `--help`) points only at what
an installed user has (issue 29, point 8): the repository's docs/ folder is not in the wheel,
so no message names a `docs/...` file. Nor a section of the README (issue 39, point 19): it is
the package's description on the registry, not a page an installed user can open;
`elmo-keras COMMAND --help`, `elmo-keras presets` or a module's docstring
(`python -m pydoc elmo_keras.backend`) are named instead."""

import ast
import pathlib

import elmo_keras

PACKAGE = pathlib.Path(elmo_keras.__file__).parent


def _docstrings(tree):
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if isinstance(body, list) and body and isinstance(body[0], ast.Expr):
            yield body[0].value


def test_no_message_points_to_the_repository_docs_folder_or_the_readme():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node) for node in _docstrings(tree)}
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and ("docs/" in node.value or "README" in node.value)
                and id(node) not in docstrings
            ):
                found.append(f"{path.relative_to(PACKAGE.parent)}:{node.lineno}: {node.value!r}")
    assert not found, "\n".join(found)
