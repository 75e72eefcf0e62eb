"""One Keras backend's side of the `.keras` round trips between all three backends, run in a
fresh process.

    python -m tests.backend_child BACKEND WORKDIR

Before Keras is imported it blocks the other backends' modules (a `None` entry in
`sys.modules`: `import tensorflow` fails, `importlib.util.find_spec` reports it missing), as for
a user who installed one backend, and sets `KERAS_BACKEND`.
Then, reading and writing only files in WORKDIR:
1. each `{other}_made.keras` there (saved on another backend) is loaded and called on
   `inputs.npz` with the state carried in -> `{other}_on_{BACKEND}.npz`;
2. unless `{BACKEND}_made.keras` exists, a biLM built from `config.json` with seeded weights is
   saved as `{BACKEND}_made.keras`, with its own outputs -> `{BACKEND}_made.npz`;
3. `{BACKEND}_report.json`: the backend Keras ran on and which engines were imported.
"""

import json
import os
import pathlib
import sys

BACKENDS = ("tensorflow", "jax", "torch")
OUTPUTS = ("activations", "state_h", "state_c")


def outputs(model, inputs):
    """`model(inputs)`'s activations and final state, as NumPy arrays."""
    import keras

    got = model(inputs)
    return {key: keras.ops.convert_to_numpy(got[key]) for key in OUTPUTS}


def load_others(backend, workdir, inputs):
    """Step 1: each other backend's `{other}_made.keras` in `workdir`, loaded here and called
    -> `{other}_on_{backend}.npz`."""
    import keras
    import numpy as np

    for other in BACKENDS:
        path = workdir / f"{other}_made.keras"
        if other != backend and path.exists():
            model = keras.saving.load_model(path)
            np.savez(workdir / f"{other}_on_{backend}.npz", **outputs(model, inputs))


def save_made(backend, workdir, inputs):
    """Step 2: a seeded biLM saved on this backend, with its outputs."""
    import numpy as np

    from elmo_keras.models import BiLM

    bilm = BiLM(**json.loads((workdir / "config.json").read_text()))
    bilm.build()
    rng = np.random.default_rng(BACKENDS.index(backend))
    for variable in bilm.weights:
        variable.assign(rng.normal(0, 0.5, variable.shape).astype("float32"))
    bilm.save(workdir / f"{backend}_made.keras")
    np.savez(workdir / f"{backend}_made.npz", **outputs(bilm, inputs))


def main(backend, workdir):
    # Blocked, not just watched: where they are installed Keras 3.15 itself imports JAX (its
    # callbacks) and TensorFlow (to serialize a model), whatever the backend.
    for other in BACKENDS:
        if other != backend:
            sys.modules[other] = None
    os.environ["KERAS_BACKEND"] = backend
    import keras
    import numpy as np

    import elmo_keras  # noqa: F401  (registers the classes that the .keras files name)

    workdir = pathlib.Path(workdir)
    inputs = dict(np.load(workdir / "inputs.npz"))
    load_others(backend, workdir, inputs)
    if not (workdir / f"{backend}_made.keras").exists():
        save_made(backend, workdir, inputs)
    imported = sorted({name.partition(".")[0] for name, module in sys.modules.items() if module})
    imported = [name for name in BACKENDS if name in imported]
    report = {"backend": keras.config.backend(), "imported": imported}
    (workdir / f"{backend}_report.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
