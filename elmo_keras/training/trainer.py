"""Pretraining the biLM under any `tf.distribute` strategy, with exact resume.

One global step = one global batch of windows (`batch_size` rows of `unroll_steps` tokens),
split over the replicas row-wise. Each replica computes the sum of its tokens' negative
log-likelihoods divided by the *global* number of real tokens, so the replicas' gradients add up
to the gradient of the global mean: 2 replicas with half batches take the same step as 1 replica
with the whole batch (up to float round-off). The gradients are clipped by their global norm
after that sum. The sampled softmax draws its candidates from a stateless generator keyed by
`(seed, step)`: the same candidates on every replica and after a resume.

The LSTM state carried from window to window lives in two variables holding the whole global
batch (each replica reads its rows and all-gathers the new state), so it is checkpointed with the
weights, the optimizer and the step, and the step is the data position. A run stopped at step
`k` (a signal, a time budget or a crash after a checkpoint) and resumed continues exactly.
"""

import json
import math
import os
import pathlib
import shutil
import signal
import sys
import time

import keras
import numpy as np
import tensorflow as tf

from elmo_keras.models.bilm import BiLM
from elmo_keras.models.language_model import LanguageModel
from elmo_keras.text.vocabulary import Vocabulary
from elmo_keras.training.configs import architecture_options, normalize_config
from elmo_keras.training.data import SentenceStream, WindowPacker, expand_files, make_dataset

STRATEGIES = ("auto", "default", "mirrored", "multi-worker")
WEIGHTS_FILE = "lm_weights.hdf5"
OPTIONS_FILE = "options.json"
VOCAB_FILE = "vocab.txt"
SOFTMAX_FILE = "softmax.hdf5"
CONFIG_FILE = "training_config.json"


def make_strategy(name="auto"):
    """A `tf.distribute` strategy by name.

    `"auto"`: `MultiWorkerMirroredStrategy` when `TF_CONFIG` names more than one worker,
    `MirroredStrategy` over all GPUs when there are several, else the default strategy (one
    device). `"mirrored"`: every local GPU (or, without GPUs, every logical CPU device).
    `"multi-worker"`: `MultiWorkerMirroredStrategy` from `TF_CONFIG`.
    """
    if name not in STRATEGIES:
        raise ValueError(f"`strategy` must be one of {STRATEGIES}. Received: strategy={name!r}")
    if name == "auto":
        cluster = json.loads(os.environ.get("TF_CONFIG", "{}")).get("cluster", {})
        n_workers = len(cluster.get("worker", [])) + len(cluster.get("chief", []))
        if n_workers > 1:
            name = "multi-worker"
        elif len(tf.config.list_logical_devices("GPU")) > 1:
            name = "mirrored"
        else:
            name = "default"
    if name == "default":
        return tf.distribute.get_strategy()
    if name == "multi-worker":
        if "TF_CONFIG" not in os.environ:
            raise ValueError("`strategy='multi-worker'` needs the TF_CONFIG environment variable.")
        return tf.distribute.MultiWorkerMirroredStrategy()
    gpus = tf.config.list_logical_devices("GPU")
    devices = [d.name for d in gpus] or [d.name for d in tf.config.list_logical_devices("CPU")]
    return tf.distribute.MirroredStrategy(devices)


def _is_chief(strategy):
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None or not resolver.cluster_spec().as_dict():
        return True
    task_type, task_id = resolver.task_type, resolver.task_id
    return task_type == "chief" or (
        task_type == "worker" and task_id == 0 and "chief" not in resolver.cluster_spec().jobs
    )


def _num_workers(strategy):
    resolver = getattr(strategy, "cluster_resolver", None)
    if resolver is None:
        return 1
    jobs = resolver.cluster_spec().as_dict()
    return max(1, sum(len(jobs.get(name, ())) for name in ("chief", "worker")))


