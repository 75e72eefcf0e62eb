"""The demo's 1-NN sense accuracy (`elmo-keras demo`) with each half of the LSTM vectors apart.

    python experiments/mini_en_v2/sense_halves.py MODEL_FOLDER [MODEL_FOLDER ...]

A biLM layer's vector is `[forward ; backward]`: the forward half has read the words before the
target word, the backward half the words after it. For each of the demo's words this prints the
1-NN accuracy (12 sentences, 6 per sense, chance 50%) of LSTM 1 and LSTM 2 on the whole vector
(the demo's number), on the forward half and on the backward half.
"""

import sys

from elmo_keras.cli.demo import word_vectors
from elmo_keras.corpus.demo_senses import SENSES, labelled_sentences, sense_statistics
from elmo_keras.models import BiLM
from elmo_keras.models.bilm_embedder import BiLMEmbedder


def main(folders):
    for folder in folders:
        bilm = BiLM.from_bilm_tf(f"{folder}/options.json", f"{folder}/lm_weights.hdf5")
        embedder = BiLMEmbedder(bilm)
        print(f"{folder} (1-NN accuracy: LSTM 1 / LSTM 2)")
        for word, senses in SENSES.items():
            sentences, labels = labelled_sentences(senses)
            vectors = word_vectors(embedder, sentences, word)  # [12, layers, 2 * projection]
            half = vectors.shape[-1] // 2
            cells = []
            for name, part in (
                ("whole", vectors),
                ("forward", vectors[..., :half]),
                ("backward", vectors[..., half:]),
            ):
                stats = sense_statistics(part, labels)
                cells.append(
                    f"{name} {100 * stats[1]['nn_accuracy']:3.0f}% / "
                    f"{100 * stats[2]['nn_accuracy']:3.0f}%"
                )
            print(f"  {word:8s} " + " | ".join(cells))


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: sense_halves.py MODEL_FOLDER [MODEL_FOLDER ...]")
    main(sys.argv[1:])
