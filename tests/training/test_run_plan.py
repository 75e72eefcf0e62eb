"""Unit tests of run planning (`run_plan.plan_run`): a new run, a run that starts from a trained
biLM, a resumed one (what it takes from the saved `RunRecord`, the differences it reports and
applies), and the refusals. In-process, with no trainer."""

import dataclasses
import re

import pytest

from elmo_keras.text.vocabulary import Vocabulary
from elmo_keras.training.configs import get_config
from elmo_keras.training.run.run_plan import plan_run, resumed_record
from elmo_keras.training.run.setting_error import SettingError, SettingsConflict
from elmo_keras.training.run.training_run import FLAGS, TrainingRun

TEXT = "the cat sat on the mat\nthe dog ran to the park\na cat and a dog\n"


@pytest.fixture
def text(tmp_path):
    path = tmp_path / "text.txt"
    path.write_text(TEXT, encoding="utf-8")
    return path


def _new(text, folder, **given):
    return plan_run(TrainingRun(str(text), folder, config="tiny", steps=3, verbose=False, **given))


def test_a_new_run_builds_its_vocabulary_and_record(text, tmp_path):
    plan = _new(text, tmp_path / "run", seed=5, batch_size=8, learning_rate=0.5)
    words = len({w for line in TEXT.split("\n") for w in line.split()})
    assert len(plan.vocabulary) == words + 3  # <S>, </S>, <UNK>
    # The flags' keys are applied to the configuration; a sampled softmax with no fewer
    # candidates (64) than words is the full one.
    expected = {**get_config("tiny"), "batch_size": 8, "learning_rate": 0.5}
    expected |= {"n_negative_samples_batch": 0, "n_tokens_vocab": words + 3}
    assert plan.config.to_options() == expected
    record = plan.record
    assert record.config is plan.config and (record.seed, record.train) == (5, str(text))
    assert (record.tokenization_mode, record.carry_state, record.shuffle_buffer) == (
        "whitespace",
        True,
        0,
    )
    assert (record.min_count, record.log_every, record.data_start_step) == (1, 50, 0)
    assert [f["path"] for f in record.train_fingerprint] == [str(text)]
    # The "None: saved" fields take the new-run defaults.
    assert (plan.run.seed, plan.run.log_every, plan.run.freeze_bilm_steps) == (5, 50, 0)
    assert (plan.source, plan.changes, plan.restore_skip) == (None, {}, ())
    assert not (tmp_path / "run").exists()  # planning writes nothing


def test_a_run_started_from_a_preset_takes_its_architecture(text, tmp_path):
    plan = plan_run(TrainingRun(str(text), tmp_path / "run", steps=3, init_from="tiny"))
    assert plan.source.kind == "preset" and plan.record.init_from["source"] == "tiny"
    assert plan.config.architecture["lstm"] == plan.source.architecture()["lstm"]
    with pytest.raises(SettingsConflict, match="the architecture is the source's"):
        plan_run(TrainingRun(str(text), tmp_path / "run", steps=3, init_from="tiny", config="cpu"))


def test_a_new_run_refuses_a_folder_in_use(text, tmp_path):
    (tmp_path / "a" / "checkpoints").mkdir(parents=True)
    (tmp_path / "a" / "checkpoints" / "ckpt-1.index").write_bytes(b"")
    with pytest.raises(SettingError, match="already holds checkpoints: pass `resume`"):
        _new(text, tmp_path / "a")
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "options.json").write_text("{}")
    with pytest.raises(SettingError, match=r"already holds a model \(options.json\)"):
        _new(text, tmp_path / "b")
    with pytest.raises(SettingError, match="`train_files` matches no file"):
        _new(tmp_path / "none*.txt", tmp_path / "c")


@pytest.fixture
def saved_run(text, tmp_path):
    """A run folder as a new run of `text` writes it (no checkpoint: planning reads none)."""
    plan = _new(text, tmp_path / "run", seed=2)
    plan.record.write(tmp_path / "run", plan.vocabulary)
    return tmp_path / "run", plan.record


def _resume(folder, **given):
    return plan_run(TrainingRun(None, folder, steps=9, resume=True, verbose=False, **given))


def test_a_resumed_run_takes_the_saved_settings(saved_run, text):
    folder, record = saved_run
    plan = _resume(folder)
    assert plan.record == record and plan.changes == {} and not plan.settings_changed
    assert (plan.run.seed, plan.run.train_files) == (2, [str(text)])  # the recorded paths
    assert plan.config == record.config and plan.restore_skip == ()


