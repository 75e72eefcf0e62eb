"""One worker of the multi-worker tests: trains under MultiWorkerMirroredStrategy (TF_CONFIG).

Usage: python multi_worker_job.py CONFIG_JSON VOCAB DATA STEPS OUT_NPZ
           [--run-dir DIR] [--signal-at K] [--resume]

`--signal-at K` sends SIGTERM to this worker after step K (the others get none); `--resume`
restores the latest checkpoint of `RUN_DIR/checkpoints` first.
"""

import argparse
import json
import os
import signal
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")


def main():
    parser = argparse.ArgumentParser()
    for name in ("config", "vocab", "data", "steps", "out"):
        parser.add_argument(name)
    parser.add_argument("--run-dir")
    parser.add_argument("--signal-at", type=int)
    parser.add_argument("--resume", action="store_true")
    args = parser.parse_args()
    import numpy as np
    import tensorflow as tf

    from elmo_keras.text.vocabulary import Vocabulary
    from elmo_keras.training.tf.trainer import Trainer

    strategy = tf.distribute.MultiWorkerMirroredStrategy()
    with open(args.config) as f:
        config = json.load(f)
    trainer = Trainer(config, Vocabulary.load(args.vocab), strategy=strategy, seed=3)
    restored = ""
    if args.resume:
        restored = trainer.restore(os.path.join(args.run_dir, "checkpoints")) or ""

    def on_step(step, metrics):
        if step == args.signal_at:
            os.kill(os.getpid(), signal.SIGTERM)

    result = trainer.fit(
        args.data,
        steps=int(args.steps),
        log_every=10**6,
        output_dir=args.run_dir,
        on_step=on_step,
        handle_signals=args.signal_at is not None,
    )
    weights = {f"w{i}": v.numpy() for i, v in enumerate(trainer.model.trainable_variables)}
    np.savez(
        args.out,
        steps=result["steps"],
        tokens=result["tokens"],
        stopped=result["stopped"],
        restored=restored,
        **weights,
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
