#!/usr/bin/env python
"""Load time of a full-size ELMoForManyLangs model: from its pickles vs from the converted preset.

    nice -n 10 python benchmarks/efml_load.py --workdir /tmp/efml_load --json R.json
    python benchmarks/efml_load.py --workdir /tmp/efml_small --words 2000 --rounds 1   (smoke)

The model: EFML's published architecture (`elmo_keras.efml.PUBLISHED_NETWORK`: 2 x 4096 cells,
projection 512, filters summing to 2048, 2 highways, char dim 50, word dim 100) with seeded
random weights, `--chars` characters and `--words` words in its dictionaries, written once into
`--workdir` in EFML's format by the tests' own writer (`tests/efml_writer.py`, legacy pickles
as the published 2018 files). It is then converted once (`BiLM.from_preset(efml_folder)
.save_to_preset(preset)`), and each round times `BiLM.from_preset` of both folders in the
same process (TensorFlow imported and one load done first, so neither pays the import), the
order alternating by round. The table shows the fastest round of each and their ratio. The
host is shared: read the ratio rather than the absolute times.
"""

import argparse
import gc
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from benchmarks import common  # noqa: E402

common.prefer_onednn()


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", required=True, type=pathlib.Path)
    parser.add_argument("--chars", type=int, default=10000)
    parser.add_argument("--words", type=int, default=150000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json")
    args = parser.parse_args()

    from elmo_keras.efml import PUBLISHED_NETWORK
    from elmo_keras.models import BiLM
    from tests.efml_writer import write_efml_folder

    specials = ["<bos>", "<eos>", "<oov>", "<pad>", "<bow>", "<eow>"]
    chars = specials + [chr(0x4E00 + i) for i in range(args.chars - len(specials))]
    words = ["<oov>", "<bos>", "<eos>", "<pad>"] + [f"w{i}" for i in range(args.words - 4)]
    efml_folder = args.workdir / f"efml_{args.chars}_{args.words}"
    preset = args.workdir / f"preset_{args.chars}_{args.words}"
    if not (efml_folder / "encoder.pkl").is_file():
        write_efml_folder(efml_folder, PUBLISHED_NETWORK, chars, words, seed=0, legacy=True)
    if not (preset / "config.json").is_file():
        BiLM.from_preset(efml_folder).save_to_preset(preset, overwrite=True)
    sizes = {
        name: sum(p.stat().st_size for p in folder.iterdir()) / 1e6
        for name, folder in (("pickles", efml_folder), ("preset", preset))
    }
    times = {"pickles": [], "preset": []}
    folders = {"pickles": efml_folder, "preset": preset}
    for round_index in range(args.rounds):
        for name in common.rotated(("pickles", "preset"), round_index):
            bilm, seconds = common.timed(BiLM.from_preset, folders[name])
            times[name].append(seconds)
            parameters = bilm.count_params()
            del bilm
            gc.collect()
    env = common.environment()
    best = {name: min(values) for name, values in times.items()}
    table = "\n".join(
        [
            common.table_header(["load from", "folder MB", "best s", "all rounds s"]),
            *(
                common.table_row(
                    [
                        name,
                        f"{sizes[name]:.0f}",
                        f"{best[name]:.2f}",
                        " ".join(f"{t:.2f}" for t in times[name]),
                    ]
                )
                for name in times
            ),
            "",
            f"pickles / preset: {best['pickles'] / best['preset']:.2f}x; {parameters:,} "
            f"parameters, {args.chars} characters, {args.words} words",
            common.machine_line(env),
        ]
    )
    results = {"times": times, "sizes_mb": sizes, "parameters": parameters, "environment": env}
    common.publish(table, results, args.json)


if __name__ == "__main__":
    main()
