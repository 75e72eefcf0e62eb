"""TensorFlow's softmax update with a sampled softmax and Adagrad (issue 42, point 5): the rows
the step read, gathered from every replica and summed by id, update only those rows of the
kernel and its accumulator (`tf/gradients.py`); the dense gradient it replaced is the judge."""

import numpy as np

from elmo_keras.training.common.distribute import make_strategy
from elmo_keras.training.tf.trainer import Trainer

STEPS = 4
CLIP = 0.05  # below every step's norm: each step is clipped


def _run(config, vocabulary, train_text, sparse):
    strategy = make_strategy("mirrored")  # its own collective keys (two runs in one process)
    assert strategy.num_replicas_in_sync == 2
    trainer = Trainer(config, vocabulary, strategy=strategy, seed=3)
    assert trainer.sparse_softmax  # Adagrad + sampled softmax: the row update is the default
    trainer.sparse_softmax = sparse
    initial = trainer.model.softmax_kernel.numpy()
    logs = []
    trainer.fit(train_text, steps=STEPS, log_every=10**6, on_step=lambda _, x: logs.append(x))
    variables = [v.numpy() for v in trainer.model.variables + trainer.optimizer.variables]
    return trainer, initial, logs, variables


def test_row_update_equals_dense_update_on_two_replicas(train_text, train_vocab, tiny_config):
    tiny_config["all_clip_norm_val"] = CLIP
    _, _, dense_logs, dense_values = _run(tiny_config, train_vocab, train_text, False)
    sparse, initial, sparse_logs, sparse_values = _run(tiny_config, train_vocab, train_text, True)
    assert all(logs["grad_norm"] > CLIP for logs in dense_logs)  # clipped
    for a, b in zip(dense_logs, sparse_logs, strict=True):
        for key in ("loss", "grad_norm"):
            np.testing.assert_allclose(b[key], a[key], rtol=1e-6)
    for a, b in zip(dense_values, sparse_values, strict=True):
        np.testing.assert_allclose(b, a, rtol=0, atol=1e-6)
    # Only rows that some step read have moved, and the replicas' copies agree.
    read = _targets(sparse, train_text)
    for step in range(STEPS):
        read.update(sparse.candidates(step).tolist())
    kernel = sparse.model.softmax_kernel.value
    copies = [c.numpy() for c in sparse.strategy.experimental_local_results(kernel)]
    np.testing.assert_array_equal(copies[0], copies[1])
    changed = set(np.flatnonzero(np.any(copies[0] != initial, axis=1)).tolist())
    assert changed and changed <= read
    assert len(read) < len(train_vocab)  # some rows were left alone


def _targets(trainer, train_text):
    """Every word id the first steps' batches hold (targets of both directions)."""
    packer = trainer._packer(train_text, None, "whitespace", 0)
    ids = set()
    for _, batch in zip(range(STEPS), packer.batches(), strict=False):
        for key in ("forward_targets", "backward_targets"):
            ids.update(np.asarray(batch[key]).ravel().tolist())
    return ids
