"""Shared pieces of the training tests: a tiny configuration and the bilm-tf training corpus."""

import copy

import pytest

from elmo_keras.training.configs import get_config

TINY = get_config("tiny")
TINY.update(batch_size=4, unroll_steps=5, n_negative_samples_batch=16, dropout=0.0)
TINY["lstm"].update(dim=16, projection_dim=8)


@pytest.fixture
def tiny_config():
    return copy.deepcopy(TINY)


@pytest.fixture(scope="session")
def train_text(bilm_tf_fixture):
    return str(bilm_tf_fixture / "train" / "data.txt")


@pytest.fixture(scope="session")
def train_vocab(bilm_tf_fixture):
    from elmo_keras.text.vocabulary import Vocabulary

    return Vocabulary.load(bilm_tf_fixture / "train" / "vocab.txt")
