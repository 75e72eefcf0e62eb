"""What `ElmoEmbedding` does around the biLM: masks (sentences, sentence boundaries), the mean
over real tokens, and the word cache of `vocab_to_cache`."""

import contextlib

import keras
import numpy as np
from keras import ops

from elmo_keras.text.char_ids import token_to_char_ids
from elmo_keras.text.tokenization import DEFAULT_TOKENIZATION_MODE
from elmo_keras.validation import check_choice

# The char CNN computes a word cache this many words at a time (bounded memory for any vocab).
CACHE_CHUNK = 4096


def masked_mean(vectors, mask):
    """Mean of `vectors` `[B, T, D]` over the positions where `mask` `[B, T]` is true.

    Padding never counts; a sentence with no token gives zeros (not NaN).
    """
    float_mask = ops.cast(mask, vectors.dtype)[:, :, None]
    total = ops.sum(vectors * float_mask, axis=1)
    count = ops.maximum(ops.sum(float_mask, axis=1), ops.cast(1.0, vectors.dtype))
    return total / count


def with_boundaries(mask):
    """A token mask `[B, T]` -> the mask `[B, T + 2]` of `<S>`, the tokens and `</S>` (true at
    the first `length + 2` positions); written with shape-agnostic ops, so that it also gives
    the spec of a symbolic mask."""
    counts = ops.cast(mask, "int32")
    ones = ops.ones_like(counts[:, :1])
    positions = ops.cumsum(ops.ones_like(ops.concatenate([ones, counts, ones], axis=1)), axis=1)
    return positions <= ops.sum(counts, axis=1, keepdims=True) + 2


def check_vocab_to_cache(vocab_to_cache):
    """`vocab_to_cache` as a list of str (at least the padding entry and one word), or None."""
    if vocab_to_cache is None:
        return None
    words = list(vocab_to_cache) if not isinstance(vocab_to_cache, str) else None
    if not words or len(words) < 2 or not all(isinstance(w, str) for w in words):
        shown = repr(vocab_to_cache)[:80]
        raise ValueError(
            "`vocab_to_cache` must be a list of at least 2 str (index 0 is padding). "
            f"Received: vocab_to_cache={shown}"
        )
    return words


def check_mix_parameters(parameters, n_layers):
    """`scalar_mix_parameters` as a list of `n_layers` floats, or None."""
    if parameters is None:
        return None
    try:
        floats = [float(w) for w in parameters]
    except (TypeError, ValueError):
        floats = None
    if floats is None or len(floats) != n_layers:
        raise ValueError(
            f"`scalar_mix_parameters` must be {n_layers} floats (the biLM's n_layers + 1). "
            f"Received: scalar_mix_parameters={parameters!r}"
        )
    return floats


def word_index(vocab_to_cache):
    """{word: its first position in `vocab_to_cache`}, entry 0 (padding) left out."""
    if vocab_to_cache is None:
        raise ValueError("`word_ids` needs `vocab_to_cache`. Received: vocab_to_cache=None")
    index = {}
    for i, word in enumerate(vocab_to_cache[1:], start=1):
        index.setdefault(word, i)
    return index


def cached_word_vectors(char_cnn, words, bilm=None):
    """The char CNN's output `[len(words), projection_dim]` (NumPy) for each word, computed
    `CACHE_CHUNK` words at a time; eagerly, also when the layer is built inside a
    `tf.function` (Keras builds a layer on its first call, which `predict` traces). The ids
    are `bilm`'s own dictionary's when it has one (`BiLM.token_dictionary`), else bytes."""
    width = char_cnn.max_characters_per_token
    dictionary = None if bilm is None else bilm.token_dictionary
    chunks = []
    with _eager_scope():
        for start in range(0, len(words), CACHE_CHUNK):
            chunk = words[start : start + CACHE_CHUNK]
            if dictionary is not None:
                ids = np.stack([dictionary.token_ids(w) for w in chunk])
            else:
                ids = np.stack([token_to_char_ids(w, width) for w in chunk])
            chunks.append(ops.convert_to_numpy(char_cnn(ids)))
    return np.concatenate(chunks, axis=0)


def _eager_scope():
    if keras.config.backend() != "tensorflow":
        return contextlib.nullcontext()
    import tensorflow as tf  # noqa: PLC0415  (this backend only)

    return tf.init_scope()


def words_to_ids(word_index, sentences):
    """Tokenized sentences -> int32 word ids `[B, T]` (0 = padding) through `word_index`
    ({word: id}); a word outside the cache is one `ValueError` naming it."""
    longest = max((len(s) for s in sentences), default=0)
    ids = np.zeros((len(sentences), longest), np.int32)
    for row, sentence in enumerate(sentences):
        for column, word in enumerate(sentence):
            found = word_index.get(word)
            if not found:
                raise ValueError(
                    f"`vocab_to_cache` has no entry for the word {word!r} (sentence {row}, "
                    f"position {column}); add it to the cache, or use another input_type"
                )
            ids[row, column] = found
    return ids


