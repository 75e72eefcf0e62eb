"""NumPy character ids: golden values computed by hand from `str.encode`."""

import numpy as np
import pytest

from elmo_keras import text
from elmo_keras.text import char_ids


def expected_ids(token, width=50):
    """Independent reference: REFERENCE.md section 1, written out directly."""
    if token == "<S>":
        body = [257]
    elif token == "</S>":
        body = [258]
    else:
        body = [b + 1 for b in token.encode("utf-8", "ignore")[: width - 2]]
    row = [259, *body, 260]
    return row + [261] * (width - len(row))


def test_constants():
    assert (text.BOS_CHAR_ID, text.EOS_CHAR_ID) == (257, 258)
    assert (text.BOW_CHAR_ID, text.EOW_CHAR_ID, text.PAD_CHAR_ID) == (259, 260, 261)
    assert text.N_CHARACTERS == 262
    assert text.MAX_CHARACTERS_PER_TOKEN == 50
    assert text.MAX_TOKEN_BYTES == 48


def test_bilm_tf_batcher_boundary_and_token_rows():
    # bilm-tf tests/test_data.py TestBatcher: [['The','first','sentence'],['Second','.']]
    # with boundaries -> (2, 5, 50); the <S> row is [259, 257, 260, 261, ...].
    bos = [259, 257, 260] + [261] * 47
    eos = [259, 258, 260] + [261] * 47
    assert text.bos_char_ids().tolist() == bos
    assert text.eos_char_ids().tolist() == eos
    assert text.token_to_char_ids("<S>").tolist() == bos
    assert text.token_to_char_ids("</S>").tolist() == eos
    ids = text.batch_to_char_ids([["The", "first", "sentence"], ["Second", "."]])
    assert ids.shape == (2, 3, 50)
    assert ids.dtype == np.int32
    the = [259, ord("T") + 1, ord("h") + 1, ord("e") + 1, 260] + [261] * 45
    assert ids[0, 0].tolist() == the
    assert ids[1, 1].tolist() == [259, ord(".") + 1, 260] + [261] * 47
    assert not ids[1, 2].any()  # padded token row is all zeros
    # With boundaries added by hand, the bilm-tf layout (2, 5, 50) comes out.
    bounded = text.batch_to_char_ids(
        [["<S>", "The", "first", "sentence", "</S>"], ["<S>", "Second", ".", "</S>"]]
    )
    assert bounded.shape == (2, 5, 50)
    assert bounded[1, 0].tolist() == bos and bounded[1, 3].tolist() == eos
    assert not bounded[1, 4].any()


@pytest.mark.parametrize(
    "token",
    ["a", "Hello", "naïve", "日本語", "emoji😀x", "\x00", "é" * 30, "€" * 20, "<S", "S>", "<s>"],
)
def test_token_golden(token):
    assert text.token_to_char_ids(token).tolist() == expected_ids(token)


def test_multibyte_bytes_by_hand():
    # "é" is C3 A9, "€" is E2 82 AC: ids are byte + 1.
    assert text.token_to_char_ids("é€")[:7].tolist() == [259, 0xC4, 0xAA, 0xE3, 0x83, 0xAD, 260]


def test_long_token_cut_mid_character():
    token = "€" * 20  # 60 bytes; 48 bytes = 16 whole characters
    assert len(token.encode()) == 60
    ids = text.token_to_char_ids(token)
    assert ids[49] == 260 and ids.shape == (50,)
    assert ids[1:49].tolist() == [b + 1 for b in token.encode()[:48]]
    token = "a" + "€" * 20  # the 48-byte cut falls inside a character: raw bytes are kept
    ids = text.token_to_char_ids(token)
    assert ids[1:49].tolist() == [b + 1 for b in token.encode()[:48]]
    # "a" + 15 whole "€" = 46 bytes, then the first two bytes (E2 82) of the 16th, then EOW.
    assert ids[47:50].tolist() == [0xE2 + 1, 0x82 + 1, 260]


def test_exactly_48_and_49_bytes():
    assert text.token_to_char_ids("x" * 48)[49] == 260
    assert text.token_to_char_ids("x" * 49).tolist() == text.token_to_char_ids("x" * 48).tolist()


def test_empty_token_and_surrogates():
    assert text.token_to_char_ids("").tolist() == [259, 260] + [261] * 48
    # Lone surrogates cannot be encoded and are dropped, like encode("utf-8", "ignore").
    assert text.token_to_char_ids("a\ud800b").tolist() == expected_ids("ab")


