"""`elmo-keras train`, `evaluate` and `snapshot` end to end on bilm-tf's tiny corpus."""

import contextlib
import io
import json
import shutil

import h5py
import pytest

from elmo_keras.cli import main
from elmo_keras.training.configs import get_config


def write_config(folder):
    """A tiny training configuration in `folder` -> its path."""
    config = get_config("tiny")
    config.update(batch_size=4, unroll_steps=5, n_negative_samples_batch=16)
    config["lstm"].update(dim=16, projection_dim=8)
    path = folder / "tiny.json"
    path.write_text(json.dumps(config))
    return path


@pytest.fixture
def config_file(tmp_path):
    return write_config(tmp_path)


def _captured(argv):
    """`main(argv)` -> `(exit code, stdout, stderr)`, for a fixture wider than `capsys`."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def trained_run(bilm_tf_fixture, tmp_path_factory):
    """One run the tests below share: `train` 3 steps (with `--valid`) into a folder whose
    parents are missing, the weights of step 3 kept aside, a second `train` into the same
    folder without `--resume`, then `train --resume` to 5 steps. Each command's exit code and
    output are kept for the test that checks them; the folder holds ckpt-3 and ckpt-5."""
    tmp = tmp_path_factory.mktemp("trained_run")
    data = str(bilm_tf_fixture / "train" / "data.txt")
    out = tmp / "runs" / "first" / "run"  # missing folders are made (every command's rule)
    argv = ["train", "--train", data, "--valid", data, "--config", str(write_config(tmp))]
    argv += ["--output", str(out), "--steps", "3", "--strategy", "default"]
    run = {"data": data, "out": out, "tmp": tmp, "first": _captured(argv)}
    run["first_files"] = sorted(p.name for p in out.iterdir()) if out.is_dir() else []
    if out.is_dir():
        shutil.copy(out / "lm_weights.hdf5", tmp / "step3.hdf5")
    run["again"] = _captured(argv[:-4] + ["--steps", "5"])
    run["resumed"] = _captured(["train", "--output", str(out), "--steps", "5", "--resume"])
    return run


def test_train_writes_the_run_folder(trained_run):
    code, printed, err = trained_run["first"]
    assert code == 0, err
    assert "trained 3 steps" in printed and "valid perplexity: forward" in printed
    for name in (
        "options.json",
        "lm_weights.hdf5",
        "vocab.txt",
        "softmax.hdf5",
        "training_config.json",
    ):
        assert name in trained_run["first_files"], name
    out = trained_run["out"]
    assert json.loads((out / "options.json").read_text())["char_cnn"]["n_characters"] == 262
    with h5py.File(out / "lm_weights.hdf5") as handle:
        assert "CNN_proj/W_proj" in handle
    # The vocabulary was built from the data: specials first, then by frequency.
    assert (out / "vocab.txt").read_text().split("\n")[:4] == ["<S>", "</S>", "<UNK>", "of"]


def test_a_second_train_into_the_folder_must_resume(trained_run):
    code, _, err = trained_run["again"]
    assert code == 2 and "already holds checkpoints: pass --resume" in err
    code, printed, err = trained_run["resumed"]
    assert code == 0, err
    assert "trained 5 steps" in printed


def test_evaluate_reports_the_perplexities(trained_run, capsys):
    out, data = trained_run["out"], trained_run["data"]
    assert main(["evaluate", "--model", str(out), "--data", data]) == 0
    printed = capsys.readouterr().out
    for line in ("forward perplexity:", "backward perplexity:", "average perplexity:"):
        assert line in printed
    # On its own vocabulary as the basis: the same perplexity, and the basis reported.
    vocab = str(out / "vocab.txt")
    assert main(["evaluate", "--model", str(out), "--data", data, "--basis-vocab", vocab]) == 0
    on_basis = capsys.readouterr().out
    assert on_basis.startswith("basis: ") and "% of the targets" in on_basis
    average = [line for line in printed.splitlines() if line.startswith("average")]
    assert average == [line for line in on_basis.splitlines() if line.startswith("average")]
    assert main(["evaluate", "--model", str(out), "--data", data, "--basis-vocab", "nope"]) == 2
    assert "--basis-vocab: file not found: nope" in capsys.readouterr().err


def test_snapshot_writes_any_kept_checkpoint(trained_run, tmp_path, capsys):
    """`snapshot`: any kept checkpoint, written as training writes its end, into a folder
    whose parents are made."""
    out = trained_run["out"]
    snap3 = tmp_path / "snapshots" / "snap3"
    assert (
        main(["snapshot", "--run", str(out), "--checkpoint", "ckpt-3", "--output", str(snap3)]) == 0
    )
    assert "ckpt-3" in capsys.readouterr().out
    step3 = trained_run["tmp"] / "step3.hdf5"
    assert hdf5_bytes(snap3 / "lm_weights.hdf5") == hdf5_bytes(step3)
    assert main(["snapshot", "--run", str(out), "--output", str(tmp_path / "snap5")]) == 0
    assert hdf5_bytes(tmp_path / "snap5" / "lm_weights.hdf5") == hdf5_bytes(out / "lm_weights.hdf5")
    assert (tmp_path / "snap5" / "vocab.txt").read_text() == (out / "vocab.txt").read_text()
    snap4 = str(tmp_path / "snap4")
    assert main(["snapshot", "--run", str(out), "--checkpoint", "ckpt-4", "--output", snap4]) == 2
    assert "kept: ckpt-3, ckpt-5" in capsys.readouterr().err
    assert main(["snapshot", "--run", str(out), "--output", str(tmp_path / "snap5")]) == 2
    assert "pass --overwrite" in capsys.readouterr().err


def hdf5_bytes(path):
    """Every dataset of an hdf5 file, as bytes (an exact comparison)."""
    out = {}
    with h5py.File(path) as handle:
        handle.visititems(
            lambda name, obj: (
                out.__setitem__(name, obj[()].tobytes()) if isinstance(obj, h5py.Dataset) else None
            )
        )
    return out


@pytest.mark.parametrize(
    "argv, message",
    [
        (["train", "--output", "x", "--steps", "1"], "--train is required"),
        (
            ["train", "--train", "a.txt", "--output", "x", "--steps", "1", "--config", "huge"],
            "--config must be one of",
        ),
        (
            ["train", "--train", "a.txt", "--output", "x", "--config", "tiny"],
            "give --steps, --epochs or --time-budget (when the run ends)",
        ),
        (["train", "--output", "/nonexistent/run", "--steps", "1", "--resume"], "no previous run"),
        (
            [
                "train",
                "--train",
                "a.txt",
                "--output",
                "x",
                "--steps",
                "1",
                "--batch-size",
                "10000000",
            ],
            "--batch-size must be an integer in [1, 65536]. Received: --batch-size=10000000",
        ),
        (["evaluate", "--model", "/nonexistent", "--data", "a.txt"], "folder not found"),
        (["evaluate", "--model", "/", "--data", "/dev/null"], "/dev/null is not a regular file"),
        (["snapshot", "--run", "/nonexistent", "--output", "x"], "not a training run"),
    ],
)
def test_errors_are_one_line(argv, message, capsys):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_flags_come_from_the_settings_list():
    """Every setting with a flag is on the command line, with its help; the parsed flags make
    the `TrainingRun` the same values make in Python (steps and epochs together: the first
    reached ends the run)."""
    import argparse

    from elmo_keras.cli.train import _training_run, add_parser
    from elmo_keras.training.run.training_run import SETTINGS, TrainingRun

    parser = add_parser(argparse.ArgumentParser().add_subparsers())
    helps = {a.option_strings[0]: a.help for a in parser._actions if a.option_strings}
    for setting in SETTINGS:
        if setting.flag is not None:
            assert helps[setting.flag].startswith(setting.help)
    assert helps["--checkpoint-every"].endswith("(default: 1000)")
    assert helps["--seed"].endswith("(default: the saved run's with --resume; a new run's: 0)")
    argv = "--train a.txt --output run --steps 3 --epochs 2 --no-carry-state --xla --tf32"
    args = parser.parse_args([*argv.split(), "--batch-size", "8", "--time-budget", "60"])
    expected = TrainingRun(
        "a.txt",
        "run",
        steps=3,
        epochs=2,
        carry_state=False,
        jit_compile=True,
        tf32=True,
        batch_size=8,
        time_budget_s=60.0,
    )
    assert _training_run(args) == expected


@pytest.fixture
def run_folder(tmp_path, allennlp_fixture):
    """A folder shaped like an `elmo-keras train` output (its biLM is AllenNLP's test model)."""
    folder = tmp_path / "source"
    folder.mkdir()
    for name in ("options.json", "lm_weights.hdf5"):
        shutil.copy(allennlp_fixture / name, folder / name)
    (folder / "vocab.txt").write_text("<S>\n</S>\n<UNK>\nthe\n")
    (folder / "softmax.hdf5").write_bytes(b"not read before the checks")
    return folder


@pytest.mark.parametrize(
    "flags, messages",
    [
        (
            ["--init-from", "{run}", "--config", "tiny"],
            [
                "--init-from: the architecture is the source's (",
                "leave --config out or give one with that architecture: --config lstm_units=32 "
                "(source: 64), char_embedding_dim=8 (source: 4), filters=",
            ],
        ),
        (
            ["--init-from", "{run}", "--vocab", "{run}/vocab.txt", "--min-count", "2"],
            [
                "--init-from: the run folder's vocabulary and softmax come along",
                "(pass --new-vocab to build a new vocabulary and softmax): --vocab "
                "'{run}/vocab.txt'; "
                "--min-count 2",
            ],
        ),
        (["--init-options", "o.json"], ["--init-options and --init-weights go together"]),
        (
            ["--init-from", "tiny", "--init-options", "o", "--init-weights", "w"],
            ["give --init-from or --init-options/--init-weights, not both"],
        ),
        (
            ["--init-from", "nowhere"],
            ["--init-from must be a run folder or a preset (small, medium"],
        ),
        (
            ["--init-from", "{efml}"],
            ["{efml} is an ELMoForManyLangs model; training from it is not supported"],
        ),
        (
            ["--init-from", "efml_chinese"],
            ["efml_chinese is an ELMoForManyLangs model; training from it is not supported"],
        ),
        (
            ["--init-from", "{converted}"],
            ["{converted} is an ELMoForManyLangs model; training from it is not supported"],
        ),
        (["--freeze-bilm-steps", "3"], ["--freeze-bilm-steps needs --init-from"]),
        (["--new-vocab"], ["--new-vocab needs --init-from"]),
        (["--override"], ["--override applies to --resume"]),
    ],
)
def test_init_from_conflicts_are_one_line_naming_the_flags(
    flags, messages, run_folder, bilm_tf_fixture, tmp_path, capsys
):
    data = str(bilm_tf_fixture / "train" / "data.txt")
    efml = str(bilm_tf_fixture.parent / "efml" / "cnn_elmo_words")
    places = {"{run}": str(run_folder), "{efml}": efml, "{converted}": str(tmp_path / "conv")}
    if "{converted}" in flags:  # the EFML model as `save_to_preset` converts it
        from elmo_keras.models import BiLM

        BiLM.from_preset(efml).save_to_preset(places["{converted}"])
    for key, value in places.items():
        flags = [flag.replace(key, value) for flag in flags]
        messages = [message.replace(key, value) for message in messages]
    argv = ["train", "--train", data, "--output", str(tmp_path / "run"), "--steps", "1", *flags]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1, err
    for message in messages:
        assert message in err, err
    assert not (tmp_path / "run").exists()  # refused before anything was written


def test_init_from_a_preset_through_the_loopback_mirror(
    bilm_tf_fixture, monkeypatch, tmp_path, capsys
):
    """`--init-from small` downloads the published files (here the fixture under the published
    names, served on 127.0.0.1) and trains a new softmax over the new text's vocabulary."""
    import hashlib

    from tests.file_io.test_download import FIXTURES, FileServer, serve_presets

    server = serve_presets(FileServer(), monkeypatch, tmp_path)
    try:
        data = str(bilm_tf_fixture / "train" / "data.txt")
        out = tmp_path / "run"
        argv = ["train", "--train", data, "--init-from", "small", "--output", str(out)]
        argv += ["--steps", "2", "--batch-size", "4", "--n-negative-samples", "16"]
        assert main(argv + ["--strategy", "default", "--freeze-bilm-steps", "1"]) == 0
    finally:
        server.stop()
    printed = capsys.readouterr().out
    assert "trained 2 steps" in printed
    assert "started from the preset 'small' (biLM, new softmax)" in printed
    weights = "/elmo/2x1024_128_2048cnn_1xhighway/elmo_2x1024_128_2048cnn_1xhighway_weights.hdf5"
    assert [entry["status"] for entry in server.requests(weights)] == [200]
    saved = json.loads((out / "training_config.json").read_text())
    expected = hashlib.sha256((FIXTURES / "lm_weights.hdf5").read_bytes()).hexdigest()
    assert saved["init_from"]["kind"] == "preset" and saved["init_from"]["source"] == "small"
    assert saved["init_from"]["weights_sha256"] == expected
    assert saved["freeze_bilm_steps"] == 1
    assert json.loads((out / "options.json").read_text())["lstm"]["dim"] == 64


def test_resume_picks_the_trainer_that_wrote_the_checkpoints(tmp_path, capsys):
    """`--resume` with `--backend` left at `keras` takes the run's own trainer (a JAX run writes
    `ckpt-N.npz`, a TensorFlow run `ckpt-N.index`); another trainer named explicitly is one line
    naming both, before anything is restored."""
    from elmo_keras.cli.train import resume_backend

    jax_run, tf_run, empty = tmp_path / "jax", tmp_path / "tf", tmp_path / "empty"
    for run, name in ((jax_run, "ckpt-4.npz"), (tf_run, "ckpt-4.index")):
        (run / "checkpoints").mkdir(parents=True)
        (run / "checkpoints" / name).write_bytes(b"")
    assert resume_backend("keras", jax_run) == "jax"
    assert resume_backend("keras", tf_run) == "tensorflow"
    assert resume_backend("keras", empty) == "keras"  # nothing to resume: the usual error later
    assert resume_backend("jax", jax_run) == "jax"
    argv = ["train", "--output", str(jax_run), "--resume", "--steps", "5"]
    assert main(argv + ["--backend", "tensorflow"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.endswith(
        f"--backend tensorflow: the checkpoints in {jax_run / 'checkpoints'} were written by the "
        "JAX trainer; resume with --backend jax (or leave --backend out)"
    )
    assert len(err.splitlines()) == 1


def test_a_resumed_run_keeps_its_log_every(bilm_tf_fixture, config_file, tmp_path, capsys):
    """Issue 39, point 18: `--log-every` is saved with the run; a resumed run logs as often
    (was: back to every 50 steps), and one given on resume is taken without `--override`."""
    data = str(bilm_tf_fixture / "train" / "data.txt")
    out = tmp_path / "run"
    argv = ["train", "--train", data, "--config", str(config_file), "--output", str(out)]
    assert main([*argv, "--steps", "2", "--strategy", "default", "--log-every", "1"]) == 0
    assert "step 1: loss" in capsys.readouterr().out
    assert main(["train", "--output", str(out), "--steps", "4", "--resume"]) == 0
    printed = capsys.readouterr().out
    assert "step 3: loss" in printed and "step 4: loss" in printed
    resume = ["train", "--output", str(out), "--steps", "8", "--resume", "--log-every", "3"]
    assert main(resume) == 0
    printed = capsys.readouterr().out
    assert "step 6: loss" in printed and "step 5: loss" not in printed
    assert json.loads((out / "training_config.json").read_text())["log_every"] == 3


def test_a_small_text_trains_with_the_full_softmax(bilm_tf_fixture, config_file, tmp_path, capsys):
    """Issue 39, point 18: more sampled-softmax candidates than words (80 here) is the full
    softmax, said in one line (was exit 1 naming `n_negative_samples_batch`)."""
    data = str(bilm_tf_fixture / "train" / "data.txt")
    out = tmp_path / "run"
    argv = ["train", "--train", data, "--config", str(config_file), "--output", str(out)]
    assert main([*argv, "--steps", "1", "--strategy", "default", "--n-negative-samples", "80"]) == 0
    assert "softmax: full (80 words, no more than the 80 sampled-softmax candidates asked for)" in (
        capsys.readouterr().out.splitlines()
    )
    config = json.loads((out / "training_config.json").read_text())["config"]
    assert config["n_negative_samples_batch"] == 0 and config["n_tokens_vocab"] == 80


@pytest.mark.parametrize("content", [b"", b" \n\t\r\n\xc2\xa0\n"])
def test_a_text_with_no_tokens_is_one_line_before_any_folder(content, tmp_path, capsys):
    """Issue 39, point 18: an empty text, or white space only (a no-break space too), is one
    line, exit 1, and no run folder (was a 74-line TensorFlow traceback and a half-made run)."""
    text = tmp_path / "empty.txt"
    text.write_bytes(content)
    out = tmp_path / "run"
    assert main(["train", "--train", str(text), "--output", str(out), "--steps", "1"]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (
        f"elmo-keras train: error: training text: no text in {text} (empty, or white space only)"
    )
    assert not out.exists()