def _worker_id(strategy):
    resolver = getattr(strategy, "cluster_resolver", None)
    return 0 if resolver is None or resolver.task_id is None else int(resolver.task_id)


def _make_optimizer(config):
    name = config["optimizer"]
    lr = float(config["learning_rate"])
    if name == "adagrad":
        return keras.optimizers.Adagrad(learning_rate=lr, initial_accumulator_value=1.0)
    return keras.optimizers.Adam(learning_rate=lr)


class Trainer:
    """Trains a `LanguageModel` on windows of text under a `tf.distribute` strategy.

    Args:
        config: dict. A training configuration (`elmo_keras.training.configs.get_config`).
        vocabulary: `Vocabulary`. Sorted by frequency (sampled softmax).
        strategy: `tf.distribute.Strategy` or None (the current one).
        seed: int. Seeds the weights, the candidate sampler and the data order.
        carry_state: bool. Carry the LSTM state from window to window (bilm-tf). Defaults to
            `True`.
        mixed_precision: None or `"bfloat16"` (compute in bfloat16, variables and softmax in
            float32; no loss scaling needed). For GPUs and TPUs.
        jit_compile: bool. Compile each replica's forward and backward pass with XLA.
    """

    def __init__(self, config, vocabulary, strategy=None, seed=0, carry_state=True,
                 mixed_precision=None, jit_compile=False):
        self.config = normalize_config(config)
        self.vocabulary = vocabulary
        self.config["n_tokens_vocab"] = len(vocabulary)
        self.strategy = strategy or tf.distribute.get_strategy()
        self.seed = int(seed)
        self.carry_state = bool(carry_state)
        self.jit_compile = bool(jit_compile)
        if mixed_precision not in (None, "bfloat16"):
            raise ValueError(
                "`mixed_precision` must be None or 'bfloat16'. "
                f"Received: mixed_precision={mixed_precision!r}"
            )
        self.mixed_precision = mixed_precision
        replicas = self.strategy.num_replicas_in_sync
        self.batch_size = int(self.config["batch_size"])
        if self.batch_size % replicas:
            raise ValueError(
                f"`batch_size` must be a multiple of the number of replicas ({replicas}). "
                f"Received: batch_size={self.batch_size}"
            )
        self.per_replica_batch = self.batch_size // replicas
        self.unroll_steps = int(self.config["unroll_steps"])
        self.max_chars = int(self.config["char_cnn"]["max_characters_per_token"])
        self.is_chief = _is_chief(self.strategy)
        self.multi_worker = _num_workers(self.strategy) > 1
        self._build()

    # ------------------------------------------------------------------------------ building

    def _build(self):
        config = self.config
        kwargs = {"dropout": float(config.get("dropout", 0.0))}
        if self.mixed_precision:
            kwargs["dtype"] = "mixed_bfloat16"
        with self.strategy.scope():
            keras.utils.set_random_seed(self.seed)
            bilm = BiLM.from_options(architecture_options(config), **kwargs)
            self.model = LanguageModel(
                bilm, len(self.vocabulary), int(config.get("n_negative_samples_batch") or 0)
            )
            self.model.build()
            self.optimizer = _make_optimizer(config)
            self.optimizer.build(self.model.trainable_variables)
            self.step = tf.Variable(
                0, dtype=tf.int64, trainable=False, name="step",
                aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
            )
            n_layers, dim, units = bilm.n_layers, bilm.projection_dim, bilm.lstm_units
            self.state_h = tf.Variable(
                tf.zeros([self.batch_size, 2, n_layers, dim]), trainable=False,
                name="state_h", aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
            )
            self.state_c = tf.Variable(
                tf.zeros([self.batch_size, 2, n_layers, units]), trainable=False,
                name="state_c", aggregation=tf.VariableAggregation.ONLY_FIRST_REPLICA,
            )
        self.checkpoint = tf.train.Checkpoint(
            model=list(self.model.variables),
            optimizer=list(self.optimizer.variables),
            step=self.step,
            state_h=self.state_h,
            state_c=self.state_c,
        )
        self._train_step = None
        self._eval_step = None

    @property
    def bilm(self):
        return self.model.bilm

    # --------------------------------------------------------------------------- the step

    def _forward_backward(self, batch, state_h, state_c, candidates, denominator):
        model = self.model
        variables = model.trainable_variables
        with tf.GradientTape() as tape:
            forward, backward, mask, new_h, new_c = model.encode(
                batch["forward_char_ids"], batch["backward_char_ids"], state_h, state_c,
                training=True,
            )
            nll_fw = tf.reduce_sum(
                model.token_losses(forward, batch["forward_targets"], mask,
                                   candidates=candidates)
            )
            nll_bw = tf.reduce_sum(
                model.token_losses(backward, batch["backward_targets"], mask,
                                   candidates=candidates)
            )
            loss = 0.5 * (nll_fw + nll_bw) / denominator
        grads = tape.gradient(loss, variables)
        grads = [
            tf.zeros_like(v) if g is None else tf.convert_to_tensor(g)
            for g, v in zip(grads, variables, strict=True)
        ]
        return grads, nll_fw, nll_bw, new_h, new_c

    def _replica_step(self, batch, step, stop_votes):
        ctx = tf.distribute.get_replica_context()
        rows = self.per_replica_batch
        mask = tf.not_equal(batch["forward_char_ids"][:, :, 0], 0)
        local_tokens = tf.reduce_sum(tf.cast(mask, tf.float32))
        # One all-reduce carries the token count and every worker's request to stop (a signal,
        # its own clock's time budget), so that all workers stop after the same step.
        totals = ctx.all_reduce(
            tf.distribute.ReduceOp.SUM, tf.concat([local_tokens[None], stop_votes], axis=0)
        )
        denominator = tf.maximum(totals[0], 1.0)
        if self.carry_state:
            start = tf.cast(ctx.replica_id_in_sync_group, tf.int32) * rows
            state_h = self.state_h[start : start + rows]
            state_c = self.state_c[start : start + rows]
        else:
            state_h, state_c = self.model.zero_state(rows)
        # Drawn outside the compiled part: XLA's stateless random numbers differ from the
        # graph's, and the candidates must not depend on `jit_compile`.
        candidates = self.model.sample_candidates(
            tf.stack([tf.constant(self.seed, tf.int64), step])
        )
        compute = self._forward_backward
        if self.jit_compile:
            compute = tf.function(compute, jit_compile=True)
        grads, nll_fw, nll_bw, new_h, new_c = compute(
            batch, state_h, state_c, candidates, denominator
        )
        summed = grads
        if ctx.num_replicas_in_sync > 1:
            summed = ctx.all_reduce(tf.distribute.ReduceOp.SUM, grads)
        clip = float(self.config.get("all_clip_norm_val") or 0.0)
        norm = tf.linalg.global_norm(summed)
        scale = clip / tf.maximum(norm, clip) if clip > 0 else tf.constant(1.0)
        # Keras' optimizer sums the replicas' gradients itself: hand it each replica's share.
        self.optimizer.apply_gradients(
            zip([g * scale for g in grads], self.model.trainable_variables, strict=True)
        )
        if self.carry_state:
            new_h = tf.cast(new_h, tf.float32)
            new_c = tf.cast(new_c, tf.float32)
            if ctx.num_replicas_in_sync > 1:
                new_h = ctx.all_gather(new_h, axis=0)
                new_c = ctx.all_gather(new_c, axis=0)
            self.state_h.assign(new_h)
            self.state_c.assign(new_c)
        return nll_fw, nll_bw, local_tokens, norm, totals[1:]

    def _make_train_step(self):
        """The global step: `train_step(batch, stop_votes=None)`.

        `stop_votes` is a float32 vector `[signal, time]` of this worker's requests to stop (1.0
        or 0.0). Returns the global forward and backward NLL sums, the global token count, the
        mean gradient norm and the votes summed over all replicas of all workers.
        """
        strategy = self.strategy

        @tf.function
        def train_step(batch, stop_votes=None):
            if stop_votes is None:
                stop_votes = tf.zeros([2])
            step = self.step.read_value()
            nll_fw, nll_bw, tokens, norm, votes = strategy.run(
                self._replica_step, args=(batch, step, stop_votes)
            )
            total = [
                strategy.reduce(tf.distribute.ReduceOp.SUM, x, axis=None)
                for x in (nll_fw, nll_bw, tokens)
            ]
            self.step.assign_add(1)
            return total + [
                strategy.reduce(tf.distribute.ReduceOp.MEAN, norm, axis=None),
                strategy.experimental_local_results(votes)[0],
            ]

        return train_step

    # -------------------------------------------------------------------------------- data

    def _stream(self, pattern, epochs, tokenization, shuffle_buffer):
        def packer():
            sentences = SentenceStream(
                pattern, tokenization=tokenization, shuffle=True,
                shuffle_buffer=shuffle_buffer, seed=self.seed, epochs=epochs,
            )
            return WindowPacker(
                sentences, self.vocabulary, self.batch_size, self.unroll_steps, self.max_chars
            )

        return packer

    # ------------------------------------------------------------------------- checkpoints

    def _manager(self, directory, keep):
        directory = pathlib.Path(directory)
        if not self.is_chief:  # every worker saves (a collective), only the chief keeps it
            directory = directory / f".worker-{_worker_id(self.strategy)}"
        return tf.train.CheckpointManager(self.checkpoint, str(directory), max_to_keep=keep)

    def save_checkpoint(self, manager):
        path = manager.save(checkpoint_number=int(self.step.numpy()))
        if not self.is_chief:
            shutil.rmtree(manager.directory, ignore_errors=True)
        return path

    def restore(self, checkpoint_dir):
        """Restores the latest checkpoint of `checkpoint_dir`; returns its path or None."""
        latest = tf.train.latest_checkpoint(str(checkpoint_dir))
        if latest is not None:
            self.checkpoint.restore(latest).assert_existing_objects_matched()
        return latest

    # ---------------------------------------------------------------------------- training

    def fit(self, train, steps=None, epochs=None, output_dir=None, checkpoint_every=1000,
            keep_checkpoints=3, time_budget_s=None, log_every=50, tokenization="whitespace",
            shuffle_buffer=10000, progress=None, on_step=None, handle_signals=True):
        """Trains until `steps` global steps, the end of `epochs`, the time budget or a signal.

        Args:
            train: str or list. Glob(s) of training text files.
            steps: int or None. The global step to stop at (counted from the run's start, so a
                resumed run given the same `steps` ends where an uninterrupted one would).
            epochs: int or None. Passes over the data (`None`: repeat).
            output_dir: path or None. Checkpoints go to `output_dir/checkpoints`, TensorBoard
                scalars to `output_dir/logs`.
            checkpoint_every: int. Steps between checkpoints (also saved at the end and on
                SIGTERM / SIGINT).
            keep_checkpoints: int. Checkpoints kept (older ones are deleted).
            time_budget_s: float or None. Stop (and checkpoint) after this many seconds.
            log_every: int. Steps between logged lines / TensorBoard points.
            tokenization: `"whitespace"` or `"punctuation"`.
            progress: bool or None. A progress bar (None: when stdout is a terminal).
            on_step: callable(step, metrics) or None, called after every step.
            handle_signals: bool. Checkpoint and stop on SIGTERM / SIGINT.

        Returns:
            A dict: `steps`, `tokens`, `seconds`, `tokens_per_second`, `stopped`
            (`"steps"`, `"epochs"`, `"time"` or `"signal"`), `train_perplexity_forward`,
            `train_perplexity_backward` (sampled-softmax loss of the last log interval).
        """
        if steps is None and epochs is None:
            raise ValueError("Give `steps` or `epochs` (or both).")
        for name, value in (("steps", steps), ("epochs", epochs)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int)
                                      or value < 1):
                raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value!r}")
        expand_files(train)  # a clear error now rather than inside tf.data
        if self._train_step is None:
            self._train_step = self._make_train_step()
        start_step = int(self.step.numpy())
        manager = writer = None
        if output_dir is not None:
            output_dir = pathlib.Path(output_dir)
            manager = self._manager(output_dir / "checkpoints", keep_checkpoints)
            if self.is_chief:
                writer = tf.summary.create_file_writer(str(output_dir / "logs"))
        if steps is not None and start_step >= steps:
            return {"steps": start_step, "tokens": 0, "seconds": 0.0, "tokens_per_second": 0.0,
                    "stopped": "steps"}

        packer = self._stream(train, epochs, tokenization, shuffle_buffer)
        dataset = self.strategy.distribute_datasets_from_function(
            lambda ctx: make_dataset(
                packer, self.batch_size, self.unroll_steps, self.max_chars,
                skip=start_step, input_context=ctx,
            )
        )
        stop = {"signal": None}
        previous = {}
        if handle_signals:
            def handler(signum, frame):
                stop["signal"] = signum

            for signum in (signal.SIGTERM, signal.SIGINT):
                try:
                    previous[signum] = signal.signal(signum, handler)
                except ValueError:  # not the main thread
                    pass
        if progress is None:
            progress = sys.stdout.isatty() and self.is_chief
        bar = keras.utils.Progbar(steps - start_step, unit_name="step") if (
            progress and steps) else None
        started = time.perf_counter()

        def local_votes():
            """This process's requests to stop: `[signal, time budget]`, 1.0 or 0.0."""
            out_of_time = (time_budget_s is not None
                           and time.perf_counter() - started >= time_budget_s)
            return [float(stop["signal"] is not None), float(out_of_time)]

        interval = {"fw": 0.0, "bw": 0.0, "tokens": 0.0, "time": started}
        total_tokens = 0.0
        stopped = "epochs"
        last = {}
        try:
            iterator = iter(dataset)
            while True:
                if steps is not None and int(self.step.numpy()) >= steps:
                    stopped = "steps"
                    break
                try:
                    batch = next(iterator)
                except (StopIteration, tf.errors.OutOfRangeError):
                    stopped = "epochs"
                    break
                *values, votes = self._train_step(batch, tf.constant(local_votes()))
                nll_fw, nll_bw, tokens, norm = (float(x) for x in values)
                signal_votes, time_votes = (float(x) for x in votes.numpy())
                step = int(self.step.numpy())
                total_tokens += tokens
                for key, value in (("fw", nll_fw), ("bw", nll_bw), ("tokens", tokens)):
                    interval[key] += value
                metrics = {"forward_nll": nll_fw, "backward_nll": nll_bw, "tokens": tokens,
                           "grad_norm": norm}
                if on_step is not None:
                    on_step(step, metrics)
                if bar is not None:
                    elapsed = time.perf_counter() - started
                    bar.update(step - start_step, values=[
                        ("loss", 0.5 * (nll_fw + nll_bw) / max(tokens, 1.0)),
                        ("tokens/s", total_tokens / max(elapsed, 1e-9)),
                    ])
                if step % log_every == 0 or (steps is not None and step == steps):
                    last = self._log(writer, step, interval, bar is None)
                    interval = {"fw": 0.0, "bw": 0.0, "tokens": 0.0, "time": time.perf_counter()}
                if manager is not None and step % checkpoint_every == 0:
                    self.save_checkpoint(manager)
                if not self.multi_worker:  # one process: stop right after this step
                    signal_votes, time_votes = local_votes()
                # Several workers decide from everyone's votes taken at the start of this step:
                # all leave after the same step (a lone worker leaving would keep the others
                # waiting in a collective) and save the same checkpoint.
                if signal_votes > 0:
                    stopped = "signal"
                    break
                if time_votes > 0:
                    stopped = "time"
                    break
        finally:
            for signum, old in previous.items():
                signal.signal(signum, old)
        if interval["tokens"]:
            last = self._log(writer, int(self.step.numpy()), interval, False)
        if manager is not None and (
            manager.latest_checkpoint is None
            or not manager.latest_checkpoint.endswith(f"-{int(self.step.numpy())}")
        ):
            self.save_checkpoint(manager)
        if writer is not None:
            writer.flush()
        seconds = time.perf_counter() - started
        return {
            "steps": int(self.step.numpy()),
            "tokens": int(total_tokens),
            "seconds": seconds,
            "tokens_per_second": total_tokens / max(seconds, 1e-9),
            "stopped": stopped,
            "train_perplexity_forward": last.get("perplexity_forward"),
            "train_perplexity_backward": last.get("perplexity_backward"),
        }

    def _log(self, writer, step, interval, echo):
        tokens = max(interval["tokens"], 1.0)
        elapsed = max(time.perf_counter() - interval["time"], 1e-9)
        loss_fw, loss_bw = interval["fw"] / tokens, interval["bw"] / tokens
        scalars = {
            "loss": 0.5 * (loss_fw + loss_bw),
            "perplexity_forward": math.exp(min(loss_fw, 50.0)),
            "perplexity_backward": math.exp(min(loss_bw, 50.0)),
            "learning_rate": float(keras.ops.convert_to_numpy(self.optimizer.learning_rate)),
            "tokens_per_second": interval["tokens"] / elapsed,
        }
        if writer is not None:
            with writer.as_default():
                for name, value in scalars.items():
                    _write_scalar(name, value, step)
        if echo and self.is_chief:
            print(
                f"step {step}: loss {scalars['loss']:.4f}, perplexity forward "
                f"{scalars['perplexity_forward']:.1f} backward {scalars['perplexity_backward']:.1f}"
                f", {scalars['tokens_per_second']:.0f} tokens/s",
                flush=True,
            )
        return scalars

    # -------------------------------------------------------------------------- evaluation

    def evaluate(self, data, batch_size=16, max_tokens=None, tokenization="whitespace"):
        """Perplexity with the full softmax (state carried across windows, no dropout).

        Returns:
            A dict: `perplexity_forward`, `perplexity_backward`, `perplexity` (exp of the mean
            of both losses, bilm-tf's average), `tokens` (predicted tokens per direction).
        """
        return evaluate_model(
            self.model, self.vocabulary, data, batch_size=batch_size,
            unroll_steps=self.unroll_steps, max_tokens=max_tokens, tokenization=tokenization,
        )

    # ----------------------------------------------------------------------------- outputs

    def export(self, output_dir):
        """Writes options.json, lm_weights.hdf5 (published layout), vocab.txt, softmax.hdf5."""
        export_model(self.model, self.vocabulary, output_dir)


