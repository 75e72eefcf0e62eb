"""Run folders (issue 30): one run per folder, no model overwritten, and `--resume` checks the
training text and the vocabulary it started with. Real processes where a race is the point."""

import contextlib
import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

from elmo_keras.cli import main

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA = str(ROOT / "tests" / "fixtures" / "bilm_tf" / "train" / "data.txt")


def test_a_new_run_refuses_a_folder_holding_a_model(tmp_path, capsys):
    """Issue 30, point 3: `train --output` into a model folder (options.json, lm_weights.hdf5)
    overwrote them without asking; now it is one line naming the folder and its files, and
    nothing there changes."""
    folder = tmp_path / "model"
    folder.mkdir()
    for name in ("options.json", "lm_weights.hdf5", "vocab.txt"):
        (folder / name).write_text(name)
    argv = ["train", "--train", DATA, "--output", str(folder), "--config", "tiny", "--steps", "1"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "already holds a model (options.json, lm_weights.hdf5)" in err, err
    assert "choose a new --output" in err and len(err.splitlines()) == 1
    assert sorted(p.name for p in folder.iterdir()) == [
        "lm_weights.hdf5",
        "options.json",
        "vocab.txt",
    ]
    assert all((folder / name).read_text() == name for name in ("options.json", "vocab.txt"))


_HOLDER = """
import sys, time
from elmo_keras.training.run.run_folder import lock_run
with lock_run(sys.argv[1]):
    print("locked", flush=True)
    time.sleep(120)
"""


@contextlib.contextmanager
def run_lock_held(folder):
    """A live process holding `folder`'s run lock (as a training run does) for the block; it is
    SIGKILLed at the end, so the lock is released as by a crash."""
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLDER, str(folder)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield holder
    finally:
        holder.send_signal(signal.SIGKILL)
        holder.wait(timeout=30)


def test_a_run_folder_is_locked_for_the_life_of_its_run(tmp_path, capsys):
    """Issue 30, point 5: a second run (new or `--resume`) on a folder that a live run holds is
    refused in one line naming the holder, before it writes anything; once the holder is gone,
    even by SIGKILL, the folder is free again."""
    folder = tmp_path / "run"
    argv = ["train", "--train", DATA, "--output", str(folder), "--config", "tiny"]
    with run_lock_held(folder) as holder:
        assert main([*argv, "--steps", "1"]) == 1
        err = capsys.readouterr().err.strip()
        assert f"{folder} is used by another training run (process {holder.pid} on" in err, err
        assert len(err.splitlines()) == 1
        assert sorted(p.name for p in folder.iterdir()) == [".run.lock"]  # nothing written
    assert main([*argv, "--steps", "1", "--batch-size", "2"]) == 0
    assert (folder / "lm_weights.hdf5").is_file()


def _short_run(folder, data, *flags):
    argv = ["train", "--train", str(data), "--output", str(folder), "--config", "tiny"]
    return main([*argv, "--batch-size", "2", "--steps", "2", "--checkpoint-every", "1", *flags])


def test_resume_refuses_a_changed_text_or_vocabulary(tmp_path, capsys):
    """Issue 30, point 6: `--resume` accepted changed training text and a vocab.txt with two
    lines swapped without a word. The run records each file's path, size and sha256 and the
    vocabulary's sha256: a changed text is refused (or, with `--override`, recorded and the data
    restarts); a changed vocabulary is refused always."""
    data = tmp_path / "text.txt"
    shutil.copy(DATA, data)
    folder = tmp_path / "run"
    assert _short_run(folder, data) == 0
    capsys.readouterr()
    data.write_text(data.read_text()[:-40], encoding="utf-8")
    resume = ["train", "--output", str(folder), "--steps", "3", "--resume"]
    assert main(resume) == 2
    err = capsys.readouterr().err.strip()
    assert f"--train changed since the run started: {data} changed (size" in err, err
    assert "pass --override" in err and len(err.splitlines()) == 1
    assert main([*resume, "--override"]) == 0
    saved = json.loads((folder / "training_config.json").read_text())
    assert saved["data_start_step"] == 2 and "train_text" in saved["overrides"][-1]
    assert saved["train_fingerprint"][0]["size"] == data.stat().st_size
    capsys.readouterr()
    vocab = folder / "vocab.txt"
    lines = vocab.read_text().splitlines()
    lines[3], lines[4] = lines[4], lines[3]
    vocab.write_text("\n".join(lines) + "\n")
    assert main(["train", "--output", str(folder), "--steps", "4", "--resume", "--override"]) == 2
    err = capsys.readouterr().err.strip()
    assert "vocab.txt changed since the run started" in err and "put it back" in err, err


def test_the_shuffle_is_saved_with_the_run_and_kept_on_resume(tmp_path, capsys):
    """A new run records its shuffle (0: the whole text); a resumed run keeps it, refuses
    another without `--override`, and with it restarts the data at the resumed step. A folder
    from before the setting resumes with the 10,000-line buffer it trained with."""
    data = tmp_path / "text.txt"
    shutil.copy(DATA, data)
    folder = tmp_path / "run"
    assert _short_run(folder, data) == 0
    config = folder / "training_config.json"
    assert json.loads(config.read_text())["shuffle_buffer"] == 0
    resume = ["train", "--output", str(folder), "--resume"]
    capsys.readouterr()
    assert main([*resume, "--steps", "3", "--shuffle-buffer", "50"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--shuffle-buffer 50 (saved: 0)" in err and "pass --override" in err, err
    assert main([*resume, "--steps", "3", "--shuffle-buffer", "50", "--override"]) == 0
    saved = json.loads(config.read_text())
    assert saved["shuffle_buffer"] == 50 and saved["data_start_step"] == 2
    del saved["shuffle_buffer"], saved["version"]  # as a folder of 0.3 (no version) was
    config.write_text(json.dumps(saved))
    capsys.readouterr()
    assert main([*resume, "--steps", "4", "--shuffle-buffer", "50"]) == 2
    assert "--shuffle-buffer 50 (saved: 10000)" in capsys.readouterr().err
    assert main(["train", "--output", str(folder), "--resume", "--steps", "4"]) == 0


def test_resume_from_another_working_directory(tmp_path, monkeypatch, capsys):
    """Issue 30, point 6: a run started with a relative `--train` resumes from any folder (the
    recorded absolute paths are used)."""
    (tmp_path / "corpus").mkdir()
    shutil.copy(DATA, tmp_path / "corpus" / "text.txt")
    monkeypatch.chdir(tmp_path / "corpus")
    assert _short_run(tmp_path / "run", "text.txt") == 0
    monkeypatch.chdir(tmp_path)
    assert main(["train", "--output", "run", "--steps", "3", "--resume"]) == 0
    assert "trained 3 steps" in capsys.readouterr().out


def test_a_bad_saved_configuration_names_the_file_and_the_run(tmp_path, capsys):
    """Issue 30, point 12: a bad value in training_config.json's `config` named only the key
    ("`batch_size` must be ..."); now the file and the saved run are named, for every command
    that reads the run (here `snapshot`; `train --resume` reads it the same way)."""
    from elmo_keras.text.vocabulary import Vocabulary
    from elmo_keras.training.configs import TrainingConfig
    from elmo_keras.training.run.run_record import CONFIG_FILE, RunRecord

    config = TrainingConfig.parse("tiny")
    record = RunRecord(config=config, seed=0, tokenization_mode="whitespace", train=DATA)
    record.write(tmp_path / "run", Vocabulary(["<S>", "</S>", "<UNK>", "the"]))
    saved = json.loads((tmp_path / "run" / CONFIG_FILE).read_text())
    saved["config"]["batch_size"] = -1
    (tmp_path / "run" / CONFIG_FILE).write_text(json.dumps(saved))
    assert main(["snapshot", "--run", str(tmp_path / "run"), "--output", str(tmp_path / "m")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(
        f"{tmp_path / 'run' / 'training_config.json'} (the saved run's settings), key 'config': "
        "`batch_size` must be an integer in [1, 65536]. Received: batch_size=-1; restore the "
        "file from a copy, or start a new run in another folder"
    ), err
    assert len(err.splitlines()) == 1 and not (tmp_path / "m").exists()


# A real `elmo-keras train` whose planning step (the checks of the folder) is observable: it
# writes `planned-NAME` once planned, then waits for `WAIT` (a file to appear, or a process to
# end) before it goes on. Bounded: it gives up waiting after 120 s.
_TRAIN_CHILD = """
import os, pathlib, sys, time
from elmo_keras.cli import main
from elmo_keras.training.run import run_plan

name, wait = sys.argv[1], sys.argv[2]
planned = run_plan.plan_run

def plan_then_wait(run):
    plan = planned(run)
    pathlib.Path(run.output_dir).parent.joinpath("planned-" + name).touch()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if wait.isdigit():
            try:
                os.kill(int(wait), 0)
            except ProcessLookupError:
                break
        elif os.path.exists(wait):
            break
        time.sleep(0.05)
    return plan

run_plan.plan_run = plan_then_wait
sys.exit(main(sys.argv[3:]))
"""


def _wait_for(condition, seconds=120):
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_two_runs_started_together_on_one_folder_never_both_succeed(tmp_path):
    """Issue 39, point 2: the "folder already holds a model" check ran before the run's lock
    was taken: a second `train` on one `--output`, started while the first was still running,
    passed the check, took the lock once the first had ended, and replaced its model (both
    exited 0). The lock is now taken before anything is checked: the second run ends at once
    with one line, exit 1, and the first's files stay as it wrote them. Real processes; here the
    second run also waits (after its checks) for the first to end, the old race's worst case."""
    folder = tmp_path / "run"
    argv = ["train", "--train", DATA, "--output", str(folder), "--config", "tiny"]
    argv += ["--steps", "1", "--batch-size", "2"]
    go = tmp_path / "go"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    child = [sys.executable, "-c", _TRAIN_CHILD]
    first = subprocess.Popen([*child, "first", str(go), *argv], cwd=ROOT, env=env, text=True)
    second = None
    try:
        _wait_for(lambda: (tmp_path / "planned-first").exists())
        second = subprocess.Popen(
            [*child, "second", str(first.pid), *argv],
            cwd=ROOT,
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        _wait_for(lambda: second.poll() is not None or (tmp_path / "planned-second").exists())
        go.touch()
        assert first.wait(timeout=120) == 0
        written = {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()}
        err = second.communicate(timeout=120)[1].strip()
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.kill()
                process.wait(timeout=30)
    assert second.returncode == 1, err
    assert f"{folder} is used by another training run (process {first.pid} on" in err, err
    assert len(err.splitlines()) == 1
    assert not (tmp_path / "planned-second").exists()  # refused before its checks
    assert {p.name: p.read_bytes() for p in folder.iterdir() if p.is_file()} == written
    assert {"lm_weights.hdf5", "softmax.hdf5", "options.json"} <= written.keys()


def test_the_chief_is_known_before_the_strategy_exists(monkeypatch):
    """The run folder's lock is taken before the trainer (and its strategy) exist: only the
    process `TF_CONFIG` makes the chief takes it, as `distribute.is_chief` decides later."""
    from elmo_keras.training.common.distribute import chief_by_environment

    cluster = {"worker": ["a:1", "b:2"]}
    for config, strategy, chief in [
        ({"cluster": cluster, "task": {"type": "worker", "index": 0}}, "auto", True),
        ({"cluster": cluster, "task": {"type": "worker", "index": 1}}, "multi-worker", False),
        ({"cluster": {**cluster, "chief": ["c:3"]}, "task": {"type": "worker"}}, "auto", False),
        ({"cluster": {**cluster, "chief": ["c:3"]}, "task": {"type": "chief"}}, "auto", True),
        ({"cluster": cluster, "task": {"type": "worker", "index": 1}}, "default", True),
        ([], "auto", True),  # not a JSON object: the strategy reports it
    ]:
        monkeypatch.setenv("TF_CONFIG", json.dumps(config))
        assert chief_by_environment(strategy) is chief, (config, strategy)
