"""Shared test set-up: one TensorFlow import per session, fixture paths, logical CPU devices."""

import os
import pathlib
import sys

# What the PyTorch pass must run without.
BLOCKED_UNDER_TORCH = ("tensorflow", "jax")

os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
# XLA compiles one small program per weight shape and op in the JAX run (tests/layers, see the
# Makefile), and a whole training step in each JAX process the TensorFlow run starts (they inherit
# this); LLVM's optimisations were most of that time (a CharCNN build: 6.5 s -> 1.9 s of CPU;
# tests/training/test_jax_trainer.py: 138 s -> 95 s) and buy nothing on test-sized tensors.
# A user's own XLA_FLAGS win.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0")
# One OpenMP thread per test process (and the processes it starts): `make test` runs two
# processes on two cores, and PyTorch's OpenMP threads, one per core in each, spun against each
# other (the PyTorch pass: 55 s -> 18 s). TensorFlow's and XLA's own thread pools are left as
# they are (a TensorFlow share of the suite took the same time either way).
os.environ.setdefault("OMP_NUM_THREADS", "1")
# JAX's persistent compilation cache (elmo_keras.compilation_cache) stays out of the user's
# cache folder during tests; tests/test_compilation_cache.py turns it on in a temporary one.
os.environ.setdefault("ELMO_KERAS_JAX_CACHE", "off")
if os.environ["KERAS_BACKEND"] == "torch":
    # The PyTorch pass (see the Makefile) runs where TensorFlow and JAX cannot load, as for a
    # user with `pip install "elmo-keras[torch]"` alone: a `None` entry in `sys.modules` makes
    # `import tensorflow` fail and `importlib.util.find_spec` report it missing.
    for _blocked in BLOCKED_UNDER_TORCH:
        if sys.modules.get(_blocked) is not None:
            raise RuntimeError(f"{_blocked} was imported before tests/conftest.py could block it")
        sys.modules[_blocked] = None

import pytest  # noqa: E402

ROOT = pathlib.Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
SHARED = ROOT.parent / "shared"

# Logical CPU devices must be configured before TensorFlow initialises its devices: two of them
# let MirroredStrategy tests run in this same process. Ordinary tests use the first one.
N_LOGICAL_CPUS = 2


def _configure_tensorflow():
    import tensorflow as tf

    cpus = tf.config.list_physical_devices("CPU")
    try:
        tf.config.set_logical_device_configuration(
            cpus[0], [tf.config.LogicalDeviceConfiguration()] * N_LOGICAL_CPUS
        )
    except RuntimeError:
        pass  # already initialised (a test imported TensorFlow first)
    return tf


if os.environ["KERAS_BACKEND"] == "tensorflow":
    _configure_tensorflow()  # the JAX run never imports TensorFlow for itself


@pytest.fixture(scope="session")
def fixtures_dir():
    return FIXTURES


@pytest.fixture(scope="session")
def bilm_tf_fixture():
    return FIXTURES / "bilm_tf"


@pytest.fixture(scope="session")
def allennlp_fixture():
    return FIXTURES / "allennlp"


@pytest.fixture(scope="session")
def efml_fixture():
    """ELMoForManyLangs' two fixture models and its outputs (`tests/fixtures/efml/README.md`)."""
    return FIXTURES / "efml"


@pytest.fixture(scope="session")
def shared_data():
    """`../shared/data`, the large data sets; tests that need it skip where it is absent."""
    path = SHARED / "data"
    if not path.is_dir():
        pytest.skip(f"shared data folder not found at {path} (only present in the dev checkout)")
    return path


@pytest.fixture(scope="session")
def keras_bilm(allennlp_fixture):
    """The AllenNLP fixture biLM, loaded once per session."""
    from elmo_keras.models import BiLM

    return BiLM.from_bilm_tf(
        allennlp_fixture / "options.json", allennlp_fixture / "lm_weights.hdf5"
    )


@pytest.fixture(scope="session")
def onnx_model(keras_bilm, tmp_path_factory):
    """`keras_bilm` exported to ONNX (the default `token_index` form), converted once per
    session and shared by the runtime, Beam and CLI tests."""
    from elmo_keras.export import export_onnx

    path = tmp_path_factory.mktemp("onnx_model") / "allennlp.onnx"
    export_onnx(keras_bilm, path)
    return path


@pytest.fixture(scope="session")
def wheel(tmp_path_factory):
    """The elmo-keras wheel, built once per session from a copy of the sources."""
    from tests.wheel_build import build_wheel

    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(autouse=True)
def _clear_keras_session():
    import keras

    yield
    # Resets Keras' global state (layer names, the TF graph) between tests. Without
    # `free_memory=False` it also runs `gc.collect()`, 0.2-0.6 s a test with TensorFlow loaded
    # (minutes over the suite); Python's own collector still frees the cycles.
    keras.utils.clear_session(free_memory=False)


def pytest_collection_modifyitems(config, items):
    """Marks `slow` the tests `tests/slow_tests.py` lists (`make test-fast` leaves them out),
    and skips the tests marked `tensorflow_only` when Keras runs on another backend.

    `make test` runs tests/layers a second time with `KERAS_BACKEND=jax`: there the layers that
    are TensorFlow code (the LSTMs) skip with this reason, the `keras.ops` layers run.
    """
    import keras

    from tests.slow_tests import is_slow

    for item in items:
        if is_slow(item.nodeid):
            item.add_marker(pytest.mark.slow)

    backend = keras.config.backend()
    if backend == "tensorflow":
        return
    skip = pytest.mark.skip(
        reason=f"TensorFlow-only part of elmo-keras; this run has KERAS_BACKEND={backend}"
    )
    for item in items:
        if item.get_closest_marker("tensorflow_only"):
            item.add_marker(skip)
