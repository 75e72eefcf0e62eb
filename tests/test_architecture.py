"""The package's shape, checked from the source: import floors, no import cycle, module sizes.

Every `import` and `from ... import` of the package's own modules is read with `ast`, including
imports inside functions (a lazy import is still a dependency) and imports by a literal string
(`importlib.import_module("elmo_keras.models")`, `__import__(...)`), and a module depends on the
packages above it too (importing `elmo_keras.layers.char_cnn` runs `elmo_keras/layers/
__init__.py`). The floors, lowest first (docs/architecture.md):

0. `elmo_keras` itself, `backend`, `installs`, `validation`, `file_io`, `memory`,
   `batching`, `embedder`, `options`, `presets`, `text`, `runtime`, `weights` (the hdf5
   file as arrays by name)
1. `layers`
2. `models`
3. `training`, `export`, `allennlp`, `beam`, `corpus`
4. `cli`

A module may import from its own floor or lower ones, never from a higher one. One name is
served to older code from a higher floor, lazily, by a module `__getattr__`:
`elmo_keras.layers.ElmoEmbedding`; `test_names_kept_for_older_code_resolve` checks it (its
string import is the one allowed, `ALLOWED_UPWARD`).
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]
FLOORS = {
    "elmo_keras": 0,
    "elmo_keras.backend": 0,
    "elmo_keras.installs": 0,
    "elmo_keras.validation": 0,
    "elmo_keras.file_io": 0,
    "elmo_keras.memory": 0,
    "elmo_keras.batching": 0,
    "elmo_keras.embedder": 0,
    "elmo_keras.options": 0,
    "elmo_keras.data": 0,
    "elmo_keras.presets": 0,
    "elmo_keras.text": 0,
    "elmo_keras.runtime": 0,
    "elmo_keras.weights": 0,
    "elmo_keras.layers": 1,
    "elmo_keras.models": 2,
    "elmo_keras.training": 3,
    "elmo_keras.export": 3,
    "elmo_keras.allennlp": 3,  # AllenNLP's `Elmo` on the torch backend, around `models`
    "elmo_keras.beam": 3,
    "elmo_keras.corpus": 3,
    "elmo_keras.cli": 4,
}
# Floor-0 modules that the ONNX Runtime client may load: no TensorFlow, no Keras.
TF_FREE = [
    "elmo_keras",
    "elmo_keras.installs",
    "elmo_keras.validation",
    "elmo_keras.file_io.files",
    "elmo_keras.memory",
    "elmo_keras.batching",
    "elmo_keras.embedder",
    "elmo_keras.options",
    "elmo_keras.file_io.download",
    "elmo_keras.data",
    "elmo_keras.presets",
    "elmo_keras.text.char_ids",
    "elmo_keras.text.tokenization",
    "elmo_keras.text.vocabulary",
    "elmo_keras.runtime",
    "elmo_keras.runtime.onnx_embedder",
    "elmo_keras.runtime.onnx_metadata",
    "elmo_keras.weights",
]
# The one upward import, by string, for older code (`elmo_keras.layers.ElmoEmbedding`).
# It runs only when the attribute is read, after both packages have loaded, so it is left out
# of the cycle check too; every other string import counts as an import statement would.
ALLOWED_UPWARD = {
    ("elmo_keras.layers", "elmo_keras.models"),
    ("elmo_keras.layers", "elmo_keras.models.elmo_embedding"),
}
MAX_LINES = 400
GENERATED = {"elmo_keras/text/_unicode_tables.py"}


def _modules():
    """{module name: path} for the package, with the top-level export/ as elmo_keras.export."""
    modules = {}
    for top, package in (("elmo_keras", "elmo_keras"), ("export", "elmo_keras.export")):
        for path in (ROOT / top).rglob("*.py"):
            parts = list(path.relative_to(ROOT / top).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join([package, *parts])] = path
    return modules


MODULES = _modules()


def _imports(name, path):
    """The package's own modules that `name` imports, anywhere in its source."""
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        targets = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{anchor}.{base}" if base else anchor
            # `from pkg import sub` imports the submodule `pkg.sub` when there is one.
            targets = [
                f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base for a in node.names
            ]
        elif _string_import(node):
            targets = [_string_import(node)]
        for target in targets:
            while target and target not in MODULES:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
            # Importing a.b.c runs a/__init__ and a/b/__init__ first, unless the importer is
            # inside a.b itself: then they ran (or are running) before it could.
            target = target.rpartition(".")[0]
            while target:
                inside = name.startswith(target + ".")
                if target != name and target in MODULES and not inside:
                    found.add(target)
                target = target.rpartition(".")[0]
    return found