def _write_scalar(name, value, step):
    """`tf.summary.scalar` without the tensorboard package (same event-file record)."""
    from tensorflow.core.framework import summary_pb2

    metadata = summary_pb2.SummaryMetadata(
        plugin_data=summary_pb2.SummaryMetadata.PluginData(plugin_name="scalars")
    )
    tf.summary.write(
        name, tf.constant(value, tf.float32), step=step, metadata=metadata.SerializeToString()
    )


def evaluate_model(model, vocabulary, data, batch_size=16, unroll_steps=20, max_tokens=None,
                   tokenization="whitespace"):
    """Full-softmax perplexity of a `LanguageModel` on text files (see `Trainer.evaluate`)."""
    max_chars = model.bilm.max_characters_per_token
    packer = WindowPacker(
        SentenceStream(data, tokenization=tokenization, shuffle=False, epochs=1),
        vocabulary, batch_size, unroll_steps, max_chars,
    )

    @tf.function(reduce_retracing=True, autograph=False)  # no Python control flow inside
    def eval_step(batch, state_h, state_c):
        forward, backward, mask, new_h, new_c = model.encode(
            batch["forward_char_ids"], batch["backward_char_ids"], state_h, state_c,
            training=False,
        )
        nll_fw = tf.reduce_sum(model.token_losses(forward, batch["forward_targets"], mask))
        nll_bw = tf.reduce_sum(model.token_losses(backward, batch["backward_targets"], mask))
        tokens = tf.reduce_sum(tf.cast(mask, tf.float32))
        return nll_fw, nll_bw, tokens, tf.cast(new_h, tf.float32), tf.cast(new_c, tf.float32)

    state_h, state_c = model.zero_state(batch_size)
    total_fw = total_bw = total_tokens = 0.0
    for batch in packer:
        nll_fw, nll_bw, tokens, state_h, state_c = eval_step(batch, state_h, state_c)
        total_fw += float(nll_fw)
        total_bw += float(nll_bw)
        total_tokens += float(tokens)
        if max_tokens is not None and total_tokens >= max_tokens:
            break
    if not total_tokens:
        raise ValueError(f"No tokens to evaluate in {data!r}.")
    loss_fw, loss_bw = total_fw / total_tokens, total_bw / total_tokens
    return {
        "perplexity_forward": math.exp(loss_fw),
        "perplexity_backward": math.exp(loss_bw),
        "perplexity": math.exp(0.5 * (loss_fw + loss_bw)),
        "tokens": int(total_tokens),
    }


