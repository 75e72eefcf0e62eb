"""The commands written in the README and docs/ are ones the code accepts.

Every `elmo-keras ...` line of a bash block is parsed by the real command-line parser (its
subcommand, flags and choices exist); every `python benchmarks/...` or `python experiments/...`
line names a script that exists and flags that script (or the benchmark helpers it imports)
defines; every `make` target exists. What the commands then do is tested where each feature is.
Placeholders in the docs (`$VAR`, `$((...))`, `[--optional flags]`, `...`) are filled in or
dropped first.
"""

import pathlib
import re
import shlex

import pytest

from elmo_keras.cli import build_parser

REPO = pathlib.Path(__file__).resolve().parents[1]
DOCUMENTS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]


def _bash_lines(path):
    """Each command line of each ```bash block: continuation lines and open quotes joined."""
    lines = []
    in_block = False
    pending = ""
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if raw.startswith("```"):
            in_block = raw.strip() == "```bash"
            continue
        if not in_block:
            continue
        line = pending + raw.strip()
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        try:
            _tokens(line)
        except ValueError:  # a quote opened on this line closes on a later one
            pending = line + "\n"
            continue
        pending = ""
        if line:
            lines.append((f"{path.name}:{number}", line))
    return lines


def _tokens(command):
    command = re.sub(r"\$\(\([^)]*\)\)", "8", command)  # $((128 * N_GPUS))
    command = re.sub(r"\$\{?\w+\}?", "X", command)  # $OUT, ${VAR}
    command = re.sub(r"\[(--[^\]]*)\]", r"\1", command)  # [--tf32] -> --tf32
    lexer = shlex.shlex(command, posix=True, punctuation_chars=";&|<>")
    lexer.whitespace_split = True
    return list(lexer)


def _commands():
    """(where, words) for each simple command: split at `&&`, `;`, `|`, redirections dropped."""
    found = []
    for path in DOCUMENTS:
        for where, line in _bash_lines(path):
            words = []
            tokens = _tokens(line) + [";"]
            skip = False
            for token in tokens:
                if token in (";", "&&", "||", "|", "&"):
                    while words and "=" in words[0] and not words[0].startswith("-"):
                        words = words[1:]  # KERAS_BACKEND=jax elmo-keras ...
                    if words and words[0] == "timeout":
                        words = words[2:]
                    if words:
                        found.append((where, [w for w in words if w != "..."]))
                    words, skip = [], False
                elif token in (">", ">>", "<", "2>", "&>"):
                    skip = True
                elif skip:
                    skip = False
                else:
                    words.append(token)
    return found


COMMANDS = _commands()
CLI = [(w, words[1:]) for w, words in COMMANDS if pathlib.Path(words[0]).name == "elmo-keras"]
SCRIPTS = [
    (w, words[1:])
    for w, words in COMMANDS
    if re.fullmatch(r"python3?", words[0])
    and len(words) > 1
    and words[1].startswith(("benchmarks/", "experiments/"))
]
MAKE = [(w, words[1:]) for w, words in COMMANDS if words[0] == "make"]


def test_the_documents_hold_commands():
    # The extraction itself works: the README and docs show dozens of commands of each kind.
    assert len(CLI) > 20 and len(SCRIPTS) > 15 and len(MAKE) >= 2


@pytest.mark.parametrize(("where", "arguments"), CLI, ids=[w for w, _ in CLI])
def test_elmo_keras_commands_parse(where, arguments, capsys):
    parser = build_parser()
    try:
        args, unknown = parser.parse_known_args(arguments)
    except SystemExit as error:
        message = capsys.readouterr().err.strip().splitlines()[-1:]
        pytest.fail(f"{where}: `elmo-keras {' '.join(arguments)}` is refused: {message}")
        raise AssertionError from error
    assert getattr(args, "_run", None) is not None, f"{where}: no subcommand"
    if unknown:
        assert getattr(args, "_takes_unknown_args", False), f"{where}: unknown {unknown}"


def _script_flags(script):
    """The `--flags` a script defines: in its own source or a benchmarks module it imports."""
    text = script.read_text(encoding="utf-8")
    for name in re.findall(r"^from (?:benchmarks\.)?(\w+) import|^import (\w+)", text, re.M):
        module = script.parent / f"{name[0] or name[1]}.py"
        if module.is_file():
            text += module.read_text(encoding="utf-8")
    return set(re.findall(r"[\"'](--[\w-]+)[\"']", text))


@pytest.mark.parametrize(("where", "arguments"), SCRIPTS, ids=[w for w, _ in SCRIPTS])
def test_script_commands_name_real_flags(where, arguments):
    script = REPO / arguments[0]
    assert script.is_file(), f"{where}: {arguments[0]} does not exist"
    if script.name == "revisions.py" and "--" in arguments:
        # `revisions.py ... -- training.py --configs ...`: the flags after `--` are the
        # named benchmark's.
        split = arguments.index("--")
        inner = [f"benchmarks/{arguments[split + 1]}", *arguments[split + 2 :]]
        test_script_commands_name_real_flags(where, inner)
        arguments = arguments[:split]
    defined = _script_flags(script)
    for word in arguments[1:]:
        flag = word.split("=")[0]
        if flag.startswith("--"):
            assert flag in defined, f"{where}: {script.name} defines no {flag}"


def test_make_targets_exist():
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    targets = set(re.findall(r"^([\w.-]+):", makefile, re.M))
    for where, arguments in MAKE:
        for target in arguments:
            assert target in targets, f"{where}: make {target}: no such target"


def test_the_readme_front_door_example_prints_what_it_says(capsys):
    """The README's first Python block (the five-line `from_preset` example) runs as written."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    block = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    assert text.index(block) < 2000, "the first example is not on the README's first screen"
    promised = re.search(r"print\(.*\)\s+# (\([\d, ]+\))", block).group(1)
    exec(compile(block, "README.md", "exec"), {})
    assert capsys.readouterr().out.strip() == promised
