"""`WindowPacker` materializing by gathers, in worker threads (issue 43, point 2): the batches
are those of the per-token packing it replaced, whatever the number of workers."""

import threading

import numpy as np
import pytest

from elmo_keras.text.char_ids import BOS_TOKEN, EOS_TOKEN, token_to_char_ids
from elmo_keras.text.vocabulary import Vocabulary
from elmo_keras.training.feed import char_table, data, long_line
from elmo_keras.training.feed.data import SentenceStream, build_vocabulary
from elmo_keras.training.feed.windows import WindowPacker, _window_tokens, ordered_map

_EXTRA = [
    ["caf\u00e9", "\u65e5\u672c\u8a9e", "na\u00efve", "\U0001f600", "a"],
    ["x" * 60, "\u00e9" * 30, "y" * 48, "z" * 49],  # cut to 48 bytes (mid-character too)
    [BOS_TOKEN, "the", EOS_TOKEN, "<UNK>", "unseen-word", BOS_TOKEN],
    ["single"],
]


def _reference_batches(packer, skip=0):
    """The packing before issue 43 (one token at a time), as an independent reference: per
    row, the tokens of each direction's inputs and targets, then one row of ids per token."""
    vocab, c = packer.vocabulary, packer.max_characters_per_token
    word_ids = {token: i for i, token in enumerate(vocab.tokens)}
    for index, rows in enumerate(packer.iter_positions()):
        if index < skip:
            continue
        b, t = packer.batch_size, packer.unroll_steps
        out = {k: np.zeros((b, t, c), np.int32) for k in ("fw_c", "bw_c")}
        out.update({k: np.zeros((b, t), np.int32) for k in ("fw_t", "bw_t")})
        for i, segments in enumerate(rows):
            fw_in, fw_out, bw_in, bw_out = [], [], [], []
            for state, start, stop in segments:
                forward, backward = _window_tokens(state[0], start, stop)
                k = stop - start
                for tokens, inputs, targets, first, last in (
                    (forward, fw_in, fw_out, BOS_TOKEN, vocab.eos_id),
                    (backward, bw_in, bw_out, EOS_TOKEN, vocab.bos_id),
                ):
                    inputs += [first, *tokens[: k - 1]] if start == 0 else tokens[:k]
                    following = (tokens if start == 0 else tokens[1:])[:k]
                    targets += [word_ids.get(w, vocab.unk_id) for w in following]
                    targets += [last] * (k - len(following))
            for j, token in enumerate(fw_in):
                out["fw_c"][i, j] = token_to_char_ids(token, c)
            for j, token in enumerate(reversed(bw_in)):
                out["bw_c"][i, j] = token_to_char_ids(token, c)
            out["fw_t"][i, : len(fw_out)] = fw_out
            out["bw_t"][i, : len(bw_out)] = bw_out[::-1]
        yield [out["fw_c"], out["bw_c"], out["fw_t"], out["bw_t"]]


def _arrays(batches):
    keys = ("forward_char_ids", "backward_char_ids", "forward_targets", "backward_targets")
    return [[batch[k] for k in keys] for batch in batches]


