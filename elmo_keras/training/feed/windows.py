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
skips `k` batches (without looking up word or character ids), which restores the data position
exactly.

NumPy, except `make_dataset` (tf.data); `ordered_map` runs the materializing in worker threads,
`prefetched` a batch iterator in a background thread (the JAX trainer's feed).
"""

import collections
import concurrent.futures
import os
import queue
import threading

import numpy as np

from elmo_keras.training.feed.char_table import CharTable
from elmo_keras.training.feed.encoded_sentence import EncodedSentence
from elmo_keras.validation import check_int


class WindowPacker:
    """Packs a stream of sentences into batches of windows for both directions (NumPy).

    Each yielded batch is a dict of arrays, all in natural (left-to-right) order:
    `forward_char_ids` and `backward_char_ids` `[batch, unroll_steps, max_chars]` int32 (all zeros
    at padding), `forward_targets` and `backward_targets` `[batch, unroll_steps]` int32 (word ids of
    the tokens to predict; 0 at padding). A row whose stream has ended is padding; the last batch
    is padded, and the stream stops after it.

    One thread plans the batches in order (the windows of each row, and each sentence's word ids
    and character-id rows, looked up once per token: `char_table.CharTable`); `workers` threads
    materialize them (a few NumPy gathers a batch), handed back in order: the batches are the same
    whatever the number of workers.

    Args:
        sentences: iterable of lists of str (or of `streamed_sentence.StreamedSentence`, a
            long line read from its file a window at a time).
        vocabulary: `Vocabulary`. Targets outside it map to `<UNK>`.
        batch_size: int. Rows (the global batch).
        unroll_steps: int. Window length.
        max_characters_per_token: int.
        workers: int or None. Threads materializing batches; 0: in the iterating thread. None
            (default): `default_workers()`.
    """

    def __init__(
        self,
        sentences,
        vocabulary,
        batch_size,
        unroll_steps=20,
        max_characters_per_token=50,
        workers=None,
    ):
        batch_size = check_int("batch_size", batch_size)
        unroll_steps = check_int("unroll_steps", unroll_steps)
        self.workers = default_workers() if workers is None else check_int("workers", workers, 0)
        self.sentences = sentences
        self.vocabulary = vocabulary
        self.batch_size = batch_size
        self.unroll_steps = unroll_steps
        self.max_characters_per_token = max_characters_per_token
        self._chars = CharTable(vocabulary, max_characters_per_token)
        self._ends = ((vocabulary.bos_id,), (vocabulary.eos_id,))  # <S>, </S>: rows = ids
        self._epoch = None  # the epoch of the batch yielded last

    @property
    def epoch(self):
        """The pass over the text of the newest sentence in the batch yielded last (a
        `SentenceStream`'s `epoch`; 0 for other iterables)."""
        if self._epoch is not None:
            return self._epoch
        return getattr(self.sentences, "epoch", 0)

    def iter_positions(self):
        """Yields, per batch, the list of row segments (lists of (sentence, start, stop))."""
        iterator = iter(self.sentences)
        current = [None] * self.batch_size  # per row: [tokens, encoded, position]
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
        plans = self._plans(skip)
        for epoch, batch in ordered_map(self._materialize, plans, self.workers):
            self._epoch = epoch
            yield batch

    def _plans(self, skip):
        for index, rows in enumerate(self.iter_positions()):
            if index >= skip:
                yield getattr(self.sentences, "epoch", 0), self._plan(rows)

    def _plan(self, rows):
        """What `_materialize` needs of a batch: `(pool, row, column, length, lengths, extra)`.

        Each segment (positions `start .. stop - 1` of a sentence, `k` of them) adds two blocks
        of `k + 1` columns to `pool` (row 0: character-table rows, row 1: word ids): the
        forward stream's tokens at positions `start .. stop` (`<S> w1 .. wn </S>`, position `p`
        reads token `p` and predicts `p + 1`), then the backward stream's at the same positions,
        in natural order."""
        self._chars.renew_if_full()
        blocks, row, column, length, lengths = [], [], [], [], []
        for i, segments in enumerate(rows):
            filled = 0
            for state, start, stop in segments:
                blocks += self._segment_blocks(state, start, stop)
                row.append(i)
                column.append(filled)
                length.append(stop - start)
                filled += stop - start
            lengths.append(filled)
        pool = np.concatenate(blocks, axis=1) if blocks else np.zeros((2, 0), np.int32)
        ints = [np.asarray(v, np.int64) for v in (row, column, length, lengths)]
        return (pool, *ints, self._chars.extra)

    def _segment_blocks(self, state, start, stop):
        tokens = state[0]
        bos, eos = self._ends
        if isinstance(tokens, list | tuple | EncodedSentence):
            if state[1] is None or state[1][0] != self._chars.generation:
                known = isinstance(tokens, EncodedSentence)  # word ids looked up already
                encode = self._chars.encode_ids if known else self._chars.encode
                state[1] = (self._chars.generation, encode(tokens, bos, eos))
            encoded, n = state[1][1], len(tokens)
            # Backward position `p` is the forward stream's `n + 1 - p`.
            return encoded[:, start : stop + 1], encoded[:, n + 1 - stop : n + 2 - start]
        forward, backward = _window_tokens(tokens, start, stop)
        blocks = []
        for part, (first, last) in ((forward, (bos, eos)), (backward, (eos, bos))):
            before = first if start == 0 else ()
            after = last if len(before) + len(part) < stop - start + 1 else ()  # position n
            blocks.append(self._chars.encode(part, before, after))
        return blocks[0], blocks[1][:, ::-1]

    def _materialize(self, item):
        epoch, (pool, row, column, length, lengths, extra) = item
        b, t = self.batch_size, self.unroll_steps
        # Per position of the batch: its segment, its offset in it, its row and column.
        segment = np.repeat(np.arange(len(length)), length)
        offset = np.arange(segment.size) - np.repeat(np.cumsum(length) - length, length)
        first = np.cumsum(2 * (length + 1)) - 2 * (length + 1)  # the segment's forward block
        forward = first[segment] + offset
        backward = (first + 2 * length + 1)[segment] - offset  # its backward block, reversed
        r, c = row[segment], column[segment] + offset
        back_c = lengths[r] - 1 - c  # the backward window in natural order
        out = {}
        for name, at, source, step in (
            ("forward", c, forward, 1),
            ("backward", back_c, backward, -1),
        ):
            rows = np.full((b, t), self._chars.padding, np.int64)
            rows[r, at] = pool[0, source]
            targets = np.zeros((b, t), np.int32)
            targets[r, at] = pool[1, source + step]
            out[f"{name}_char_ids"] = self._chars.gather(rows, extra)
            out[f"{name}_targets"] = targets
        return epoch, {k: out[k] for k in _KEYS}


_KEYS = ("forward_char_ids", "backward_char_ids", "forward_targets", "backward_targets")


def default_workers():
    """Threads materializing batches by default: 1 with 4 cores or more, else 0. The planner
    (Python, holding the GIL) is most of a batch's work, so one thread takes all the gathers."""
    return 1 if (os.cpu_count() or 1) >= 4 else 0


def ordered_map(function, items, workers, ahead=None):
    """`map(function, items)` with `workers` threads (0: in this thread), results in order.

    At most `ahead` items (default `2 * workers`) are submitted beyond the one awaited; an
    error of `function` is raised here, as it is; closing the generator cancels what has not
    started and waits for what has."""
    if workers == 0:
        yield from map(function, items)
        return
    ahead = 2 * workers if ahead is None else ahead
    pending = collections.deque()
    with concurrent.futures.ThreadPoolExecutor(workers, "elmo-keras-windows") as pool:
        try:
            for item in items:
                pending.append(pool.submit(function, item))
                if len(pending) > ahead:
                    yield pending.popleft().result()
            while pending:
                yield pending.popleft().result()
        finally:
            for future in pending:
                future.cancel()


def _positions(tokens, start, most):
    """How many of the `most` positions from `start` a sentence still has (positions `0..n`
    for `n` tokens): a list of tokens, an `EncodedSentence` (their word ids), or a
    `streamed_sentence.StreamedSentence` (a long line read from its file a window at a time)."""
    if isinstance(tokens, list | tuple | EncodedSentence):
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
