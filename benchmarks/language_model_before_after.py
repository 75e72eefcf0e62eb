#!/usr/bin/env python
"""The training loss of the current `LanguageModel` against another revision's, same inputs.

Loads `elmo_keras/models/language_model.py` as it was at `--base` (the TensorFlow-only model
before issue 28) beside the current one, gives both the same biLM, softmax, windows (the
bilm-tf fixture corpus, tiny configuration) and sampled-softmax candidates, and prints the
largest relative difference of the summed forward and backward losses and the largest absolute
difference of their gradients, over `--windows` windows, sampled and full softmax. TensorFlow
backend (the old model is TensorFlow code).

    python benchmarks/language_model_before_after.py --base 65e702a
"""

import argparse
import subprocess
import types

import common

ROOT = common.REPO


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", required=True, help="the revision to compare with")
    parser.add_argument("--windows", type=int, default=5)
    args = parser.parse_args()

    import numpy as np
    import tensorflow as tf

    from elmo_keras.text.vocabulary import Vocabulary
    from elmo_keras.training.common.model_setup import make_language_model
    from elmo_keras.training.configs import get_config
    from elmo_keras.training.feed.data import SentenceStream
    from elmo_keras.training.feed.windows import WindowPacker

    path = f"{args.base}:elmo_keras/models/language_model.py"
    source = subprocess.check_output(["git", "show", path], cwd=ROOT, text=True)
    source = source.replace('@keras.saving.register_keras_serializable(package="elmo_keras")\n', "")
    old = types.ModuleType("old_language_model")
    exec(compile(source, path, "exec"), old.__dict__)  # noqa: S102 - our own code, at `--base`

    corpus = ROOT / "tests" / "fixtures" / "bilm_tf" / "train"
    vocabulary = Vocabulary.load(corpus / "vocab.txt")
    config = get_config("tiny")
    config.update(batch_size=4, unroll_steps=5, n_negative_samples_batch=16, dropout=0.0)
    config["lstm"].update(dim=16, projection_dim=8)
    new = make_language_model(config, len(vocabulary), seed=0)
    before = old.LanguageModel(new.bilm, len(vocabulary), 16)
    before.build()
    before.softmax_kernel.assign(new.softmax_kernel)
    before.softmax_bias.assign(new.softmax_bias)
    packer = WindowPacker(
        SentenceStream(str(corpus / "data.txt"), shuffle=False), vocabulary, 4, 5, 50
    )
    loss_diff = grad_diff = 0.0
    for step, batch in zip(range(args.windows), packer, strict=False):
        for sampled in (True, False):
            candidates = new.sample_candidates(0, step) if sampled else None
            results = []
            for model, given in (
                (new, candidates),
                (before, None if candidates is None else tf.constant(candidates, tf.int64)),
            ):
                variables = new.bilm.trainable_variables + [
                    model.softmax_kernel,
                    model.softmax_bias,
                ]
                with tf.GradientTape() as tape:
                    out = model.window_nll(batch, candidates=given)
                    loss = out["forward_nll"] + out["backward_nll"]
                grads = [tf.convert_to_tensor(g).numpy() for g in tape.gradient(loss, variables)]
                results.append((float(out["forward_nll"]), float(out["backward_nll"]), grads))
            (f1, b1, g1), (f2, b2, g2) = results
            loss_diff = max(loss_diff, abs(f1 - f2) / abs(f2), abs(b1 - b2) / abs(b2))
            grad_diff = max(
                grad_diff, *(float(np.max(np.abs(a - b))) for a, b in zip(g1, g2, strict=True))
            )
    print(
        f"{args.windows} windows x (sampled, full softmax) against {args.base}: largest relative "
        f"loss difference {loss_diff:.2e}, largest gradient difference {grad_diff:.2e}"
    )


if __name__ == "__main__":
    main()
