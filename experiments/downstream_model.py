"""The task model of `downstream.py` and its training: padded batches, the BiLSTM classifier
over random / GloVe / ELMo / [GloVe ; ELMo] inputs, early stopping on validation accuracy."""

import dataclasses
import time

import numpy as np


@dataclasses.dataclass
class TrainSettings:
    """How one classifier trains: Adam 1e-3, batches of `batch_size`, at most `max_epochs`,
    stopped `patience` epochs after the best validation accuracy. `layer_norm` and
    `elmo_dropout` configure the ELMo input (`ScalarMix(do_layer_norm=...)`, then dropout)."""

    max_epochs: int = 10
    patience: int = 3
    batch_size: int = 64
    layer_norm: bool = False
    elmo_dropout: float = 0.5


class Batches:
    """Padded batches of `(word_ids, elmo_layers)`; similar lengths together, shuffled."""

    def __init__(self, indices, data, batch_size, seed, shuffle, with_elmo):
        self.indices = np.asarray(indices)
        self.ids, self.labels = data["ids"], data["labels"]
        self.flat = data["flat"] if with_elmo else None
        self.offsets = data["offsets"]
        self.batch_size, self.shuffle = batch_size, shuffle
        self.rng = np.random.default_rng(seed)
        self.batches = self._make_batches()

    def _make_batches(self):
        idx = self.indices.copy()
        if self.shuffle:
            self.rng.shuffle(idx)
        # Sort within chunks of 20 batches so batches have similar lengths.
        chunk = self.batch_size * 20
        out = []
        for c in range(0, len(idx), chunk):
            part = idx[c : c + chunk]
            part = part[np.argsort([len(self.ids[i]) for i in part], kind="stable")]
            out += [part[b : b + self.batch_size] for b in range(0, len(part), self.batch_size)]
        if self.shuffle:
            self.rng.shuffle(out)
        return out

    def __len__(self):
        return len(self.batches)

    def batch(self, k):
        batch = self.batches[k]
        width = max(len(self.ids[i]) for i in batch)
        words = np.zeros((len(batch), width), np.int32)
        layers = None
        if self.flat is not None:
            n_layers, dim = self.flat.shape[1:]
            layers = np.zeros((len(batch), n_layers, width, dim), np.float32)
        for row, i in enumerate(batch):
            n = len(self.ids[i])
            words[row, :n] = self.ids[i]
            if layers is not None:
                cached = self.flat[self.offsets[i] : self.offsets[i + 1]]
                layers[row, :, :n] = cached.transpose(1, 0, 2)
        inputs = {"word_ids": words}
        if layers is not None:
            inputs["elmo_layers"] = layers
        return inputs, self.labels[batch]

    def reshuffle(self):
        if self.shuffle:
            self.batches = self._make_batches()


def _input_vectors(variant, data, word_ids_in, mask, settings):
    """The variant's input vectors per token, and any extra model input (the ELMo layers)."""
    import keras

    from elmo_keras.layers import ScalarMix

    parts, inputs = [], {}
    if variant == "random":
        parts.append(
            keras.layers.Embedding(data["vocab_size"], 50, name="random_embedding")(word_ids_in)
        )
    if variant in ("glove", "glove+elmo"):
        glove = data["glove_matrix"]
        embedding = keras.layers.Embedding(
            data["vocab_size"],
            glove.shape[1],
            trainable=False,
            name="glove",
            embeddings_initializer=keras.initializers.Constant(glove),
        )
        parts.append(embedding(word_ids_in))
    if variant in ("elmo", "glove+elmo"):
        n_layers, dim = data["n_elmo_layers"], data["elmo_dim"]
        layers_in = keras.Input((n_layers, None, dim), name="elmo_layers")
        inputs["elmo_layers"] = layers_in
        mix = ScalarMix(n_layers=n_layers, do_layer_norm=settings.layer_norm, name="scalar_mix")
        mix.build((None, n_layers, None, dim))
        elmo = mix(layers_in, mask=mask)
        parts.append(keras.layers.Dropout(settings.elmo_dropout, name="elmo_dropout")(elmo))
    return parts, inputs


