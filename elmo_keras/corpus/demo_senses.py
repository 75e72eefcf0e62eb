"""Hand-written sentences for a polysemous word in each of two senses (the demo's and the
polysemy study's test set).

`SENSES[word][sense]` is a list of six whitespace-tokenized sentences; `word` occurs once in each,
as its own token. Written for this package; no MR sentences (the downstream test set) are used.
"""

import numpy as np

SENSES = {
    "bank": {
        "money": [
            "She went to the bank to open a savings account .",
            "The bank raised its interest rates again this year .",
            "He asked the bank for a loan to buy the house .",
            "The central bank printed more money during the crisis .",
            "My bank charges a fee for every transfer .",
            "Thieves robbed the bank and escaped with the cash .",
        ],
        "river": [
            "They sat on the bank of the river and watched the boats .",
            "The river overflowed its bank after the heavy rain .",
            "Reeds grew thickly along the muddy bank of the stream .",
            "We pulled the canoe up onto the grassy bank .",
            "The army camped on the south bank of the river .",
            "Fishermen lined the bank at dawn .",
        ],
    },
    "play": {
        "theatre": [
            "The play opened at the theatre last night to great reviews .",
            "Shakespeare wrote the play in 1599 .",
            "The actors rehearsed the play for six weeks .",
            "She bought two tickets for the new play .",
            "The school staged a play about the war .",
            "Critics called the play his finest drama .",
        ],
        "game": [
            "The children like to play football in the park .",
            "He will play for the national team next season .",
            "Let us play a game of chess after dinner .",
            "They play tennis every Sunday morning .",
            "She learned to play the piano as a child .",
            "The band will play three songs at the festival .",
        ],
    },
    "present": {
        "gift": [
            "He wrapped the birthday present in red paper .",
            "She gave her mother a present for Christmas .",
            "The present was a small wooden box .",
            "Thank you for the lovely present .",
            "Each guest brought a present for the bride .",
            "The children opened every present under the tree .",
        ],
        "now": [
            "At present the museum is closed for repairs .",
            "The present situation is worse than last year .",
            "Few members were present at the meeting .",
            "The present king succeeded his father in 1910 .",
            "Oxygen is present in the atmosphere .",
            "The present building dates from the 18th century .",
        ],
    },
    "read": {
        "present_tense": [
            "I read the newspaper every morning .",
            "Children who read often learn faster .",
            "Please read the instructions before you start .",
            "They read books to their children at night .",
            "Can you read this handwriting ?",
            "Most students read the novel in class .",
        ],
        "past_tense": [
            "Yesterday I read the whole report in one sitting .",
            "She read the letter twice and then burned it .",
            "He had read the book before he saw the film .",
            "Last year they read every novel by Dickens .",
            "The judge read the verdict aloud to the court .",
            "We read about the battle in the newspaper in 1916 .",
        ],
    },
}


def labelled_sentences(senses):
    """`(sentences, labels)`: a word's sentences (`SENSES[word]`), sense after sense, and the
    sense of each."""
    sentences = [sentence for group in senses.values() for sentence in group]
    labels = [sense for sense, group in senses.items() for _ in group]
    return sentences, labels


def normalize(x):
    """Rows of `x` scaled to unit length (zero rows stay zero)."""
    return x / np.maximum(np.linalg.norm(x, axis=-1, keepdims=True), 1e-12)


def sense_statistics(vectors, senses):
    """Per layer: mean cosine within senses, across senses, and 1-NN sense accuracy.

    Args:
        vectors: float array `[n, n_layers, dim]`: the word's vector in each of `n` sentences.
        senses: `n` sense labels.

    Returns:
        One dict per layer: `within` (mean cosine over pairs of the same sense), `across` (over
        pairs of different senses), `gap` (their difference) and `nn_accuracy` (leave-one-out
        nearest-neighbour sense accuracy; `None` where all vectors are equal, as in layer 0).
    """
    senses = np.asarray(senses)
    same = senses[:, None] == senses[None, :]
    off_diagonal = ~np.eye(len(senses), dtype=bool)
    stats = []
    for layer in range(vectors.shape[1]):
        v = normalize(vectors[:, layer])
        cos = v @ v.T
        within = float(cos[same & off_diagonal].mean())
        across = float(cos[~same].mean())
        if np.ptp(vectors[:, layer], axis=0).max() <= 1e-6 * np.abs(vectors[:, layer]).max():
            accuracy = None  # every occurrence has the same vector (layer 0): no neighbour
        else:
            masked = np.where(off_diagonal, cos, -np.inf)
            accuracy = float(np.mean(senses[np.argmax(masked, axis=1)] == senses))
        stats.append(
            {"within": within, "across": across, "gap": within - across, "nn_accuracy": accuracy}
        )
    return stats
