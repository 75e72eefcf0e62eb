"""Sentences -> batches of windows for both directions, and the `tf.data` pipeline.

The stream follows bilm-tf's packing (`bilm/data.py`): every row of a batch is an endless
stream of whole sentences, each written `<S> w1 ... wn </S>`; a window holds the next
`unroll_steps` positions of its row, so a sentence may continue in the row's next window and the
LSTM state can be carried from window to window (truncated backpropagation through time). At
position `t` the forward LM reads token `t` and predicts token `t + 1` of the stream.

The backward LM reads the reversed stream (`</S> wn ... w1 <S>` per sentence). Here both streams
hold the same sentences in the same order, so window `k` of a row covers the same number of
positions in both directions; the backward window is handed to the model in natural order (each
row reversed by its own length), which is what `ProjectedBiLSTM(backward_inputs=...)` expects.

The stream is deterministic given the seed: a run resumed at global batch `k` rebuilds it and
skips `k` batches (without computing character ids), which restores the data position exactly.

NumPy, except `make_dataset` (tf.data); `prefetched` runs a batch iterator in a background thread
(the JAX trainer's feed).
"""

import queue
import threading

import numpy as np

from elmo_keras.text.char_ids import BOS_TOKEN, EOS_TOKEN, token_to_char_ids
from elmo_keras.validation import check_int


