"""Packages a finished mini_en v2 run as the `mini_en` preset (issue 31).

    python experiments/mini_en_v2/package.py RUN [--card CARD]

Copies options.json, lm_weights.hdf5, vocab.txt and softmax.hdf5 from RUN (the stage-2 folder
of reproduce.sh, or a `snapshot` of it) into elmo_keras/assets/mini_en/, and writes the model
card there: the hand-written card (`--card`, by default the packaged MODEL_CARD.md itself;
every number in it names the command that made it) with its "## Files" section filled from
the copied files (bytes, sha256) and the parameter counts read from them. The files are copied
to temporary names and renamed once all are complete, so an interrupted run leaves the old
package files in place.
"""

import argparse
import json
import os
import pathlib
import shutil
import sys

import h5py

from elmo_keras.file_io.download import file_sha256

ROOT = pathlib.Path(__file__).resolve().parents[2]
ASSETS = ROOT / "elmo_keras" / "assets" / "mini_en"
FILES = ("options.json", "lm_weights.hdf5", "vocab.txt", "softmax.hdf5")
MARK = "## Files"


def parameters(path):
    total = 0

    def visit(_, item):
        nonlocal total
        if isinstance(item, h5py.Dataset):
            total += item.size

    with h5py.File(path, "r") as handle:
        handle.visititems(visit)
    return total


def files_section(folder):
    rows = "\n".join(
        f"| `{name}` | {(folder / name).stat().st_size:,} | `{file_sha256(folder / name)}` |"
        for name in FILES
    )
    options = json.loads((folder / "options.json").read_text(encoding="utf-8"))
    vocabulary = sum(1 for _ in open(folder / "vocab.txt", encoding="utf-8"))
    return (
        f"{MARK}\n\n"
        f"LSTM {options['lstm']['dim']} cells projected to {options['lstm']['projection_dim']}; "
        f"{parameters(folder / 'lm_weights.hdf5'):,} parameters in `lm_weights.hdf5` (float32), "
        f"{parameters(folder / 'softmax.hdf5'):,} in `softmax.hdf5` ({vocabulary:,} words). "
        "Written by `experiments/mini_en_v2/package.py`.\n\n"
        "| file | bytes | sha256 |\n|---|---|---|\n"
        f"{rows}\n"
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=pathlib.Path, help="the model folder to package")
    parser.add_argument(
        "--card",
        type=pathlib.Path,
        help="the hand-written card; its '## Files' section is replaced (default: the "
        "output's MODEL_CARD.md)",
    )
    parser.add_argument("--output", type=pathlib.Path, default=ASSETS)
    args = parser.parse_args(argv)
    args.card = args.card or args.output / "MODEL_CARD.md"
    missing = [name for name in FILES if not (args.run / name).is_file()]
    if missing:
        sys.exit(f"run: {args.run} has no {', '.join(missing)} (a finished run or a snapshot)")
    card = args.card.read_text(encoding="utf-8")
    if MARK not in card:
        sys.exit(f"--card: {args.card} has no '{MARK}' section")
    args.output.mkdir(parents=True, exist_ok=True)
    for name in FILES:
        shutil.copyfile(args.run / name, args.output / f".{name}.partial")
    for name in FILES:
        os.replace(args.output / f".{name}.partial", args.output / name)
    card = card.split(MARK, 1)[0] + files_section(args.output)
    (args.output / "MODEL_CARD.md").write_text(card, encoding="utf-8")
    print(f"wrote {args.output}: {', '.join(FILES)}, MODEL_CARD.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