def export_model(model, vocabulary, output_dir):
    """Writes a trained `LanguageModel`: options.json, lm_weights.hdf5, vocab.txt, softmax.hdf5."""
    import h5py

    from elmo_keras.weights import save_weights, write_options

    output_dir = pathlib.Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    write_options(model.bilm.to_options(), output_dir / OPTIONS_FILE)
    save_weights(model.bilm, output_dir / WEIGHTS_FILE)
    vocabulary.save(output_dir / VOCAB_FILE)
    tmp = output_dir / f".{SOFTMAX_FILE}.tmp"
    with h5py.File(tmp, "w") as handle:
        handle.create_dataset("softmax/W", data=np.asarray(model.softmax_kernel.numpy()))
        handle.create_dataset("softmax/b", data=np.asarray(model.softmax_bias.numpy()))
    os.replace(tmp, output_dir / SOFTMAX_FILE)


def load_language_model(model_dir):
    """Loads what `export_model` wrote: returns `(LanguageModel, Vocabulary)`."""
    import h5py

    from elmo_keras.weights import load_bilm

    model_dir = pathlib.Path(model_dir)
    for name in (OPTIONS_FILE, WEIGHTS_FILE, VOCAB_FILE, SOFTMAX_FILE):
        if not (model_dir / name).is_file():
            raise FileNotFoundError(
                f"{model_dir} is not a trained model folder: {name} is missing "
                "(`elmo-keras train` writes options.json, lm_weights.hdf5, vocab.txt, softmax.hdf5)"
            )
    vocabulary = Vocabulary.load(model_dir / VOCAB_FILE)
    bilm = load_bilm(model_dir / OPTIONS_FILE, model_dir / WEIGHTS_FILE)
    with h5py.File(model_dir / SOFTMAX_FILE, "r") as handle:
        kernel, bias = handle["softmax/W"][...], handle["softmax/b"][...]
    if kernel.shape[0] != len(vocabulary):
        raise ValueError(
            f"softmax.hdf5 has {kernel.shape[0]} words but vocab.txt has {len(vocabulary)}."
        )
    model = LanguageModel(bilm, len(vocabulary), 0)
    model.build()
    model.softmax_kernel.assign(kernel)
    model.softmax_bias.assign(bias)
    return model, vocabulary
