"""The corpus tests build no Keras model, so they skip the session clearing that
tests/conftest.py does after every test (it imports Keras and costs about 0.6 s a test)."""

import pytest


@pytest.fixture(autouse=True)
def _clear_keras_session():
    yield
