"""Fuzzing both embedders and their `sentences` input (issue 12, the fault suite).

`BiLMEmbedder` (Keras) and `OnnxEmbedder` (ONNX Runtime) get arbitrary token lists: astral,
combining, control and surrogate characters, empty and 3,000-character tokens, UTF-8 `bytes`
tokens, the boundary tokens `<S>`/`</S>`, empty sentences, lists, tuples and generators.
Properties: no exception, every value finite, the shapes right, a sentence alone equals the
same sentence inside the batch, Keras equals ONNX; bad inputs (a string where tokens belong, a
token that is not a string) raise the same `ValueError` in both clients.

Profiles: `elmo-fuzz` (200 examples a test, the default run) and `elmo-fuzz-slow` (10,000 a
test), chosen with `ELMO_KERAS_FUZZ=slow`:

    ELMO_KERAS_FUZZ=slow python -m pytest tests/runtime/test_reliability_fuzz.py
"""

import os

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from elmo_keras.models.bilm_embedder import BiLMEmbedder
from elmo_keras.runtime import OnnxEmbedder
from elmo_keras.text.text_files import split_lines

_COMMON = dict(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)
settings.register_profile("elmo-fuzz", max_examples=200, **_COMMON)
settings.register_profile("elmo-fuzz-slow", max_examples=10_000, **_COMMON)
PROFILE = "elmo-fuzz-slow" if os.environ.get("ELMO_KERAS_FUZZ") == "slow" else "elmo-fuzz"
fuzz_settings = settings.get_profile(PROFILE)

# The same sentence alone and inside a padded batch; Keras and ONNX Runtime (issue 12).
ALONE_ATOL = 1e-6
CLIENTS_ATOL = 1e-5

_characters = st.one_of(
    st.characters(),  # any code point but surrogates: astral planes included
    st.characters(categories=["Mn", "Me", "Cc", "Cf", "Zs", "Zl", "Zp", "Co"]),
    st.characters(categories=["Cs"]),  # lone surrogates: not encodable, dropped by the ids
    st.characters(min_codepoint=0x10000),
)
_short = st.text(_characters, max_size=12)
tokens = st.one_of(
    _short,
    st.just(""),
    st.sampled_from(["<S>", "</S>", "\x00", "\u0301", "\U0001f600", "e\u0301"]),
    st.builds(lambda text, n: (text or "x") * n, _short, st.integers(20, 3000)),
    st.binary(max_size=60),  # a token given as its UTF-8 bytes (any bytes)
)
sentence = st.lists(tokens, max_size=12)
batches = st.lists(sentence, max_size=8)


@pytest.fixture(scope="module")
def clients(keras_bilm, onnx_model):
    return BiLMEmbedder(keras_bilm, batch_size=3), OnnxEmbedder(onnx_model, batch_size=3)


def _check_shapes_and_finite(sentences, results):
    assert len(results) == len(sentences)
    for tokens_, layers in zip(sentences, results, strict=True):
        assert layers.shape == (3, len(tokens_), 32)
        assert layers.dtype == np.float32
        assert np.isfinite(layers).all()


@fuzz_settings
@given(sentences=batches, pick=st.integers(min_value=0), form=st.sampled_from(["list", "gen"]))
def test_any_tokens_give_finite_equal_vectors_in_both_clients(clients, sentences, pick, form):
    keras_client, onnx_client = clients
    given_as = (tuple(s) for s in sentences) if form == "gen" else sentences
    keras_out = keras_client.embed(given_as)
    onnx_out = onnx_client.embed([tuple(s) for s in sentences])
    _check_shapes_and_finite(sentences, keras_out)
    _check_shapes_and_finite(sentences, onnx_out)
    for a, b in zip(keras_out, onnx_out, strict=True):
        np.testing.assert_allclose(b, a, atol=CLIENTS_ATOL, rtol=0)
    if sentences:  # one sentence, alone, equals itself inside the padded batch
        i = pick % len(sentences)
        for client, together in ((keras_client, keras_out), (onnx_client, onnx_out)):
            (alone,) = client.embed([sentences[i]])
            np.testing.assert_allclose(together[i], alone, atol=ALONE_ATOL, rtol=0)


_not_tokens = st.one_of(
    st.integers(),
    st.floats(allow_nan=True),
    st.none(),
    st.lists(st.text(max_size=3), max_size=2),
    st.just(object()),
)


@st.composite
def bad_inputs(draw):
    """A valid batch with one fault: a bare string, a string sentence, a non-string token."""
    sentences = draw(st.lists(st.lists(_short, max_size=4), min_size=1, max_size=4))
    kind = draw(st.sampled_from(["whole", "sentence", "token"]))
    if kind == "whole":
        return draw(st.one_of(st.text(max_size=20), st.binary(max_size=20)))
    i = draw(st.integers(0, len(sentences) - 1))
    if kind == "sentence":
        sentences[i] = draw(st.one_of(st.text(max_size=20), st.binary(max_size=20)))
    else:
        position = draw(st.integers(0, len(sentences[i])))
        sentences[i] = [*sentences[i][:position], draw(_not_tokens), *sentences[i][position:]]
    return sentences


@fuzz_settings
@given(bad=bad_inputs())
def test_bad_inputs_raise_the_same_valueerror_in_both_clients(clients, bad):
    messages = []
    for client in clients:
        with pytest.raises(ValueError) as error:
            client.embed(bad)
        messages.append(str(error.value))
    assert messages[0] == messages[1]
    assert "`sentences" in messages[0]


_line_characters = st.one_of(  # anything but "\n", and often what str.splitlines() splits at
    st.characters(exclude_characters="\n"),
    st.sampled_from("\r\v\f\x1c\x1d\x1e\x85\u2028\u2029 \t\ufeff"),
)


@fuzz_settings
@given(lines=st.lists(st.text(_line_characters, max_size=20)))
def test_the_dataset_index_is_always_the_line_number(lines):
    # Reference: the file is the lines joined by "\n" (one may end in "\r", part of the end).
    text = "".join(line + "\n" for line in lines)
    expected = [line.removesuffix("\r") for line in lines]
    assert split_lines(text) == expected
    if lines and lines[-1]:
        assert split_lines(text[:-1]) == expected  # no final newline: the same lines


def test_both_clients_take_the_same_inputs(clients):
    # Issue 12, D7 and "API inputs" point 4: what a generator, a tuple or a list of token
    # sequences gives, and the three inputs that are refused, the same in both clients.
    sentences = [["Hello", "world"], [], ["Hi"]]
    for client in clients:
        expected = client.embed(sentences)
        for form in ((tuple(s) for s in sentences), tuple(map(tuple, sentences))):
            for a, b in zip(client.embed(form), expected, strict=True):
                np.testing.assert_array_equal(a, b)
        with pytest.raises(ValueError, match="received a single string"):
            client.embed("hello world")
        with pytest.raises(ValueError, match=r"`sentences\[0\]` must be a sequence of tokens"):
            client.embed(["hello world"])
        with pytest.raises(ValueError, match=r"`sentences\[1\]\[0\]` must be a token, a `str`"):
            client.embed([["a"], [7]])