def check_input_type(input_type, vocab_to_cache, input_types):
    """`ElmoEmbedding`'s `input_type`: `"word_ids"` with a cache, else `"char_ids"` by default."""
    if input_type is None:
        input_type = "char_ids" if vocab_to_cache is None else "word_ids"
    input_type = check_choice("input_type", input_type, input_types)
    if (input_type == "word_ids") != (vocab_to_cache is not None):
        raise ValueError(
            "`input_type='word_ids'` and `vocab_to_cache` go together. Received: "
            f"input_type={input_type!r}, vocab_to_cache="
            f"{'None' if vocab_to_cache is None else 'a list'}"
        )
    return input_type


def cached_word_inputs(inputs, word_vectors):
    """`"word_ids"` `[B, T]` (0 = padding) -> the biLM's cached-vector input."""
    ids = ops.cast(inputs, "int32")
    if len(ids.shape) != 2:
        raise ValueError(
            "`ElmoEmbedding(input_type='word_ids')` expects int inputs [batch, tokens]. "
            f"Received: shape={tuple(ids.shape)}"
        )
    vectors = ops.convert_to_tensor(word_vectors)
    return {"token_vectors": vectors, "token_index": ops.where(ids > 0, ids, -1)}


def inputs_to_char_ids(inputs, input_type, tokenization_mode, bilm):
    """`ElmoEmbedding`'s input of `input_type` -> `bilm`'s character ids `[B, T, width]`
    (int32); strings through the biLM's own dictionary when it has one."""
    width, dictionary = bilm.char_cnn.input_width, bilm.token_dictionary
    if input_type != "char_ids":
        return strings_to_char_ids(
            inputs, input_type, tokenization_mode, width, dictionary=dictionary
        )
    refuse_text(inputs, width)
    char_ids = ops.cast(inputs, "int32")
    if len(char_ids.shape) != 3:
        raise ValueError(
            "`ElmoEmbedding(input_type='char_ids')` expects int inputs "
            f"[batch, tokens, {width}]. Received: shape={tuple(char_ids.shape)}"
        )
    return char_ids


def set_bilm_trainable(bilm, trainable):
    """The biLM, its two sublayers and every variable, explicitly: a biLM deserialized with
    `trainable=False` made its sublayers after that flag was set."""
    bilm.trainable = trainable
    for sublayer in (bilm.char_cnn, bilm.bilstm):
        sublayer.trainable = trainable
    for variable in bilm.weights:
        variable.trainable = trainable


def input_mask(layer, inputs):
    """An `ElmoEmbedding`'s token mask `[B, T]` for `inputs` of its `input_type`. On symbolic
    (Functional) inputs it is the mask's spec; Keras recomputes it from the real inputs."""
    symbolic = isinstance(inputs, keras.KerasTensor)
    if layer.input_type == "sentences":
        return layer.sentence_mask(inputs)
    if layer.input_type == "word_ids":
        return ops.greater(inputs if symbolic else ops.convert_to_tensor(inputs), 0)
    if layer.input_type == "tokens" and symbolic:
        return ops.not_equal(inputs, "")
    return ops.greater((inputs if symbolic else layer.to_char_ids(inputs))[:, :, 0], 0)


def refuse_text(inputs, width):
    """One line, instead of a failed cast, when text reaches a `char_ids` `ElmoEmbedding`."""
    first = inputs
    while isinstance(first, (list, tuple)) and first:
        first = first[0]
    dtype = getattr(inputs, "dtype", None)  # NumPy, tf.Tensor, KerasTensor ("string")
    name = "str" if dtype is None else getattr(dtype, "name", str(dtype))
    kind = getattr(dtype, "kind", "")
    if kind == "O" and inputs.size:
        first = inputs.flat[0]
    if isinstance(first, (str, bytes)) or kind in ("U", "S") or name == "string":
        raise ValueError(
            f"This `ElmoEmbedding` takes character ids (int [batch, tokens, {width}]), not "
            "text: make it with `input_type='sentences'` for raw sentences or "
            "`input_type='tokens'` for padded token rows, on the TensorFlow backend (e.g. "
            f"`ElmoEmbedding.from_preset(name, input_type='sentences')`). Received: dtype={name}"
        )


