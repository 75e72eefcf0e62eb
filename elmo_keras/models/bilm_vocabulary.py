"""How a `BiLM` turns tokens into the id rows it reads: bilm-tf's bytes, or its own dictionary.

A biLM built with `char_vocabulary` (ELMoForManyLangs' models, `elmo_keras.efml`) reads tokens
through `elmo_keras.text.token_dictionary.TokenDictionary`; every other biLM through the byte
convention of `elmo_keras.text.char_ids`. Every place that makes ids for a biLM (`BiLMEmbedder`,
`ElmoEmbedding`, `ElmoPreprocessor` given a biLM, the sentence boundaries inside the model) asks
these functions, so the two conventions never mix.
"""

import numpy as np

from elmo_keras.text.char_ids import bos_char_ids, distinct_token_ids, eos_char_ids
from elmo_keras.text.token_dictionary import TokenDictionary


def make_dictionary(char_vocabulary, word_vocabulary, max_characters_per_token):
    """The `TokenDictionary` of a biLM's vocabularies, or `None` (bytes)."""
    if char_vocabulary is None:
        if word_vocabulary is not None:
            raise ValueError("`word_vocabulary` needs a `char_vocabulary` too.")
        return None
    return TokenDictionary(char_vocabulary, word_vocabulary, max_characters_per_token)


def boundary_ids(bilm):
    """int32 `[2, width]`: the id rows of `<S>` and `</S>` (EFML: `<bos>`, `<eos>`)."""
    if bilm.token_dictionary is not None:
        return bilm.token_dictionary.boundary_ids()
    width = bilm.max_characters_per_token
    return np.stack([bos_char_ids(width), eos_char_ids(width)])


def token_rows(bilm, sentences):
    """`(token_ids [distinct, width], token_index [batch, longest])` of token lists."""
    if bilm.token_dictionary is not None:
        return bilm.token_dictionary.distinct_token_ids(sentences)
    return distinct_token_ids(sentences, max_characters_per_token=bilm.max_characters_per_token)


def batch_ids(bilm, sentences):
    """Right-padded int32 `[batch, longest, width]` of token lists, as `BiLM` takes them."""
    rows, index = token_rows(bilm, sentences)
    rows = np.concatenate([np.zeros((1, rows.shape[1]), np.int32), rows])
    return rows[index + 1]
