"""`tokenize_lines`: tensorflow-text's tokens, the mode checked."""

import pytest

from elmo_keras.training.feed.tokenization import tokenize_lines


def test_tokenize_lines_with_tensorflow_text():
    assert tokenize_lines(["Hello, world!"], "punctuation") == [["Hello", ",", "world", "!"]]
    assert tokenize_lines(["a  b\tc"], "whitespace") == [["a", "b", "c"]]
    with pytest.raises(ValueError, match="`tokenization_mode` must be one of"):
        tokenize_lines(["a"], "bpe")
