"""`TrainingConfig`: the training configuration parsed once into a typed object, which the run
plan, the trainer, the memory check and `BiLM.from_options` take; `to_options()` is bilm-tf's
options dict."""

import json

import pytest

from elmo_keras.training import configs
from elmo_keras.training.configs import CONFIGS, TrainingConfig, get_config, normalize_config


@pytest.mark.parametrize("name", list(CONFIGS))
def test_to_options_is_the_options_dict(name):
    config = TrainingConfig.parse(name)
    assert config.to_options() == get_config(name)
    # The key order of what a run saved before (a normalized dict).
    assert list(config.to_options()) == list(normalize_config(get_config(name)))
    assert TrainingConfig.parse(config) is config
    assert TrainingConfig.parse(config.to_options()) == config
    assert (config.batch_size, config.unroll_steps) == (CONFIGS[name]["batch_size"], 20)
    assert config.bilm_kwargs["lstm_units"] == CONFIGS[name]["lstm"]["dim"]


def test_a_json_file_keeps_its_other_keys(tmp_path):
    options = {**get_config("tiny"), "n_train_tokens": 768648884, "batch_size": 8}
    path = tmp_path / "options.json"
    path.write_text(json.dumps(options))
    config = TrainingConfig.parse(path)
    assert config.other == {"n_train_tokens": 768648884} and config.batch_size == 8
    assert config.to_options() == options


def test_replace_checks_the_training_keys():
    config = TrainingConfig.parse("tiny")
    assert config.replace(batch_size=8, optimizer="adam").to_options()["optimizer"] == "adam"
    with pytest.raises(ValueError, match=r"`batch_size` must be an integer in \[1, 65536\]"):
        config.replace(batch_size=0)
    with pytest.raises(ValueError, match="`optimizer` must be one of"):
        config.replace(optimizer="sgd")


def test_a_new_run_parses_its_configuration_once(tmp_path, monkeypatch):
    """Planning a new run and making its trainer (the memory check and the `BiLM` included)
    read the architecture of the configuration once (it was five times)."""
    from elmo_keras.models import bilm
    from elmo_keras.training.run.run_plan import plan_run
    from elmo_keras.training.run.training_run import TrainingRun
    from elmo_keras.training.tf.trainer import Trainer

    parsed = []
    original = configs.options_to_bilm_kwargs

    def counted(*args, **kwargs):
        parsed.append(args)
        return original(*args, **kwargs)

    monkeypatch.setattr(configs, "options_to_bilm_kwargs", counted)
    monkeypatch.setattr(bilm, "options_to_bilm_kwargs", counted)
    text = tmp_path / "text.txt"
    text.write_text("the cat sat on the mat\na dog ran\n", encoding="utf-8")
    run = TrainingRun(str(text), tmp_path / "run", config="tiny", steps=1, verbose=False)
    plan = plan_run(run)
    trainer = Trainer(plan.config, plan.vocabulary)
    assert len(parsed) == 1
    assert trainer.config == plan.config  # the same values, no second parse
    assert trainer.model.bilm.lstm_units == plan.config.bilm_kwargs["lstm_units"]
