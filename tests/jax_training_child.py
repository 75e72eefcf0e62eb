"""The JAX side of the training tests, run in a fresh process where TensorFlow cannot load.

    python -m tests.jax_training_child MODE WORKDIR

`import tensorflow` fails in this process (as in `tests.jax_child`) and `KERAS_BACKEND=jax`.
WORKDIR holds `job.json`; each mode writes `report.json` there (with `tensorflow_imported`, and
`cache_hits`: the programs JAX loaded from its persistent compilation cache instead of compiling):

- `compare`: a `JaxTrainer` for `job["config"]` whose weights are loaded from the files in
  `job["init_dir"]` (the TensorFlow trainer's initial weights); one step (its logs), then on to
  `job["steps"]`, then the full-softmax perplexity of `job["data"]` and the trained model
  written to `WORKDIR/model`; `BiLM.from_bilm_tf` of those files embeds `job["sentences"]`
  (-> `embed_jax.npz`).
- `parallel`: the same run on one device and on every device (`XLA_FLAGS` sets how many), for
  `job["steps"]` steps; the largest weight and state differences.
- `train`: `train(TrainingRun(**job["run"]))`, the pipeline end to end (kill and resume tests).
- `cli`: `elmo-keras` with the arguments `job["argv"]` (commands that must run without
  TensorFlow: `snapshot` of a JAX run, `demo`); its exit code, stdout and stderr.
"""

import importlib.abc
import json
import logging
import os
import pathlib
import sys


class _NoTensorFlow(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "tensorflow" or name.startswith("tensorflow."):
            raise ModuleNotFoundError(f"TensorFlow is blocked in this process ({name})")
        return None


class _CacheHits(logging.Handler):
    """The names of the programs JAX's compiler logs as persistent compilation cache hits."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.names = set()

    def emit(self, record):
        if record.msg.startswith("Persistent compilation cache hit"):
            self.names.add(record.args[0])


def _trainer(job, **kwargs):
    from elmo_keras.text.vocabulary import Vocabulary
    from elmo_keras.training.jax.jax_trainer import JaxTrainer

    vocabulary = Vocabulary.load(job["vocab"])
    return JaxTrainer(job["config"], vocabulary, seed=job["seed"], **kwargs)


def compare(job, workdir):
    import numpy as np

    from elmo_keras.models import BiLM, BiLMEmbedder
    from elmo_keras.weights import load_softmax, load_weights

    trainer = _trainer(job)
    init = pathlib.Path(job["init_dir"])
    load_weights(trainer.model.bilm, init / "lm_weights.hdf5")
    kernel, bias = load_softmax(init / "softmax.hdf5")
    trainer.model.softmax_kernel.assign(kernel)
    trainer.model.softmax_bias.assign(bias)
    first = []
    trainer.fit(job["data"], steps=1, log_every=10**6, on_step=lambda s, logs: first.append(logs))
    trainer.fit(job["data"], steps=job["steps"], log_every=10**6)
    perplexity = trainer.evaluate(job["data"], batch_size=2)
    trainer.export(workdir / "model")
    bilm = BiLM.from_bilm_tf(
        workdir / "model" / "options.json", workdir / "model" / "lm_weights.hdf5"
    )
    vectors = BiLMEmbedder(bilm, batch_size=4).embed(job["sentences"])
    np.savez(workdir / "embed_jax.npz", *vectors)
    return {
        "first_step": first[0],
        "evaluate": perplexity,
        "sparse_softmax": trainer.sparse_softmax,
        "steps": trainer.global_step,
    }


def parallel(job, workdir):
    import jax
    import numpy as np

    runs = []
    for devices in (jax.devices()[:1], jax.devices()):
        trainer = _trainer(job, devices=devices)
        trainer.fit(job["data"], steps=job["steps"], log_every=10**6)
        weights = [np.asarray(v.value) for v in trainer.model.trainable_variables]
        runs.append((weights, trainer.state_h, trainer.state_c))
    (one, h1, c1), (many, h2, c2) = runs
    return {
        "devices": len(jax.devices()),
        "weights": max(float(np.max(np.abs(a - b))) for a, b in zip(one, many, strict=True)),
        "weights_changed": max(
            float(np.max(np.abs(a - b)))
            for a, b in zip(one, [np.asarray(v) for v in _initial(job)], strict=True)
        ),
        "state_h": float(np.max(np.abs(h1 - h2))),
        "state_c": float(np.max(np.abs(c1 - c2))),
    }


def _initial(job):
    return [v.value for v in _trainer(job, devices=None).model.trainable_variables]


def train_run(job, workdir):
    from elmo_keras.training.pipeline import train
    from elmo_keras.training.run.training_run import TrainingRun

    summary = train(TrainingRun(**job["run"]))
    return {"train": summary["train"]}


def command_line(job, workdir):
    """`elmo-keras ARGV` (`job["argv"]`) as in a `[jax]` install: its exit code and output."""
    import contextlib
    import io

    from elmo_keras.cli import main as elmo_keras

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = elmo_keras(job["argv"])
    return {"code": code, "stdout": out.getvalue(), "stderr": err.getvalue()}


def main(mode, workdir):
    sys.meta_path.insert(0, _NoTensorFlow())
    os.environ["KERAS_BACKEND"] = "jax"
    workdir = pathlib.Path(workdir)
    job = json.loads((workdir / "job.json").read_text())
    hits = _CacheHits()
    compiler_log = logging.getLogger("jax._src.compiler")
    compiler_log.setLevel(logging.DEBUG)
    compiler_log.addHandler(hits)
    modes = {"compare": compare, "parallel": parallel, "train": train_run, "cli": command_line}
    report = modes[mode](job, workdir)
    report["tensorflow_imported"] = "tensorflow" in sys.modules
    report["cache_hits"] = sorted(hits.names)
    (workdir / "report.json").write_text(json.dumps(report))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
