"""Writes the MR sentences of the studies' split as plain text, for the domain experiment.

    python experiments/domain/mr_text.py OUTPUT_DIR

`OUTPUT_DIR/mr_train.txt`: the training split's sentences only (8,454; the text the biLM is
fine-tuned on); `OUTPUT_DIR/mr_heldout.txt`: the validation and test splits' sentences (2,114;
never trained on). One sentence a line, tokenized as `experiments/downstream.py` tokenizes them
(`elmo_keras.text.tokenize_python`, at most 64 tokens), tokens separated by spaces. No labels.
"""

import pathlib
import sys

import numpy as np

from elmo_keras.data import mr_sentiment, mr_split, read_mr_sentiment
from elmo_keras.text import tokenize_python

MAX_TOKENS = 64  # as experiments/downstream_data.py


def main(output_dir):
    output_dir = pathlib.Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    texts, _ = read_mr_sentiment(mr_sentiment())
    train, valid, test = mr_split(len(texts))
    for name, indices in (
        ("mr_train.txt", train),
        ("mr_heldout.txt", np.concatenate([valid, test])),
    ):
        lines = [" ".join(tokenize_python(texts[i])[:MAX_TOKENS] or ["."]) for i in indices]
        (output_dir / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
        tokens = sum(len(line.split()) for line in lines)
        print(f"{output_dir / name}: {len(lines)} sentences, {tokens} tokens")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "runs/domain")
