"""Python and TensorFlow tokenizers: documented examples and exact agreement on any Unicode."""

import sys
import unicodedata

import pytest
import tensorflow as tf
from hypothesis import given, settings
from hypothesis import strategies as st

from elmo_keras.text import _unicode_tables, tokenize_python
from elmo_keras.text.tf_tokenization import tokenize

WHITESPACE_CHARS = "".join(map(chr, _unicode_tables.WHITESPACE)) + "\u180e\u200b\ufeff"
TRICKY_CHARS = (
    WHITESPACE_CHARS
    + "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"
    + "“”‘’«»–—…€£¥©°±×÷§¶•·¿¡"
    + "éñ日本語٣٤🎉👍🏽\u0301\u0000\u00ad\u2060\U0010ffff\U000e0001"
)
SENTENCE = st.lists(
    st.one_of(st.text(), st.text(alphabet=TRICKY_CHARS), st.sampled_from(["<S>", "</S>"])),
    max_size=4,
).map("".join)
BATCH = st.lists(SENTENCE, min_size=1, max_size=8)


@pytest.mark.parametrize(
    "sentence, expected",
    [
        ("Hello, world!", ["Hello", ",", "world", "!"]),
        (
            "  The U.S. economy  grew 3.5% in 2017 .\n",
            ["The", "U", ".", "S", ".", "economy", "grew", "3", ".", "5", "%", "in", "2017", "."],
        ),
        ("don't", ["don", "'", "t"]),
        ("“Quoted” — naïve café…", ["“", "Quoted", "”", "—", "naïve", "café", "…"]),
        ("a+b=c $5 #tag @me", ["a", "+", "b", "=", "c", "$", "5", "#", "tag", "@", "me"]),
        ("snake_case x-y", ["snake", "_", "case", "x", "-", "y"]),
        ("emoji🎉ok", ["emoji", "🎉", "ok"]),
        ("日本語のテキスト。", ["日本語のテキスト", "。"]),
        ("no\u00a0break\u3000ideographic", ["no", "break", "ideographic"]),
        ("", []),
        (" \t\n ", []),
    ],
)
def test_punctuation_mode_examples(sentence, expected):
    assert tokenize_python(sentence) == expected
    out = tokenize(tf.constant([sentence])).to_list()
    assert [t.decode("utf-8") for t in out[0]] == expected


def test_whitespace_mode_is_str_split():
    sentence = " Already  tokenized ,\ttext .\u2003x\x1fy "
    assert tokenize_python(sentence, mode="whitespace") == sentence.split()
    out = tokenize(tf.constant([sentence]), mode="whitespace").to_list()[0]
    assert [t.decode() for t in out] == sentence.split()


def decode(ragged):
    return [[t.decode("utf-8") for t in row] for row in ragged.to_list()]


@settings(max_examples=150, deadline=None)
@given(BATCH)
def test_tensorflow_agrees_with_python_on_arbitrary_unicode(batch):
    tensor = tf.constant(batch, dtype=tf.string)
    for mode in ("punctuation", "whitespace"):
        expected = [tokenize_python(s, mode=mode) for s in batch]
        assert decode(tokenize(tensor, mode=mode)) == expected
        # tensorflow_text.regex_split stops at a NUL character (documented caveat).
        batch_no_nul = [s.replace("\x00", "") for s in batch]
        assert decode(
            tokenize(tf.constant(batch_no_nul, tf.string), mode=mode, use_tensorflow_text=True)
        ) == [tokenize_python(s, mode=mode) for s in batch_no_nul]
    assert [tokenize_python(s, mode="whitespace") for s in batch] == [s.split() for s in batch]


def test_tf_function_scalar_and_errors():
    fn = tf.function(tokenize, input_signature=[tf.TensorSpec([None], tf.string)])
    assert decode(fn(tf.constant(["a,b", ""]))) == [["a", ",", "b"], []]
    assert [t.decode() for t in tokenize(tf.constant("x y!")).numpy()] == ["x", "y", "!"]
    with pytest.raises(
        ValueError,
        match=r"`mode` must be one of \('whitespace', "
        r"'punctuation'\)\. Received: mode='words'",
    ):
        tokenize_python("a", mode="words")
    with pytest.raises(ValueError, match="Received: mode='words'"):
        tokenize(tf.constant(["a"]), mode="words")
    with pytest.raises(ValueError, match="`sentence` must be a str"):
        tokenize_python(["a", "b"])
    with pytest.raises(ValueError, match=r"`sentences` must be a string tensor of shape \[batch\]"):
        tokenize(tf.constant([["a"]]))


def test_tensorflow_text_imported_only_on_request():
    import elmo_keras.text.tf_tokenization as tokenizer_module

    with open(tokenizer_module.__file__, encoding="utf-8") as f:
        top_level = [line for line in f if line.startswith(("import", "from"))]
    assert not any("tensorflow_text" in line for line in top_level)


def test_whitespace_table_is_str_isspace():
    assert [c for c in range(sys.maxunicode + 1) if chr(c).isspace()] == list(
        _unicode_tables.WHITESPACE
    )


def test_punctuation_table_matches_unicodedata():
    if unicodedata.unidata_version != _unicode_tables.UNICODE_VERSION:
        pytest.skip(
            f"Python has Unicode {unicodedata.unidata_version}, the table "
            f"{_unicode_tables.UNICODE_VERSION}"
        )
    in_table = set()
    for start, end in _unicode_tables.PUNCTUATION_RANGES:
        in_table.update(range(start, end + 1))
    expected = {c for c in range(sys.maxunicode + 1) if unicodedata.category(chr(c))[0] in "PS"}
    assert in_table == expected