def strings_to_char_ids(
    inputs, input_type, tokenization_mode, width, owner="ElmoEmbedding", dictionary=None
):
    """String inputs (`input_type` `"tokens"`, `[batch, tokens]` padded with `""`, or
    `"sentences"`, `[batch]`) -> character ids `[B, T, width]`, with TensorFlow's string ops
    (in a graph and in `tf.data` too). `owner` names the layer in errors; `dictionary` (a
    `TokenDictionary`) replaces the bytes."""
    import tensorflow as tf  # noqa: PLC0415  (string inputs: TensorFlow only)

    from elmo_keras.text import tf_char_ids  # noqa: PLC0415
    from elmo_keras.text.tf_tokenization import tokenize  # noqa: PLC0415

    tokens = tf.convert_to_tensor(inputs)
    rank = 2 if input_type == "tokens" else 1
    if tokens.dtype != tf.string or tokens.shape.rank != rank:
        expected = "[batch, tokens] padded with ''" if rank == 2 else "[batch] of sentences"
        raise ValueError(
            f"`{owner}(input_type={input_type!r})` expects a string tensor {expected}. "
            f"Received: dtype={tokens.dtype.name}, shape={tuple(tokens.shape)}"
        )
    if rank == 2:
        lengths = tf.reduce_sum(tf.cast(tf.not_equal(tokens, ""), tf.int32), axis=1)
        return tf_char_ids.dense_tokens_to_char_ids(tokens, lengths, width, dictionary)
    tokens = tokenize(tokens, mode=tokenization_mode)
    return tf_char_ids.tokens_to_char_ids(tokens, width, dictionary=dictionary)


def strings_to_char_ids_numpy(inputs, input_type, tokenization_mode, width, dictionary=None):
    """The same ids with NumPy and Python alone (no TensorFlow): for the other backends.
    `inputs`: a NumPy array or (nested) list of str or UTF-8 bytes."""
    from elmo_keras.text import batch_to_char_ids, tokenize_python  # noqa: PLC0415

    def text(value):
        return value.decode("utf-8") if isinstance(value, bytes) else str(value)

    rows = np.asarray(inputs, dtype=object)
    rank = 2 if input_type == "tokens" else 1
    if rows.ndim != rank:
        expected = "[batch, tokens] padded with ''" if rank == 2 else "[batch] of sentences"
        raise ValueError(
            f"`ElmoPreprocessor(input_type={input_type!r})` expects strings {expected}. "
            f"Received: shape={rows.shape}"
        )
    if rank == 2:
        sentences = [[text(t) for t in row if text(t)] for row in rows]
    else:
        sentences = [tokenize_python(text(row), tokenization_mode) for row in rows]
    if dictionary is not None:
        return dictionary.batch_ids(sentences)
    return batch_to_char_ids(sentences, max_characters_per_token=width)


@keras.saving.register_keras_serializable(package="elmo_keras")
class _SentenceMask(keras.layers.Layer):
    """Untokenized sentences `[batch]` -> bool `[batch, tokens]`, true at each real token.

    `ElmoEmbedding(input_type="sentences")` calls it on symbolic inputs, so that a Functional
    model carries the mask as a node of its graph (the token count is known only after
    tokenization).
    """

    def __init__(self, tokenization_mode=DEFAULT_TOKENIZATION_MODE, **kwargs):
        super().__init__(**kwargs)
        self.tokenization_mode = tokenization_mode

    def call(self, sentences):
        import tensorflow as tf  # noqa: PLC0415  (string inputs: TensorFlow only)

        from elmo_keras.text.tf_tokenization import tokenize  # noqa: PLC0415

        lengths = tokenize(sentences, mode=self.tokenization_mode).row_lengths()
        return tf.sequence_mask(lengths)

    def compute_output_spec(self, sentences):
        return keras.KerasTensor((sentences.shape[0], None), dtype="bool")

    def get_config(self):
        config = super().get_config()
        config["tokenization_mode"] = self.tokenization_mode
        return config


def read_token_embeddings(vocab_file, embedding_file, width=None):
    """A bilm-tf vocabulary file and its `dump_token_embeddings` hdf5 -> `(vocab_to_cache,
    vectors)`: entry 0 the padding (a zero row), then the file's tokens and rows in order, so
    that a token's word id is bilm-tf's `TokenBatcher` id (its line + 1). The file is read as
    a weight file (`elmo_keras.weights.read_weight_arrays`): its `embedding` dataset's declared
    shape, one row of `width` values (None: any) per token, is checked before it is read."""
    from elmo_keras.text.vocabulary import Vocabulary  # noqa: PLC0415
    from elmo_keras.weights import read_weight_arrays  # noqa: PLC0415

    tokens = list(Vocabulary.load(vocab_file).tokens)
    need = f"one row per token of {vocab_file} ({len(tokens)}) needs"
    shapes = {"embedding": (len(tokens), width)}
    rows = read_weight_arrays(embedding_file, shapes, what="token embedding file", need=need)
    rows = np.asarray(rows["embedding"], np.float32)
    return ["<padding>", *tokens], np.concatenate([np.zeros_like(rows[:1]), rows])
