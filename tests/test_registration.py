"""`import elmo_keras` is enough to load a `.keras` file, whatever comes first, without importing
Keras or TensorFlow itself (`elmo_keras/__init__.py`). Each case runs in a fresh process."""

import os
import pathlib
import textwrap

import pytest

from tests.fresh_interpreter import script_report

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "keras_v0_1_0"
# elmo_embedding_model: ElmoEmbedding > BiLM > CharCNN, Highway, ProjectedBiLSTM (+ its cells);
# layers_model: CharCNN, ProjectedBiLSTM and ScalarMix composed by hand.
LOAD_BOTH = textwrap.dedent(
    f"""
    import json, sys
    import numpy as np
    expected = np.load({str(FIXTURES / "expected.npz")!r})
    for name in ("elmo_embedding_model", "layers_model"):
        path = {str(FIXTURES)!r} + "/" + name + ".keras"
        model = keras.models.load_model(path, safe_mode=True)
        np.testing.assert_allclose(
            np.asarray(model(expected["char_ids"])), expected[name], rtol=0, atol=1e-6
        )
    registered = [n for n in keras.saving.get_custom_objects() if n.startswith("elmo_keras>")]
    hooks = [type(f).__name__ for f in sys.meta_path if type(f).__name__ == "_RegisterWithKeras"]
    print(json.dumps({{"registered": sorted(registered), "hooks": hooks}}))
    """
)


def _registered_in_source():
    """`elmo_keras>Name` for every class of `elmo_keras/layers` and `models` that the source
    registers with Keras."""
    package = pathlib.Path(__file__).resolve().parents[1] / "elmo_keras"
    names = set()
    for path in [*(package / "layers").glob("*.py"), *(package / "models").glob("*.py")]:
        lines = path.read_text(encoding="utf-8").splitlines()
        for i, line in enumerate(lines):
            if line.startswith("@keras.saving.register_keras_serializable"):
                following = next(x for x in lines[i + 1 :] if x.startswith("class "))
                names.add("elmo_keras>" + following.split()[1].split("(")[0].rstrip(":"))
    return names


def _report(code, tmp_path):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", KERAS_BACKEND="tensorflow")
    return script_report(code, env=env, cwd=tmp_path)


@pytest.mark.parametrize(
    "imports",
    [
        "import elmo_keras\nimport keras",  # the hook registers after Keras' import
        "import keras\nimport elmo_keras",  # registered at once
        # Keras first imported from inside `elmo_keras.layers`: the models register afterwards.
        "import elmo_keras.layers\nimport keras",
    ],
    ids=["elmo_keras_first", "keras_first", "from_inside_layers"],
)
def test_keras_file_loads_after_importing_elmo_keras(imports, tmp_path):
    report = _report(imports + "\n" + LOAD_BOTH, tmp_path)
    expected = _registered_in_source()
    assert len(expected) >= 8 and expected <= set(report["registered"]), sorted(expected)
    assert report["hooks"] == []  # the hook removed itself once done


def test_import_hook_alone_imports_neither_tensorflow_nor_keras(tmp_path):
    code = textwrap.dedent(
        """
        import json, sys
        import elmo_keras
        import elmo_keras.runtime
        heavy = sorted(m for m in sys.modules if m.split(".")[0] in ("tensorflow", "keras"))
        hooks = [type(f).__name__ for f in sys.meta_path]
        print(json.dumps({"heavy": heavy, "hooked": "_RegisterWithKeras" in hooks}))
        """
    )
    report = _report(code, tmp_path)
    assert report == {"heavy": [], "hooked": True}