def build_classifier(variant, data, seed, settings, hidden=64, dropout=0.5):
    """The task model: inputs -> dropout -> BiLSTM(hidden) -> max-pool over time -> Dense(2)."""
    import keras

    keras.utils.set_random_seed(seed)
    word_ids_in = keras.Input((None,), dtype="int32", name="word_ids")
    mask = keras.ops.not_equal(word_ids_in, 0)
    parts, extra_inputs = _input_vectors(variant, data, word_ids_in, mask, settings)
    x = parts[0] if len(parts) == 1 else keras.layers.Concatenate()(parts)
    x = keras.layers.Dropout(0.2 if variant != "random" else dropout)(x)
    x = keras.layers.Bidirectional(keras.layers.LSTM(hidden, return_sequences=True))(x, mask=mask)
    x = keras.ops.where(mask[:, :, None], x, -1e9)  # max over real tokens only
    x = keras.ops.max(x, axis=1)
    x = keras.layers.Dropout(dropout)(x)
    outputs = keras.layers.Dense(2, name="logits")(x)
    model = keras.Model({"word_ids": word_ids_in, **extra_inputs}, outputs)
    model.compile(
        optimizer=keras.optimizers.Adam(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        metrics=["accuracy"],
    )
    return model


def _accuracy(predict, batches):
    correct = total = 0
    for k in range(len(batches)):
        x, y = batches.batch(k)
        logits = predict(x)
        correct += int(np.sum(np.argmax(logits, -1) == y))
        total += len(y)
    return correct / total


def _compiled_steps(model, data, uses_elmo):
    """`(predict, train_step)` as `tf.function`s with fixed signatures (no retracing)."""
    import tensorflow as tf

    x_spec = {"word_ids": tf.TensorSpec([None, None], tf.int32)}
    if uses_elmo:
        x_spec["elmo_layers"] = tf.TensorSpec(
            [None, data["n_elmo_layers"], None, data["elmo_dim"]], tf.float32
        )

    @tf.function(input_signature=[x_spec], autograph=False)
    def predict(x):
        return model(x, training=False)

    @tf.function(input_signature=[x_spec, tf.TensorSpec([None], tf.int32)], autograph=False)
    def step(x, y):
        with tf.GradientTape() as tape:
            logits = model(x, training=True)
            loss = model.loss(y, logits)
        grads = tape.gradient(loss, model.trainable_variables)
        model.optimizer.apply(grads, model.trainable_variables)
        return loss

    return predict, step


def _fit(model, step, predict, train, valid, settings):
    """Epochs until `patience` after the best validation accuracy; restores the best weights.
    Returns `(best valid accuracy, its epoch from 0)`."""
    best = (-1.0, 0, None)
    for epoch in range(settings.max_epochs):
        train.reshuffle()
        for k in range(len(train)):
            step(*train.batch(k))
        valid_acc = _accuracy(predict, valid)
        if valid_acc > best[0]:
            best = (valid_acc, epoch, [w.numpy() for w in model.weights])
        elif epoch - best[1] >= settings.patience:
            break
    model.set_weights(best[2])
    return best[0], best[1]


def train_one(variant, data, train_idx, seed, settings):
    """Trains one classifier; returns a dict with test accuracy and the learned mix."""
    uses_elmo = "elmo" in variant

    def make(indices, shuffle):
        return Batches(indices, data, settings.batch_size, seed, shuffle, uses_elmo)

    train = make(train_idx, True)
    valid, test = make(data["valid"], False), make(data["test"], False)
    model = build_classifier(variant, data, seed, settings)
    predict, step = _compiled_steps(model, data, uses_elmo)
    start = time.perf_counter()
    valid_acc, best_epoch = _fit(model, step, predict, train, valid, settings)
    result = {
        "variant": variant,
        "seed": seed,
        "n_train": len(train_idx),
        "valid_accuracy": valid_acc,
        "best_epoch": best_epoch + 1,
        "test_accuracy": _accuracy(predict, test),
        "seconds": time.perf_counter() - start,
    }
    if uses_elmo:
        result["layer_norm"] = settings.layer_norm
        result["elmo_dropout"] = settings.elmo_dropout
        mix = model.get_layer("scalar_mix")
        w = mix.scalar_weights.numpy()
        result["scalar_mix_softmax"] = (np.exp(w) / np.exp(w).sum()).tolist()
        result["scalar_mix_gamma"] = float(mix.gamma.numpy())
    return result
