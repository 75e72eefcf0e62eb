"""Word vocabulary in bilm-tf's file format (pure Python and NumPy, no TensorFlow).

The file holds one token per line, UTF-8. Files written by this package start with `<S>`, `</S>`,
`<UNK>`, then the tokens by descending frequency (the sampled softmax's log-uniform sampler
expects frequency order). A token's id is its 0-based line number. bilm-tf's `TokenBatcher` uses
id + 1 so that 0 can mean padding; this class does not.
"""

import collections
import os

import numpy as np

from elmo_keras.text.char_ids import BOS_TOKEN, EOS_TOKEN
from elmo_keras.validation import check_int, check_regular_file

UNK_TOKEN = "<UNK>"
SPECIAL_TOKENS = (BOS_TOKEN, EOS_TOKEN, UNK_TOKEN)
# A marker that the 1B Word Benchmark's vocabulary files carry; bilm-tf skips it when reading.
_SKIPPED_LINES = frozenset({"!!!MAXTERMID"})


class Vocabulary:
    """A token <-> id mapping for the word-level softmax of the biLM.

    Ids are 0-based positions in `tokens`. `<S>` and `</S>` must be present; `<UNK>` may be
    absent (as in some of bilm-tf's test vocabularies), in which case encoding an unknown token
    raises an error instead of mapping it to `<UNK>`.

    Args:
        tokens: sequence of str. The tokens, in id order, without duplicates.

    Example:

    >>> vocab = Vocabulary.build([["the", "cat", "sat"], ["the", "end"]])
    >>> vocab.tokens[:5]
    ('<S>', '</S>', '<UNK>', 'the', 'cat')
    >>> vocab.encode(["the", "dog"]).tolist()
    [3, 2]
    """

    def __init__(self, tokens):
        tokens = tuple(tokens)
        word_to_id = {}
        for i, token in enumerate(tokens):
            if not isinstance(token, str):
                raise ValueError(
                    f"`tokens` must all be str. Received: tokens[{i}]={token!r} "
                    f"of type {type(token).__name__}"
                )
            if token in word_to_id:
                raise ValueError(
                    f"`tokens` must not repeat a token. Received: {token!r} at positions "
                    f"{word_to_id[token]} and {i}"
                )
            word_to_id[token] = i
        for special in (BOS_TOKEN, EOS_TOKEN):
            if special not in word_to_id:
                raise ValueError(
                    f"`tokens` must contain the sentence-boundary token {special!r}. "
                    f"Received: {len(tokens)} tokens without it"
                )
        self._tokens = tokens
        self._word_to_id = word_to_id

    # ----------------------------------------------------------------------------- creation

    @classmethod
    def build(cls, data, min_count=1, max_size=None):
        """Counts tokens and builds a vocabulary sorted by descending frequency.

        Reads `data` once, so it can be a generator over a corpus too large for memory. The
        result starts with `<S>`, `</S>`, `<UNK>`; tokens with the same count keep the order in
        which they first occurred in `data`. Occurrences of the three special tokens in `data`
        are not counted.

        Args:
            data: iterable of tokens (str) or of sentences (iterables of str), or a mix. A str
                item is one token: split lines yourself, e.g.
                `(line.split() for line in open(path))`.
            min_count: int. Keep tokens seen at least this many times. Defaults to `1`.
            max_size: int or `None`. The largest number of entries, the three special tokens
                included (so at least 3). Defaults to `None`, no limit.

        Returns:
            A `Vocabulary`.
        """
        min_count = check_int("min_count", min_count, 1)
        max_size = check_int("max_size", max_size, len(SPECIAL_TOKENS), allow_none=True)
        counts = collections.Counter()
        for item in data:
            if isinstance(item, str):
                counts[item] += 1
            else:
                counts.update(item)
        for special in SPECIAL_TOKENS:
            counts.pop(special, None)
        # `sorted` is stable and a Counter iterates in first-occurrence order.
        ranked = sorted(counts.items(), key=lambda item: -item[1])
        words = [word for word, count in ranked if count >= min_count]
        for i, word in enumerate(words):
            if not isinstance(word, str):
                raise ValueError(
                    f"`data` must hold str tokens. Received: {word!r} of type "
                    f"{type(word).__name__} (token {i})"
                )
        if max_size is not None:
            words = words[: max_size - len(SPECIAL_TOKENS)]
        return cls(SPECIAL_TOKENS + tuple(words))

    @classmethod
    def load(cls, path):
        """Reads a vocabulary file (bilm-tf format: one token per line, UTF-8).

        Surrounding whitespace on each line is dropped, a final newline is optional, a UTF-8
        byte order mark at the start is dropped (it is not part of the first token), and the
        1B Word Benchmark's `!!!MAXTERMID` line is skipped, as bilm-tf does. A blank line, a
        token given twice or bytes that are not UTF-8 are a `ValueError` naming the file and
        the line.

        Args:
            path: str or path-like. The file.

        Returns:
            A `Vocabulary`.
        """
        check_regular_file(path, "vocabulary file", "a text file, one token a line")
        with open(os.fspath(path), "rb") as f:
            data = f.read()
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            line_number = data.count(b"\n", 0, error.start) + 1
            raise ValueError(
                f"A vocabulary file must be UTF-8 text. Received: line {line_number} of {path} "
                f"holds the byte {data[error.start : error.start + 1]!r}, which is not UTF-8"
            ) from None
        lines = text.replace("\r\n", "\n").replace("\r", "\n").split("\n")  # universal newlines
        if lines and lines[-1] == "":
            lines.pop()
        tokens, seen = [], {}
        for line_number, line in enumerate(lines, start=1):
            token = line.strip()
            if not token:
                raise ValueError(
                    f"A vocabulary file must not have blank lines. Received: line {line_number} "
                    f"of {path} is blank"
                )
            if token in _SKIPPED_LINES:
                continue
            if token in seen:
                raise ValueError(
                    f"A vocabulary file must give each token once. Received: {token!r} on lines "
                    f"{seen[token]} and {line_number} of {path}"
                )
            seen[token] = line_number
            tokens.append(token)
        return cls(tokens)

    def save(self, path):
        """Writes the vocabulary, one token per line, UTF-8 (readable by bilm-tf)."""
        for token in self._tokens:
            if token != token.strip() or "\n" in token or not token:
                raise ValueError(
                    "Tokens with surrounding whitespace, newlines or no characters cannot be "
                    f"saved one per line. Received: token={token!r}"
                )
        with open(os.fspath(path), "w", encoding="utf-8", newline="\n") as f:
            for token in self._tokens:
                f.write(token + "\n")

    # ------------------------------------------------------------------------------ queries

    @property
    def tokens(self):
        """The tokens in id order, a tuple of str."""
        return self._tokens

    @property
    def bos_id(self):
        """The id of `<S>`."""
        return self._word_to_id[BOS_TOKEN]

    @property
    def eos_id(self):
        """The id of `</S>`."""
        return self._word_to_id[EOS_TOKEN]

    @property
    def unk_id(self):
        """The id of `<UNK>`, or `None` when the vocabulary has none."""
        return self._word_to_id.get(UNK_TOKEN)

    def __len__(self):
        return len(self._tokens)

    def __contains__(self, token):
        return token in self._word_to_id

    def __iter__(self):
        return iter(self._tokens)

    def __eq__(self, other):
        return isinstance(other, Vocabulary) and self._tokens == other._tokens

    def __hash__(self):
        return hash(self._tokens)

    def __repr__(self):
        return f"Vocabulary(size={len(self)})"

    def token_to_id(self, token):
        """The id of `token`; an unknown token gets `unk_id` (an error without `<UNK>`)."""
        token_id = self._word_to_id.get(token)
        if token_id is None:
            token_id = self.unk_id
            if token_id is None:
                raise ValueError(
                    f"Token {token!r} is not in the vocabulary, which has no '<UNK>' token to "
                    f"map it to. Received: token={token!r}"
                )
        return token_id

    def id_to_token(self, token_id):
        """The token with id `token_id` (0 <= `token_id` < `len(self)`)."""
        if (
            isinstance(token_id, bool)
            or not isinstance(token_id, int | np.integer)
            or not 0 <= token_id < len(self._tokens)
        ):
            raise ValueError(
                f"`token_id` must be an integer in [0, {len(self._tokens)}). "
                f"Received: token_id={token_id!r}"
            )
        return self._tokens[int(token_id)]

    def encode(self, tokens, add_boundaries=False):
        """Maps a list of tokens to an int32 array of ids.

        Args:
            tokens: iterable of str. One sentence's tokens.
            add_boundaries: bool. Put `bos_id` first and `eos_id` last. Defaults to `False`.

        Returns:
            An int32 array of shape `[len(tokens)]` (`+ 2` with boundaries).
        """
        if isinstance(tokens, str):
            raise ValueError(
                f"`tokens` must be a list of tokens, not a str. Received: tokens={tokens!r}"
            )
        ids = [self.token_to_id(token) for token in tokens]
        if add_boundaries:
            ids = [self.bos_id, *ids, self.eos_id]
        return np.asarray(ids, dtype=np.int32)

    def decode(self, ids):
        """Maps ids back to a list of tokens."""
        return [self.id_to_token(token_id) for token_id in np.asarray(ids).reshape(-1).tolist()]
