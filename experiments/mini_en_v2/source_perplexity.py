"""Held-out perplexity per corpus source: which kinds of text a model predicts well.

    python experiments/mini_en_v2/source_perplexity.py CORPUS_DIR MODEL_FOLDER [MODEL_FOLDER ...]

`CORPUS_DIR` is a build of `python -m elmo_keras.corpus build`. Its `valid.txt` is written one
source after another whatever `--order` (the lines are held out by CRC-32 as they are read), and
its `sources.json` counts each source's valid lines, so the file splits back into its sources.
For each model folder (options.json, lm_weights.hdf5, vocab.txt, softmax.hdf5) this prints the
full-softmax perplexity (`elmo_keras.training.common.evaluation.evaluate_model`, batch 16 x 20, the
average of both directions) on each source's held-out lines and on all of them. The models
should share a vocabulary (mini_en v2's stages do), or the figures are not on one basis.
"""

import json
import pathlib
import sys
import tempfile

from elmo_keras.training.common.evaluation import evaluate_model
from elmo_keras.training.model_files import load_language_model


def split_valid(corpus_dir, into):
    """Writes `into/SOURCE.txt` for each source; returns `{source: path}` (and `all`)."""
    corpus_dir = pathlib.Path(corpus_dir)
    report = json.loads((corpus_dir / "sources.json").read_text("utf-8"))
    lines = (corpus_dir / "valid.txt").read_text("utf-8").splitlines()
    paths, start = {}, 0
    for name, entry in report["sources"].items():
        count = entry["counts"].get("valid_lines", 0)
        paths[name] = pathlib.Path(into) / f"{name}.txt"
        paths[name].write_text("\n".join(lines[start : start + count]) + "\n", "utf-8")
        start += count
    if start != len(lines):
        raise ValueError(
            f"`corpus_dir`: sources.json counts {start} valid lines, valid.txt has {len(lines)}"
        )
    paths["all"] = corpus_dir / "valid.txt"
    return paths


def main(corpus_dir, folders):
    with tempfile.TemporaryDirectory() as scratch:
        paths = split_valid(corpus_dir, scratch)
        print("| model | " + " | ".join(paths) + " |")
        print("|---" * (len(paths) + 1) + "|")
        for folder in folders:
            model, vocabulary = load_language_model(folder)
            cells = [
                f"{evaluate_model(model, vocabulary, str(path))['perplexity']:.1f}"
                for path in paths.values()
            ]
            print(f"| {folder} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: source_perplexity.py CORPUS_DIR MODEL_FOLDER [MODEL_FOLDER ...]")
    main(sys.argv[1], sys.argv[2:])