def _assert_same(batches, expected):
    assert len(batches) == len(expected) > 0
    for got, want in zip(batches, expected, strict=True):
        for a, b in zip(got, want, strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_array_equal(a, b)


@pytest.fixture
def text_file(tmp_path, train_text):
    """The bilm-tf training text, with unicode, long words, literal boundary tokens and a line
    longer than `LONG_LINE_BYTES` (streamed from its file) added."""
    lines = open(train_text, encoding="utf-8").read().splitlines()[:150]
    lines[3:3] = [" ".join(s) for s in _EXTRA]
    lines.insert(40, " ".join(["caf\u00e9 the \u00e9t\u00e9 of"] * 120))  # > 300 bytes
    path = tmp_path / "text.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


@pytest.mark.parametrize("workers", [0, 2])
def test_batches_are_those_of_the_per_token_packing(text_file, monkeypatch, workers):
    """Every array byte for byte as the packing before issue 43, over two shuffled epochs:
    words outside the vocabulary (its 60 most frequent words), unicode, words cut to 48 bytes,
    `<S>`/`</S>` in the text, a streamed long line, resumed with `skip`, and with the table of
    words outside the vocabulary renewed every few words."""
    monkeypatch.setattr(long_line, "LONG_LINE_BYTES", 300)
    monkeypatch.setattr(long_line, "_PIECE_BYTES", 64)
    monkeypatch.setattr(char_table, "_OOV_ROWS", 7)
    vocab = build_vocabulary(str(text_file), max_size=60)

    def packer():
        stream = SentenceStream(str(text_file), shuffle=True, seed=3, epochs=2)
        return WindowPacker(stream, vocab, batch_size=6, unroll_steps=9, workers=workers)

    kinds = {type(s).__name__ for s in SentenceStream(str(text_file), shuffle=False, epochs=1)}
    assert kinds == {"list", "StreamedSentence"}
    expected = list(_reference_batches(packer()))
    _assert_same(_arrays(packer().batches()), expected)
    _assert_same(_arrays(packer().batches(skip=37)), expected[37:])


def test_same_batches_and_epochs_whatever_the_workers(train_text, train_vocab):
    """Deterministic: 0, 1 and 3 worker threads give the same batches in the same order, and
    `epoch` read after each batch is that batch's (the planner runs ahead of it)."""
    results = []
    for workers in (0, 1, 3):
        stream = SentenceStream(train_text, shuffle=True, seed=1, epochs=3)
        packer = WindowPacker(stream, train_vocab, 4, 5, workers=workers)
        epochs, batches = [], []
        for batch in packer.batches(skip=1):
            batches.append(batch)
            epochs.append(packer.epoch)
        results.append((_arrays(batches), epochs))
    (reference, epochs), *others = results
    assert epochs[0] == 0 and epochs[-1] == 2 and epochs == sorted(epochs)
    for batches, other_epochs in others:
        _assert_same(batches, reference)
        assert other_epochs == epochs


def _window_threads():
    return [t for t in threading.enumerate() if t.name.startswith("elmo-keras-windows")]


def test_errors_propagate_as_they_are_and_threads_end(monkeypatch):
    """A word outside a vocabulary without `<UNK>` (the planner) and a failure in a worker
    thread reach the caller as the error itself; closing the batches early or after an error
    leaves no thread behind (each join bounded)."""
    vocab = Vocabulary(["<S>", "</S>", "a", "b"])
    sentences = [["a", "b"]] * 40 + [["a", "zzz"]]
    batches = WindowPacker(sentences, vocab, 2, 3, workers=2).batches()
    with pytest.raises(ValueError, match=r"^Token 'zzz' is not in the vocabulary"):
        list(batches)

    endless = WindowPacker(iter(lambda: ["a", "b"], None), vocab, 2, 3, workers=3)
    batches = endless.batches()
    assert next(batches)["forward_targets"].shape == (2, 3)
    batches.close()

    def fail(*args):
        raise OSError("worker failed")

    monkeypatch.setattr(char_table.CharTable, "gather", fail)
    with pytest.raises(OSError, match="^worker failed$"):
        list(WindowPacker([["a"]] * 30, vocab, 2, 3, workers=2))
    for thread in _window_threads():
        thread.join(timeout=10)
    assert not _window_threads()


def test_ordered_map_keeps_order_and_bounds_what_runs_ahead():
    started = []

    def items():
        for i in range(100):
            started.append(i)
            yield i

    results = ordered_map(lambda x: x * x, items(), workers=3, ahead=4)
    assert [next(results) for _ in range(10)] == [i * i for i in range(10)]
    assert len(started) <= 10 + 4 + 1
    results.close()
    assert list(ordered_map(str, range(5), workers=0)) == ["0", "1", "2", "3", "4"]


@pytest.mark.parametrize("workers", [0, 2])
def test_sentences_encoded_in_worker_processes_give_the_same_batches(
    text_file, monkeypatch, workers
):
    """`SentenceStream(vocabulary=...)`: lines tokenized and looked up as word ids in chunks
    (by `workers` processes, spawned), long lines streamed in their place: the batches and the
    epochs are those of the token lists, over two shuffled epochs and resumed with `skip`."""
    monkeypatch.setattr(long_line, "LONG_LINE_BYTES", 300)
    monkeypatch.setattr(long_line, "_PIECE_BYTES", 64)
    monkeypatch.setattr(data, "_LINES_PER_CHUNK", 16)  # several chunks an epoch
    monkeypatch.setattr(data, "keras_backend", lambda: "jax")  # workers without TensorFlow
    vocab = build_vocabulary(str(text_file), max_size=60)

    def batches(skip=0, **kwargs):
        stream = SentenceStream(str(text_file), shuffle=True, seed=3, epochs=2, **kwargs)
        packer = WindowPacker(stream, vocab, batch_size=6, unroll_steps=9, workers=0)
        arrays = []
        for batch in packer.batches(skip=skip):
            arrays.append([*_arrays([batch])[0], np.int32(packer.epoch)])
        return arrays

    kinds = {
        type(s).__name__
        for s in SentenceStream(str(text_file), shuffle=False, epochs=1, vocabulary=vocab)
    }
    assert kinds == {"EncodedSentence", "StreamedSentence"}
    expected = batches()
    assert expected[0][-1] == 0 and expected[-1][-1] == 1
    _assert_same(batches(vocabulary=vocab, workers=workers), expected)
    _assert_same(batches(skip=37, vocabulary=vocab, workers=workers), expected[37:])


def test_worker_processes_raise_errors_and_end(train_text, train_vocab, monkeypatch):
    """A chunk that fails in a worker process is raised here as its error; closing the stream
    early, or after the error, leaves no worker process behind."""
    import multiprocessing

    from elmo_keras.training.feed.encoded_sentence import encoded_sentences, encoding_pool

    pool = encoding_pool(train_vocab, 2, "jax")
    try:
        sentences = encoded_sentences(
            iter([["a b"], [None]]), "whitespace", train_vocab, pool, "jax"
        )
        assert len(next(sentences)) == 2
        with pytest.raises(ValueError, match="^`sentence` must be a str. Received: sentence=None"):
            next(sentences)
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    monkeypatch.setattr(data, "keras_backend", lambda: "jax")
    stream = iter(SentenceStream(train_text, epochs=None, vocabulary=train_vocab, workers=2))
    assert len(next(stream)) > 0
    stream.close()
    assert not multiprocessing.active_children()
