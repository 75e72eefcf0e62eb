"""The tokens of a `LongLine` for `elmo_keras.training.feed.windows.WindowPacker`, streamed a piece
at a time in both directions: `StreamedSentence`, and `_Cursor`, its window over a token stream.
"""

import collections
import itertools

from elmo_keras.training.feed.tokenization import tokenize_lines


class _Cursor:
    """The tokens of an iterator of token lists, by index, holding only those from the lowest
    index still wanted on (`lo`: indices only move forward) to the highest asked for."""

    def __init__(self, token_lists):
        self.source = token_lists
        self.tokens = collections.deque()
        self.first = 0  # the index of `tokens[0]`
        self.count = None  # the number of tokens, once the source is exhausted

    def _advance(self, lo, index):
        """Reads until token `index` is held (or the source ends), forgetting those below `lo`."""
        self._drop(lo)
        while self.count is None and self.first + len(self.tokens) <= index:
            tokens = next(self.source, None)
            if tokens is None:
                self.count = self.first + len(self.tokens)
            elif not self.tokens and self.first + len(tokens) <= lo:
                self.first += len(tokens)  # skipped (a resumed run), never held
            else:
                self.tokens.extend(tokens)
                self._drop(lo)

    def _drop(self, lo):
        while self.tokens and self.first < lo:
            self.tokens.popleft()
            self.first += 1

    def get(self, lo, hi):
        """Tokens `lo..hi-1`, those that exist."""
        self._advance(lo, hi - 1)
        return list(itertools.islice(self.tokens, 0, max(0, hi - self.first)))

    def available(self, lo, index):
        """Whether token `index` exists."""
        self._advance(lo, index)
        return self.count is None or index < self.count


class StreamedSentence:
    """The tokens of a `LongLine` for `elmo_keras.training.feed.windows.WindowPacker`, a window at a
    time: the packer asks how many positions are left (`positions`) and for the tokens of
    positions `[start, stop)` in each direction (`window`), always moving forward. Memory holds
    about one piece of the line per direction, however long it is."""

    def __init__(self, line, tokenization_mode):
        self.line = line
        self.tokenization_mode = tokenization_mode
        self._end = None
        self._asked = 0  # the start of the last `positions` call
        self._forward = self._cursor(backward=False)
        self._backward = None  # opened at the first window

    def _token_lists(self, backward=False):
        if self._end is None:
            self._end = self.line.end()
        pieces = self.line.pieces(self.line.offset, self._end, backward)
        for piece in pieces:
            tokens = tokenize_lines([piece], self.tokenization_mode)[0]
            yield tokens[::-1] if backward else tokens

    def _cursor(self, backward):
        return _Cursor(self._token_lists(backward))

    def __iter__(self):
        """All its tokens, in order, read afresh from the file (a piece at a time)."""
        for tokens in self._token_lists():
            yield from tokens

    def positions(self, start, most):
        """How many of the `most` positions from `start` the sentence still has (its `n`
        tokens and the end marker: positions `0..n`)."""
        if most <= 0:
            return 0
        # The window asked about last may not be packed yet (`WindowPacker.iter_positions`
        # plans a whole batch first): its tokens stay; those before it are forgotten.
        lo, self._asked = max(self._asked - 1, 0), start
        last = start + most - 1  # position `p` needs token `p - 1`
        if self._forward.available(lo, last - 1):
            return most
        return max(0, self._forward.count + 1 - start)

    def window(self, start, stop):
        """`(forward, backward)`: for each direction the tokens at positions `[start, stop)`'s
        inputs (from position 1 on) and targets (to position `n - 1`): the token lists
        `tokens[start - 1 : stop]` of that direction, clipped to the sentence."""
        if self._backward is None:
            self._backward = self._cursor(backward=True)
        lo = max(start - 1, 0)
        return self._forward.get(lo, stop), self._backward.get(lo, stop)