class WindowPacker:
    """Packs a stream of sentences into batches of windows for both directions (NumPy).

    Each yielded batch is a dict of arrays, all in natural (left-to-right) order:
    `forward_char_ids` and `backward_char_ids` `[batch, unroll_steps, max_chars]` int32 (all zeros
    at padding), `forward_targets` and `backward_targets` `[batch, unroll_steps]` int32 (word ids of
    the tokens to predict; 0 at padding). A row whose stream has ended is padding; the last batch
    is padded, and the stream stops after it.

    Args:
        sentences: iterable of lists of str (or of `streamed_sentence.StreamedSentence`, a
            long line read from its file a window at a time).
        vocabulary: `Vocabulary`. Targets outside it map to `<UNK>`.
        batch_size: int. Rows (the global batch).
        unroll_steps: int. Window length.
        max_characters_per_token: int.
    """

    def __init__(
        self, sentences, vocabulary, batch_size, unroll_steps=20, max_characters_per_token=50
    ):
        batch_size = check_int("batch_size", batch_size)
        unroll_steps = check_int("unroll_steps", unroll_steps)
        self.sentences = sentences
        self.vocabulary = vocabulary
        self.batch_size = batch_size
        self.unroll_steps = unroll_steps
        self.max_characters_per_token = max_characters_per_token
        self._char_cache = {}
        self._word_ids = {token: i for i, token in enumerate(vocabulary.tokens)}
        self._unk = vocabulary.unk_id if vocabulary.unk_id is not None else -1

    @property
    def epoch(self):
        """The pass over the text of the newest sentence packed so far (a `SentenceStream`'s
        `epoch`; 0 for other iterables)."""
        return getattr(self.sentences, "epoch", 0)

    def _ids(self, tokens):
        get = self._word_ids.get
        ids = [get(token, self._unk) for token in tokens]
        if self._unk < 0 and min(ids, default=0) < 0:
            missing = next(t for t, i in zip(tokens, ids, strict=True) if i < 0)
            raise ValueError(f"Token {missing!r} is not in the vocabulary, which has no '<UNK>'.")
        return ids

    def _char_ids(self, token):
        ids = self._char_cache.get(token)
        if ids is None:
            ids = token_to_char_ids(token, self.max_characters_per_token)
            if len(self._char_cache) < 500_000:
                self._char_cache[token] = ids
        return ids

    def iter_positions(self):
        """Yields, per batch, the list of row segments (lists of (sentence, start, stop))."""
        iterator = iter(self.sentences)
        current = [None] * self.batch_size  # per row: [tokens, ids, position]
        exhausted = False
        while True:
            rows = []
            for i in range(self.batch_size):
                segments = []
                filled = 0
                while filled < self.unroll_steps:
                    if current[i] is None or not _positions(current[i][0], current[i][2], 1):
                        current[i] = None
                        if exhausted:
                            break
                        try:
                            tokens = next(iterator)
                        except StopIteration:
                            exhausted = True
                            break
                        current[i] = [tokens, None, 0]
                    tokens, _, start = current[i]
                    take = _positions(tokens, start, self.unroll_steps - filled)
                    segments.append((current[i], start, start + take))
                    current[i][2] = start + take
                    filled += take
                rows.append(segments)
            if not any(rows):
                return
            yield rows
            if exhausted and all(c is None for c in current):
                return

    def __iter__(self):
        return self.batches()

    def batches(self, skip=0):
        """Yields batches; the first `skip` batches are only counted (cheap)."""
        for index, rows in enumerate(self.iter_positions()):
            if index < skip:
                continue
            yield self._materialize(rows)

    def _materialize(self, rows):
        b, t, c = self.batch_size, self.unroll_steps, self.max_characters_per_token
        fw_chars = np.zeros((b, t, c), np.int32)
        bw_chars = np.zeros((b, t, c), np.int32)
        fw_targets = np.zeros((b, t), np.int32)
        bw_targets = np.zeros((b, t), np.int32)
        bos, eos = self.vocabulary.bos_id, self.vocabulary.eos_id
        for i, segments in enumerate(rows):
            fw_in, fw_out, bw_in, bw_out = [], [], [], []
            for state, start, stop in segments:
                # Positions 0..n of the forward stream: inputs <S> w1..wn, targets w1..wn </S>;
                # of the backward stream: inputs </S> wn..w1, targets wn..w1 <S>. Each
                # direction's tokens `start - 1 .. stop - 1` make the window's part.
                forward, backward = _window_tokens(state[0], start, stop)
                k = stop - start
                for tokens, inputs, targets, first, last in (
                    (forward, fw_in, fw_out, BOS_TOKEN, eos),
                    (backward, bw_in, bw_out, EOS_TOKEN, bos),
                ):
                    inputs += [first, *tokens[: k - 1]] if start == 0 else tokens[:k]
                    following = (tokens if start == 0 else tokens[1:])[:k]
                    targets += self._ids(following)
                    targets += [last] * (k - len(following))  # position n: the end marker
            length = len(fw_in)
            if not length:
                continue
            for j, token in enumerate(fw_in):
                fw_chars[i, j] = self._char_ids(token)
            # The backward window in natural order: reversed by its own length.
            for j, token in enumerate(reversed(bw_in)):
                bw_chars[i, j] = self._char_ids(token)
            fw_targets[i, :length] = fw_out
            bw_targets[i, :length] = bw_out[::-1]
        return {
            "forward_char_ids": fw_chars,
            "backward_char_ids": bw_chars,
            "forward_targets": fw_targets,
            "backward_targets": bw_targets,
        }


def _positions(tokens, start, most):
    """How many of the `most` positions from `start` a sentence still has (positions `0..n`
    for `n` tokens): a list of tokens, or a `streamed_sentence.StreamedSentence` (a long line
    read from its file a window at a time)."""
    if isinstance(tokens, list | tuple):
        return max(0, min(len(tokens) + 1 - start, most))
    return tokens.positions(start, most)


def _window_tokens(tokens, start, stop):
    """The tokens `start - 1 .. stop - 1` (those that exist) of the forward order and of the
    backward (reversed) order of a sentence, as lists."""
    if not isinstance(tokens, list | tuple):
        return tokens.window(start, stop)
    lo, n = max(start - 1, 0), len(tokens)
    return list(tokens[lo:stop]), list(tokens[max(n - stop, 0) : n - lo][::-1])


