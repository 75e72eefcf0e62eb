"""One worker of the multi-worker test: trains under MultiWorkerMirroredStrategy (TF_CONFIG).

Usage: python multi_worker_job.py CONFIG_JSON VOCAB DATA STEPS OUT_NPZ
"""

import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def main():
    config_path, vocab_path, data, steps, out = sys.argv[1:6]
    import numpy as np
    import tensorflow as tf

    from elmo_keras.text.vocabulary import Vocabulary
    from elmo_keras.training.trainer import Trainer

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with open(config_path) as f:
        config = json.load(f)
    trainer = Trainer(config, Vocabulary.load(vocab_path), strategy=strategy, seed=3)
    result = trainer.fit(data, steps=int(steps), log_every=10**6, handle_signals=False)
    weights = {f"w{i}": v.numpy() for i, v in enumerate(trainer.model.trainable_variables)}
    np.savez(out, steps=result["steps"], tokens=result["tokens"], **weights)


if __name__ == "__main__":
    main()