def test_a_resumed_run_refuses_differences_unless_overridden(saved_run):
    folder, record = saved_run
    given = {"seed": 3, "batch_size": 4, "optimizer": "adam"}
    with pytest.raises(SettingsConflict) as refused:
        _resume(folder, **given)
    message = refused.value.message(FLAGS)
    assert message.startswith(f"--resume: these settings differ from {folder}")
    assert (
        "--batch-size 4 (saved: 16); --optimizer 'adam' (saved: 'adagrad'); --seed 3 (saved: 2)"
        in message
    )
    plan = _resume(folder, override=True, **given)
    assert plan.changes == {"batch_size": (16, 4), "optimizer": ("adagrad", "adam"), "seed": (2, 3)}
    assert (plan.record.seed, plan.config.batch_size, plan.config.optimizer) == (3, 4, "adam")
    assert plan.restore_skip == ("state", "optimizer")
    assert record.seed == 2  # the saved record is left as it was
    plan.record_overrides(7)  # the seed changes the data: it starts again at the step
    assert plan.record.data_start_step == 7 and plan.record.overrides[-1]["step"] == 7
    assert plan.record.overrides[-1]["seed"] == {"saved": 2, "given": 3}


def test_a_resume_compares_two_records(saved_run, text):
    """`resumed_record` returns the new record and the differences; the configuration given
    as a whole is compared key by key, a flag's key under the flag's name."""
    folder, record = saved_run
    vocabulary = Vocabulary.load(folder / "vocab.txt")
    config = {**record.config.to_options(), "dropout": 0.3}
    del config["n_tokens_vocab"]
    run = TrainingRun(str(text), folder, steps=9, resume=True, config=config, learning_rate=1.0)
    new, differences = resumed_record(record, run, vocabulary)
    assert [(d.name, d.field, d.saved, d.given) for d in differences] == [
        ("config.dropout", "config", 0.1, 0.3),
        ("learning_rate", "learning_rate", 0.2, 1.0),
    ]
    assert new == dataclasses.replace(
        record, config=record.config.replace(dropout=0.3, learning_rate=1.0)
    )


def test_what_the_checkpoint_fixes_is_never_overridden(saved_run, text):
    folder, _ = saved_run
    config = get_config("tiny")
    config["lstm"]["dim"] = 64
    with pytest.raises(SettingsConflict) as refused:
        _resume(folder, config=config, min_count=2, override=True)
    message = refused.value.message(FLAGS)
    assert (
        "the checkpoint fixes those marked [fixed]; pass --override to apply the others" in message
    )
    assert re.search(r"--config lstm \{.*'dim': 64.*\} \(saved: .*\) \[fixed\]", message)
    assert "--min-count 2 (saved: 1) [fixed]" in message


def test_a_new_log_interval_is_taken_without_override(saved_run):
    folder, record = saved_run
    plan = _resume(folder, log_every=7)
    assert plan.settings_changed and plan.changes == {} and plan.record.log_every == 7


def test_a_resume_refuses_a_missing_run_or_a_changed_vocabulary(saved_run, tmp_path, text):
    with pytest.raises(SettingError, match="`resume`: no previous run in"):
        _resume(tmp_path / "nothing")
    folder, _ = saved_run
    text.write_text(TEXT + "new words here\n", encoding="utf-8")
    with pytest.raises(SettingsConflict, match="changed since the run started"):
        _resume(folder)
    (folder / "vocab.txt").write_text("<S>\n</S>\n<UNK>\nother\n", encoding="utf-8")
    with pytest.raises(SettingError, match="vocab.txt changed since the run started"):
        _resume(folder)


def test_a_resume_from_another_folder_uses_the_recorded_paths(text, tmp_path, monkeypatch):
    """A run started with a relative `train_files` resumes from another working directory: the
    recorded absolute paths are used, and they are no difference."""
    monkeypatch.chdir(tmp_path)
    plan = _new(text.name, tmp_path / "run")
    plan.record.write(tmp_path / "run", plan.vocabulary)
    (tmp_path / "elsewhere").mkdir()
    monkeypatch.chdir(tmp_path / "elsewhere")
    resumed = _resume(tmp_path / "run")
    assert resumed.changes == {} and resumed.record.train == "text.txt"
    assert resumed.run.train_files == [str(text)]
