"""JAX's persistent compilation cache (`elmo_keras.compilation_cache`): where it goes, the
opt-out, a folder the user chose, and `BiLMEmbedder` on JAX turning it on.

tests/conftest.py turns it off for the suite (`ELMO_KERAS_JAX_CACHE=off`); each test here sets
the variables it needs and puts JAX's setting back afterwards.
"""

import os
import stat

import keras
import pytest

from elmo_keras import compilation_cache

jax = pytest.importorskip("jax")


@pytest.fixture
def jax_setting():
    """Restores JAX's `jax_compilation_cache_dir` after the test."""
    before = jax.config.jax_compilation_cache_dir
    seconds = jax.config.jax_persistent_cache_min_compile_time_secs
    jax.config.update("jax_compilation_cache_dir", None)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)  # JAX's default
    yield
    jax.config.update("jax_compilation_cache_dir", before)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", seconds)


def test_the_folder_follows_the_cache_variable_and_its_own(monkeypatch, tmp_path):
    monkeypatch.setenv("ELMO_KERAS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ELMO_KERAS_JAX_CACHE")
    assert compilation_cache.cache_dir() == tmp_path / "cache" / "jax-compilation"
    monkeypatch.setenv("ELMO_KERAS_JAX_CACHE", str(tmp_path / "mine"))
    assert compilation_cache.cache_dir() == tmp_path / "mine"
    for off in ("off", "0", "False", " none "):
        monkeypatch.setenv("ELMO_KERAS_JAX_CACHE", off)
        assert compilation_cache.cache_dir() is None


def test_enable_points_jax_at_a_private_folder(monkeypatch, tmp_path, jax_setting):
    monkeypatch.setenv("ELMO_KERAS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ELMO_KERAS_JAX_CACHE")
    folder = tmp_path / "cache" / "jax-compilation"
    assert compilation_cache.enable() == folder
    assert jax.config.jax_compilation_cache_dir == str(folder)
    assert stat.S_IMODE(os.stat(folder).st_mode) == 0o700
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 0.0  # small programs too


def test_a_minimum_compile_time_the_user_set_is_kept(monkeypatch, tmp_path, jax_setting):
    monkeypatch.setenv("ELMO_KERAS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ELMO_KERAS_JAX_CACHE")
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 5.0)
    compilation_cache.enable()
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 5.0


def test_off_leaves_jax_without_a_persistent_cache(monkeypatch, tmp_path, jax_setting):
    monkeypatch.setenv("ELMO_KERAS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ELMO_KERAS_JAX_CACHE", "off")
    assert compilation_cache.enable() is None
    assert jax.config.jax_compilation_cache_dir is None
    assert jax.config.jax_persistent_cache_min_compile_time_secs == 1.0
    assert not (tmp_path / "cache").exists()


def test_a_folder_the_user_gave_jax_is_kept(monkeypatch, tmp_path, jax_setting):
    monkeypatch.setenv("ELMO_KERAS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ELMO_KERAS_JAX_CACHE")
    jax.config.update("jax_compilation_cache_dir", str(tmp_path / "theirs"))
    assert compilation_cache.enable() == tmp_path / "theirs"
    assert jax.config.jax_compilation_cache_dir == str(tmp_path / "theirs")


def test_a_planted_link_is_refused_and_jax_compiles_in_memory(monkeypatch, tmp_path, jax_setting):
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "cache").mkdir()
    (tmp_path / "cache" / "jax-compilation").symlink_to(tmp_path / "elsewhere")
    monkeypatch.setenv("ELMO_KERAS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ELMO_KERAS_JAX_CACHE")
    assert compilation_cache.enable() is None
    assert jax.config.jax_compilation_cache_dir is None


@pytest.mark.skipif(keras.config.backend() != "jax", reason="BiLMEmbedder compiles on JAX only")
def test_the_jax_embedder_turns_it_on(monkeypatch, tmp_path, jax_setting):
    from elmo_keras.models import BiLM, BiLMEmbedder

    monkeypatch.setenv("ELMO_KERAS_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv("ELMO_KERAS_JAX_CACHE")
    bilm = BiLM(lstm_units=8, projection_dim=4, filters=[(1, 4)], n_highway=1)
    embedder = BiLMEmbedder(bilm)
    assert embedder.compilation_cache == tmp_path / "cache" / "jax-compilation"
    assert jax.config.jax_compilation_cache_dir == str(embedder.compilation_cache)
    monkeypatch.setenv("ELMO_KERAS_JAX_CACHE", "off")
    jax.config.update("jax_compilation_cache_dir", None)
    assert BiLMEmbedder(bilm).compilation_cache is None
