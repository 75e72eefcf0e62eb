"""A model's own character (and word) dictionary: tokens -> id rows, in NumPy (no TensorFlow).

The published bilm-tf and AllenNLP models read a token as its UTF-8 bytes
(`elmo_keras.text.char_ids`). ELMoForManyLangs' models (EFML, 44 languages) instead carry a
character dictionary (`char.dic`) and usually a word dictionary (`word.dic`), and read a token
by its code points. Their conventions, all kept here (a model built with `char_vocabulary` uses
this class wherever text becomes ids):

- A token is cut to `max_characters_per_token - 2` code points before both lookups; there is no
  lowercasing and no Unicode normalisation. Unknown characters and words get `<oov>`.
- Its characters are wrapped as `[<eow>, c0, ..., ck, <bow>, <pad>, <pad>, ...]`: EFML swaps
  the two word markers (consistently, in training too). The trained `<pad>` vector takes part
  in the char CNN's max-pool.
- The sentence boundaries are the tokens `<bos>` and `<eos>`, with their own character rows
  `[<eow>, <bos>, <bow>, <pad>, ...]` and their own word ids. A literal `<bos>` or `<eos>` token
  in a sentence gets the same rows when the cut leaves it whole (EFML does so, and its
  published vectors were made so).

As in the byte convention, each character id is the dictionary's id plus one, so that a row
starting with 0 is a padding token. With a word dictionary, each row has one more column, the
last: the word's id in `word.dic` (unshifted).
"""

import numpy as np

from elmo_keras.validation import check_int

CHAR_SPECIALS = ("<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>")
WORD_SPECIALS = ("<oov>", "<bos>", "<eos>", "<pad>")
_BOUNDARIES = ("<bos>", "<eos>")
_CACHE_SIZE = 1 << 16


def _lookup(entries, name, specials):
    """`{entry: id}` of a list of distinct strings, checked to hold `specials`."""
    if isinstance(entries, str) or not all(isinstance(e, str) for e in entries):
        raise ValueError(f"`{name}` must be a list of str (index = id). Received: {entries!r:.80}")
    lookup = {entry: i for i, entry in enumerate(entries)}
    missing = [s for s in specials if s not in lookup]
    if missing:
        raise ValueError(f"`{name}` must hold the entries {list(specials)}. Missing: {missing}")
    return lookup


class TokenDictionary:
    """Tokens -> id rows through a model's own dictionaries (ELMoForManyLangs' conventions).

    Args:
        characters: list of str. The character dictionary, entry `i` having id `i` (EFML's
            `char.dic`); must hold `<bos>`, `<eos>`, `<oov>`, `<pad>`, `<bow>`, `<eow>`.
        words: list of str or `None`. The word dictionary (`word.dic`), or `None` for a model
            without word embeddings; must hold `<oov>`, `<bos>`, `<eos>`, `<pad>`.
        max_characters_per_token: int. Character ids per token. Defaults to `50`.

    Example:
    >>> chars = ["<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>", "a"]
    >>> TokenDictionary(chars, max_characters_per_token=6).token_ids("ab").tolist()
    [6, 7, 3, 5, 4, 4]
    """

    def __init__(self, characters, words=None, max_characters_per_token=50):
        self.characters = list(characters)
        self.words = None if words is None else list(words)
        self.max_characters_per_token = check_int(
            "max_characters_per_token", max_characters_per_token, 3
        )
        self._chars = _lookup(self.characters, "char_vocabulary", CHAR_SPECIALS)
        self._words = None
        if self.words is not None:
            self._words = _lookup(self.words, "word_vocabulary", WORD_SPECIALS)
        self.width = self.max_characters_per_token + (self.words is not None)
        self._cache = {}

    def _row(self, token, cut=True):
        chars = self._chars
        if cut:  # the sentence boundaries themselves are never cut (EFML adds them after)
            token = token[: self.max_characters_per_token - 2]
        row = np.full((self.width,), chars["<pad>"] + 1, np.int32)
        inner = [token] if token in _BOUNDARIES else token
        oov = chars["<oov>"]
        row[0] = chars["<eow>"] + 1  # EFML's swapped markers: <eow> first, <bow> last
        row[1 : len(inner) + 1] = [chars.get(c, oov) + 1 for c in inner]
        row[len(inner) + 1] = chars["<bow>"] + 1
        if self._words is not None:
            row[-1] = self._words.get(token, self._words["<oov>"])
        row.flags.writeable = False
        return row

    def token_ids(self, token):
        """The int32 id row `[width]` of one `str` token (read-only, shared: copy to change)."""
        if isinstance(token, bytes):
            token = token.decode("utf-8", "replace")
        if not isinstance(token, str):
            raise ValueError(
                f"A token must be a `str`. Received: token={token!r} of type {type(token).__name__}"
            )
        row = self._cache.get(token)
        if row is None:
            if len(self._cache) >= _CACHE_SIZE:
                self._cache.clear()
            row = self._cache[token] = self._row(token)
        return row

    def boundary_ids(self):
        """int32 `[2, width]`: the rows of the sentence boundaries `<bos>` and `<eos>`."""
        return np.stack([self._row(t, cut=False) for t in _BOUNDARIES])

    def batch_ids(self, sentences, max_length=None):
        """Right-padded int32 `[len(sentences), T, width]` (padding all zeros), no boundaries."""
        longest = max((len(s) for s in sentences), default=0)
        steps = longest if max_length is None else max(int(max_length), longest)
        out = np.zeros((len(sentences), steps, self.width), np.int32)
        for i, sentence in enumerate(sentences):
            for j, token in enumerate(sentence):
                out[i, j] = self.token_ids(token)
        return out

    def distinct_token_ids(self, sentences):
        """`(token_ids [distinct, width], token_index [len(sentences), longest])`, as
        `elmo_keras.text.char_ids.distinct_token_ids` (-1 marks padding)."""
        longest = max((len(s) for s in sentences), default=0)
        rows = {}
        token_index = np.full((len(sentences), longest), -1, np.int32)
        for i, sentence in enumerate(sentences):
            token_index[i, : len(sentence)] = [rows.setdefault(t, len(rows)) for t in sentence]
        token_ids = np.zeros((len(rows), self.width), np.int32)
        for row, token in enumerate(rows):
            token_ids[row] = self.token_ids(token)
        return token_ids, token_index
