"""The JAX side of the cross-backend tests, run in a fresh process where TensorFlow cannot load.

    python -m tests.jax_child WORKDIR

Before anything else it makes `import tensorflow` fail (a `sys.meta_path` finder) and sets
`KERAS_BACKEND=jax`. Then, reading and writing only files under WORKDIR:
1. the packaged `tiny` biLM by `BiLM.from_preset`, the AllenNLP fixture by `BiLM.from_bilm_tf`,
   and `BiLMEmbedder.embed` / `embed_text` of `sentences.json` with the fixture; the README's
   first example (`ElmoPreprocessor` then `ElmoEmbedding`, packaged `mini_en`) and the
   preprocessor on padded tokens (-> `embed_jax.npz`, the compiled shapes in `report.json`);
2. each `tf_*.keras` that the TensorFlow side saved, loaded here and called on `inputs.npz`
   with its state carried in (-> `outputs_jax.npz`);
3. a biLM built here from `jax_config.json` with seeded weights, saved as `jax_made.keras`
   with its outputs (-> `jax_made.npz`), for the TensorFlow side to load.
`report.json` also records whether TensorFlow was ever imported.
"""

import importlib.abc
import json
import os
import pathlib
import sys


class _NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow" or name.startswith("tensorflow."):
            raise ModuleNotFoundError(f"TensorFlow is blocked in this process ({name})")
        return None


def main(workdir):
    sys.meta_path.insert(0, _NoTensorFlow())
    os.environ["KERAS_BACKEND"] = "jax"
    import keras
    import numpy as np

    from elmo_keras.models import BiLM, BiLMEmbedder

    workdir = pathlib.Path(workdir)
    fixture = pathlib.Path(__file__).parent / "fixtures" / "allennlp"
    assert BiLM.from_preset("tiny").projection_dim == 16
    bilm = BiLM.from_bilm_tf(fixture / "options.json", fixture / "lm_weights.hdf5")
    sentences = json.loads((workdir / "sentences.json").read_text())
    embedder = BiLMEmbedder(bilm, batch_size=4)
    vectors = embedder.embed(sentences)
    _, from_text = embedder.embed_text(["The bank, by the river, closed."])
    # The README's first example: strings -> ids without TensorFlow, then the packaged biLM.
    from elmo_keras.models import ElmoEmbedding, ElmoPreprocessor

    preprocessor = ElmoPreprocessor.from_preset("mini_en")
    front_door = ElmoEmbedding.from_preset("mini_en", dropout=0.0)(
        preprocessor(["The bank raised its rates.", "We sat on the river bank."])
    )
    tokens = ElmoPreprocessor(input_type="tokens")(np.array([["The", "bank"], ["Hi", ""]]))
    np.savez(
        workdir / "embed_jax.npz",
        *vectors,
        text=from_text[0],
        front_door=np.asarray(front_door),
        token_ids=np.asarray(tokens),
    )

    inputs = dict(np.load(workdir / "inputs.npz"))
    outputs = {}
    for path in sorted(workdir.glob("tf_*.keras")):
        model = keras.saving.load_model(path)
        out = model({"char_ids": inputs["char_ids"], **_state(inputs, path.stem)})
        outputs[f"{path.stem}/activations"] = np.asarray(out["activations"])
        outputs[f"{path.stem}/state_h"] = np.asarray(out["state_h"])
        outputs[f"{path.stem}/state_c"] = np.asarray(out["state_c"])
    np.savez(workdir / "outputs_jax.npz", **outputs)

    config = json.loads((workdir / "jax_config.json").read_text())
    made = BiLM(**config)
    made.build()
    rng = np.random.default_rng(11)
    for variable in made.weights:
        variable.assign(rng.normal(0, 0.5, variable.shape).astype("float32"))
    made.save(workdir / "jax_made.keras")
    out = made({"char_ids": inputs["char_ids"]})
    np.savez(workdir / "jax_made.npz", activations=np.asarray(out["activations"]))
    report = {
        "tensorflow_imported": "tensorflow" in sys.modules,
        "backend": keras.config.backend(),
        "compiled_shapes": sorted(embedder.compiled_shapes),
    }
    (workdir / "report.json").write_text(json.dumps(report))


def _state(inputs, name):
    keys = (f"{name}/state_h", f"{name}/state_c")
    if keys[0] not in inputs:
        return {}
    return {"state_h": inputs[keys[0]], "state_c": inputs[keys[1]]}


if __name__ == "__main__":
    main(sys.argv[1])
