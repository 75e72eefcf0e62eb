"""Averages the weights of model folders that share an architecture and a vocabulary.

    python experiments/mini_en_v2/average_weights.py OUT FOLDER FOLDER [FOLDER ...]

Every floating-point array of `lm_weights.hdf5` and `softmax.hdf5` becomes the mean of the
folders' (a "model soup"; the folders should come from one starting point, as mini_en v2's
stage-2 runs all start from stage 1); other arrays, `options.json` and `vocab.txt` come from the
first folder. `OUT` is then a model folder like any other (`elmo-keras evaluate`, `embed`, the
sense scripts here).
"""

import pathlib
import shutil
import sys

import h5py
import numpy as np

FILES = ("lm_weights.hdf5", "softmax.hdf5")


def average(out, folders):
    out.mkdir(parents=True, exist_ok=True)
    for name in ("options.json", "vocab.txt"):
        shutil.copy(folders[0] / name, out / name)
    for name in FILES:
        sources = [h5py.File(folder / name, "r") for folder in folders]
        try:
            with h5py.File(out / name, "w") as target:

                def copy(path, item, sources=sources, target=target):
                    if not isinstance(item, h5py.Dataset):
                        return
                    arrays = [source[path][...] for source in sources]
                    if np.issubdtype(arrays[0].dtype, np.floating):
                        mean = np.mean(np.stack(arrays), axis=0).astype(arrays[0].dtype)
                        target.create_dataset(path, data=mean)
                    else:
                        target.create_dataset(path, data=arrays[0])

                sources[0].visititems(copy)
        finally:
            for source in sources:
                source.close()


def main(argv):
    if len(argv) < 3:
        raise SystemExit(__doc__.strip().splitlines()[2].strip())
    out, *folders = (pathlib.Path(arg) for arg in argv)
    average(out, folders)
    print(f"wrote {out}: the mean of {len(folders)} folders")


if __name__ == "__main__":
    main(sys.argv[1:])
