"""Tokens -> rows of one character-id table and word ids, for `windows.WindowPacker`.

A vocabulary's tokens are the first rows of the table (row = word id), then one row of zeros
(padding), built once per vocabulary (`elmo_keras.text.char_ids.char_id_table`, cached). Tokens
outside the vocabulary get rows of their own in a second, growing table (their word id is
`<UNK>`'s, their character ids their own, as `token_to_char_ids` gives them); a batch's character
ids are then one gather (`CharTable.gather`).
"""

import functools
import itertools

import numpy as np

from elmo_keras.text.char_ids import char_id_table, token_to_char_ids

_OOV_ROWS = 500_000  # rows of tokens outside the vocabulary kept at most (then a fresh table)


@functools.lru_cache(maxsize=2)
def _vocabulary_table(vocabulary, max_characters_per_token):
    """The read-only table `[len(vocabulary) + 1, C]` (the last row: padding) and word -> id."""
    table = np.zeros((len(vocabulary) + 1, max_characters_per_token), np.int32)
    table[:-1] = char_id_table(vocabulary.tokens, max_characters_per_token)
    table.flags.writeable = False
    return table, {token: i for i, token in enumerate(vocabulary.tokens)}


class CharTable:
    """Maps tokens to their character-id rows and word ids; gathers rows into batches.

    Rows `0 .. V - 1` are the vocabulary's tokens (row = word id), row `V` (`padding`) is all
    zeros, and rows from `V + 1` on are tokens outside the vocabulary (`extra` holds them; it is
    replaced, never rewritten, when it grows or is renewed, so a batch being materialized in
    another thread keeps the one it was planned with).

    Args:
        vocabulary: `Vocabulary`.
        max_characters_per_token: int.
    """

    def __init__(self, vocabulary, max_characters_per_token):
        self.max_characters_per_token = max_characters_per_token
        self.table, self._word_ids = _vocabulary_table(vocabulary, max_characters_per_token)
        self.padding = len(vocabulary)
        self.unk = vocabulary.unk_id
        self.extra = np.zeros((0, max_characters_per_token), np.int32)
        self._extra_rows = {}  # token -> its row of `extra`
        self.generation = 0

    def encode(self, tokens, before=(), after=()):
        """`[2, n]` int32: each token's table row and its word id, after the word ids `before`
        and before the word ids `after` (sentence boundaries: their row is their id)."""
        count = len(tokens)
        ids = np.fromiter(map(self._word_ids.get, tokens, itertools.repeat(-1, count)), np.int32)
        missing = np.flatnonzero(ids < 0).tolist()
        return self._encoded(ids, {i: tokens[i] for i in missing}, before, after)

    def encode_ids(self, sentence, before=(), after=()):
        """`encode` of an `encoded_sentence.EncodedSentence` (word ids looked up already)."""
        return self._encoded(sentence.ids, sentence.outside, before, after)

    def _encoded(self, ids, outside, before, after):
        first, count = len(before), len(ids)
        out = np.empty((2, first + count + len(after)), np.int32)
        out[0, first : first + count] = ids
        out[0, :first], out[0, first + count :] = before, after
        out[1] = out[0]
        if outside:
            if self.unk is None:
                token = next(iter(outside.values()))
                raise ValueError(f"Token {token!r} is not in the vocabulary, which has no '<UNK>'.")
            at = np.fromiter(outside, np.int64, len(outside)) + first
            out[1, at] = self.unk
            out[0, at] = [self._extra_row(token) for token in outside.values()]
        return out

    def renew_if_full(self):
        """Starts a fresh table of tokens outside the vocabulary once it holds `_OOV_ROWS` (the
        packer calls it between batches, so rows of one batch come from one table; rows made
        before are then stale: `generation` says which table a row belongs to)."""
        if len(self._extra_rows) >= _OOV_ROWS:
            self._extra_rows = {}
            self.extra = np.zeros((0, self.max_characters_per_token), np.int32)
            self.generation += 1

    def _extra_row(self, token):
        row = self._extra_rows.get(token)
        if row is not None:
            return row
        count = len(self._extra_rows)
        if count == len(self.extra):  # grown into a new array, the old one left as it is
            grown = np.zeros((max(1024, 2 * count), self.max_characters_per_token), np.int32)
            grown[:count] = self.extra[:count]
            self.extra = grown
        self.extra[count] = token_to_char_ids(token, self.max_characters_per_token)
        row = self._extra_rows[token] = self.padding + 1 + count
        return row

    def gather(self, rows, extra):
        """The character ids `[*rows.shape, C]` of table rows `rows` (`extra`: the table of
        tokens outside the vocabulary that `rows` was made with)."""
        outside = rows > self.padding
        chars = np.take(self.table, np.minimum(rows, self.padding), axis=0)
        if outside.any():
            chars[outside] = extra[rows[outside] - self.padding - 1]
        return chars
