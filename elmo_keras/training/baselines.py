"""A unigram language model: the floor any biLM must beat (pure Python)."""

import collections
import math

from elmo_keras.training.feed.data import expand_files, iter_sentences
from elmo_keras.training.feed.tokenization import TOKENIZATION_RENAMED, no_other_arguments
from elmo_keras.validation import renamed_argument


def unigram_perplexity(train, test, vocabulary, tokenization_mode="whitespace", **kwargs):
    """Perplexity of an add-one unigram model of `train` on `test`, on the biLM's targets.

    The targets are those of the biLM's forward direction: every token (mapped to the
    vocabulary, unknown ones to `<UNK>`) and one `</S>` per line. (`tokenization=` is the
    deprecated name of `tokenization_mode`.)
    """
    tokenization_mode = renamed_argument(
        kwargs, *TOKENIZATION_RENAMED, tokenization_mode, "whitespace", "unigram_perplexity"
    )
    no_other_arguments(kwargs, "unigram_perplexity")

    def targets(pattern):
        for sentence in iter_sentences(expand_files(pattern), tokenization_mode):
            for token in sentence:
                yield token if token in vocabulary else "<UNK>"
            yield "</S>"

    counts = collections.Counter(targets(train))
    total = sum(counts.values()) + len(vocabulary)
    log_likelihood, n = 0.0, 0
    for token in targets(test):
        log_likelihood += math.log((counts.get(token, 0) + 1) / total)
        n += 1
    return math.exp(-log_likelihood / n)