def _string_import(node):
    """The module a call `importlib.import_module("x")` or `__import__("x")` names, if any."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    func = node.func
    name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)
    argument = node.args[0]
    if name in {"import_module", "__import__"} and isinstance(argument, ast.Constant):
        value = argument.value
        return value if isinstance(value, str) and value.startswith("elmo_keras") else None
    return None


GRAPH = {name: _imports(name, path) for name, path in MODULES.items()}


def _floor(name):
    while name not in FLOORS:
        name = name.rpartition(".")[0]
    return FLOORS[name]


def test_the_package_is_found():
    assert {
        "elmo_keras.layers.char_cnn",
        "elmo_keras.models.bilm",
        "elmo_keras.export.onnx",
        "elmo_keras.cli.embed",
        "elmo_keras.options",
    } <= set(MODULES)


def test_no_module_imports_from_a_higher_floor():
    violations = sorted(
        f"{name} (floor {_floor(name)}) imports {target} (floor {_floor(target)})"
        for name, targets in GRAPH.items()
        for target in targets
        if _floor(target) > _floor(name)
        and not _is_package_parent(name, target)
        and (name, target) not in ALLOWED_UPWARD
    )
    assert not violations, "\n".join(violations)


def _is_package_parent(name, target):
    # `elmo_keras.text.x` importing `elmo_keras` (the root package) is not an upward import.
    return target == "elmo_keras"


def test_string_imports_are_seen():
    # The check above would miss a cycle made through `importlib` if strings were not read.
    assert "elmo_keras.models.elmo_embedding" in GRAPH["elmo_keras.layers"]
    assert "elmo_keras.models" not in GRAPH["elmo_keras.weights"]


def test_there_is_no_import_cycle():
    # Depth-first search for a back edge; report the cycle it closes.
    state, stack, cycles = {}, [], []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(GRAPH[node]):
            if (node, nxt) in ALLOWED_UPWARD:
                continue
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt) :] + [nxt])
            elif nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = "done"

    for node in sorted(GRAPH):
        if node not in state:
            visit(node)
    # A package's __init__ importing its own submodules is how packages work, not a cycle.
    real = [
        c
        for c in cycles
        if not all(
            b.startswith(a + ".") or a.startswith(b + ".") for a, b in zip(c, c[1:], strict=False)
        )
    ]
    assert not real, "\n".join(" -> ".join(c) for c in real)


@pytest.mark.parametrize("name", TF_FREE)
def test_floor_zero_modules_the_onnx_client_uses_never_import_tensorflow(name):
    seen, todo = set(), [name]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        tree = ast.parse(MODULES[module].read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and not node.level:
                names = [node.module or ""]
            for imported in names:
                assert imported.split(".")[0] not in {"tensorflow", "keras", "tf_keras"}, (
                    f"{module} imports {imported}, reached from {name}"
                )
        todo.extend(GRAPH[module])


def test_no_module_is_longer_than_400_lines():
    roots = ["elmo_keras", "export", "tests", "benchmarks", "experiments"]
    long = sorted(
        f"{path.relative_to(ROOT)}: {n} lines"
        for root in roots
        for path in (ROOT / root).rglob("*.py")
        if str(path.relative_to(ROOT)) not in GENERATED
        and (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    )
    assert not long, "\n".join(long)


def test_names_kept_for_older_code_resolve():
    import elmo_keras.layers
    from elmo_keras.models import ElmoEmbedding

    assert elmo_keras.layers.ElmoEmbedding is ElmoEmbedding
    with pytest.raises(AttributeError):
        elmo_keras.layers.NoSuchLayer  # noqa: B018