def test_bytes_tokens_equal_str_tokens():
    for token in ["Hello", "日本語", "<S>", "</S>", ""]:
        assert (
            text.token_to_char_ids(token.encode()).tolist()
            == text.token_to_char_ids(token).tolist()
        )


def test_other_widths():
    assert text.token_to_char_ids("abcd", max_characters_per_token=3).tolist() == [259, 98, 260]
    assert text.token_to_char_ids("<S>", 3).tolist() == [259, 257, 260]
    assert text.token_to_char_ids("abcdef", 6).tolist() == expected_ids("abcdef", 6)
    assert text.batch_to_char_ids([["ab"]], max_characters_per_token=10).shape == (1, 1, 10)


def test_char_id_table_rows_are_the_tokens_ids():
    """The training feed's table (issue 43): row `i` is token `i`'s ids (checked by hand by
    `expected_ids`), boundary tokens, long and empty tokens included; other widths too."""
    tokens = ["<S>", "</S>", "Hello", "caf\u00e9", "x" * 60, "", "a\ud800b"]
    table = char_ids.char_id_table(tokens)
    assert table.shape == (7, 50) and table.dtype == np.int32
    assert table[0].tolist() == [259, 257, 260] + [261] * 47
    assert table[1].tolist() == [259, 258, 260] + [261] * 47
    for row, token in zip(table[2:], ["Hello", "caf\u00e9", "x" * 48, "", "ab"], strict=True):
        assert row.tolist() == expected_ids(token)
    assert char_ids.char_id_table(["abcdef"], 6).tolist() == [expected_ids("abcdef", 6)]
    assert char_ids.char_id_table([]).shape == (0, 50)
    with pytest.raises(ValueError, match="A token must be a `str`"):
        char_ids.char_id_table(["a", 3])


def test_returned_arrays_are_private_copies():
    first = text.token_to_char_ids("cache")
    first[:] = 0
    assert text.token_to_char_ids("cache").tolist() == expected_ids("cache")
    batch = text.batch_to_char_ids([["cache"]])
    batch[:] = 0
    assert text.batch_to_char_ids([["cache"]])[0, 0].tolist() == expected_ids("cache")


def test_batch_padding_and_max_length():
    ids = text.batch_to_char_ids([["a", "b"], [], ["c"]], max_length=4)
    assert ids.shape == (3, 4, 50)
    assert not ids[0, 2:].any() and not ids[1].any() and not ids[2, 1:].any()
    assert ids[2, 0].tolist() == expected_ids("c")
    assert text.batch_to_char_ids([]).shape == (0, 0, 50)
    assert text.batch_to_char_ids([[], []]).shape == (2, 0, 50)
    # Tuples and generators of tokens are accepted.
    assert text.batch_to_char_ids(t for t in [("a", "b")]).shape == (1, 2, 50)


def test_errors():
    with pytest.raises(
        ValueError,
        match=r"`max_characters_per_token` must be an integer >= 3\. "
        r"Received: max_characters_per_token=2",
    ):
        text.token_to_char_ids("a", max_characters_per_token=2)
    with pytest.raises(ValueError, match="Received: max_characters_per_token=True"):
        text.batch_to_char_ids([["a"]], max_characters_per_token=True)
    with pytest.raises(
        ValueError,
        match=r"Sentence 1 has 3 tokens, more than `max_length`\. "
        r"Received: max_length=2",
    ):
        text.batch_to_char_ids([["a"], ["a", "b", "c"]], max_length=2)
    with pytest.raises(ValueError, match="`max_length` must be a non-negative integer"):
        text.batch_to_char_ids([["a"]], max_length=-1)
    with pytest.raises(ValueError, match=r"Each sentence must be a list of tokens, not a string"):
        text.batch_to_char_ids(["a sentence"])
    with pytest.raises(ValueError, match="`sentences` must be a list of sentences"):
        text.batch_to_char_ids("a sentence")
    with pytest.raises(ValueError, match="A token must be a `str`"):
        text.batch_to_char_ids([["a", 3]])
    with pytest.raises(ValueError, match="A token must be a `str`"):
        text.token_to_char_ids(None)


def test_char_ids_module_does_not_import_tensorflow():
    source = char_ids.__file__
    with open(source, encoding="utf-8") as f:
        code = f.read()
    assert "import tensorflow" not in code and "import keras" not in code