def batch_spec(unroll_steps, max_characters_per_token, rows=None):
    import tensorflow as tf

    return {
        "forward_char_ids": tf.TensorSpec([rows, unroll_steps, max_characters_per_token], tf.int32),
        "backward_char_ids": tf.TensorSpec(
            [rows, unroll_steps, max_characters_per_token], tf.int32
        ),
        "forward_targets": tf.TensorSpec([rows, unroll_steps], tf.int32),
        "backward_targets": tf.TensorSpec([rows, unroll_steps], tf.int32),
    }


def make_dataset(
    packer_fn,
    batch_size,
    unroll_steps,
    max_characters_per_token,
    skip=0,
    input_context=None,
    prefetch=4,
    errors=None,
):
    """A `tf.data.Dataset` of per-replica batches from a `WindowPacker` factory.

    Every input pipeline builds the same global stream (deterministic), keeps the rows of its own
    replicas and yields them replica after replica, so each replica gets its shard: replica `r`
    always gets rows `[r * b, (r + 1) * b)` of the global batch (`b = batch_size / replicas`),
    which keeps a row's stream (and its carried LSTM state) on one replica.

    Each element holds the keys of a `WindowPacker` batch and `epoch`, an int32 scalar: the pass
    over the text of the newest sentence in the global batch (the trainer's epoch callbacks).

    Args:
        packer_fn: callable returning a fresh `WindowPacker` over the global batch.
        batch_size: int. The global batch size.
        input_context: `tf.distribute.InputContext` or None (one replica).
        skip: int. Global batches to skip first (resume).
        errors: list or None. Receives the exception the packer raised, if any (TensorFlow
            reports it as an `OpError` with the Python traceback inside its message; the
            caller re-raises this one instead: one line, as a `ValueError` is).
    """
    import tensorflow as tf

    replicas, first_replica, local = 1, 0, 1
    if input_context is not None:
        replicas = input_context.num_replicas_in_sync
        local = replicas // input_context.num_input_pipelines
        first_replica = input_context.input_pipeline_id * local
    if batch_size % replicas:
        raise ValueError(
            f"`batch_size` must be a multiple of the number of replicas ({replicas}). "
            f"Received: batch_size={batch_size}"
        )
    per_replica = batch_size // replicas

    def generator():
        packer = packer_fn()
        try:
            for batch in packer.batches(skip=skip):
                epoch = np.int32(packer.epoch)
                for r in range(first_replica, first_replica + local):
                    rows = slice(r * per_replica, (r + 1) * per_replica)
                    yield {**{key: value[rows] for key, value in batch.items()}, "epoch": epoch}
        except (ValueError, OSError) as error:  # a changed text file, a failed read
            if errors is not None:
                errors.append(error)
            raise

    signature = batch_spec(unroll_steps, max_characters_per_token, per_replica)
    signature["epoch"] = tf.TensorSpec([], tf.int32)
    dataset = tf.data.Dataset.from_generator(generator, output_signature=signature)
    return dataset.prefetch(prefetch)


def prefetched(iterator, size):
    """Runs `iterator` in a background thread, `size` items ahead; re-raises its errors.

    The JAX trainer's data feed (batches packed and copied to the devices while the step
    runs). Closing the returned generator (the trainer does when `fit` ends) stops the thread
    and waits for it: a thread left inside JAX at interpreter exit aborts the process.
    """
    items = queue.Queue(maxsize=size)
    done = object()
    stop = threading.Event()

    def put(item):
        while not stop.is_set():
            try:
                items.put(item, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def work():
        try:
            for item in iterator:
                if not put(item):
                    return
            put(done)
        except BaseException as error:  # noqa: BLE001 - handed to the consumer
            put(error)

    thread = threading.Thread(target=work, daemon=True, name="elmo-keras-batches")
    thread.start()
    try:
        while True:
            item = items.get()
            if item is done:
                return
            if isinstance(item, BaseException):
                raise item
            yield item
    finally:
        stop.set()
        thread.join()
