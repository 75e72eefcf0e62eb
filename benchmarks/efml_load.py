#!/usr/bin/env python
"""Load time of a full-size ELMoForManyLangs model: from its pickles vs from the converted preset.

    python benchmarks/efml_load.py --workdir /tmp/efml_load \
        --json benchmarks/results/efml_load.json --markdown benchmarks/results/efml_load.md
    python benchmarks/efml_load.py --workdir /tmp/efml_small --words 2000 --rounds 1   (smoke)

The model: EFML's published architecture (`elmo_keras.efml.PUBLISHED_NETWORK`: 2 x 4096 cells,
projection 512, filters summing to 2048, 2 highways, char dim 50, word dim 100) with seeded
random weights, `--chars` characters and `--words` words in its dictionaries, written once into
`--workdir` in EFML's format by the tests' own writer (`tests/efml_writer.py`, legacy pickles
as the published 2018 files). It is then converted once (`BiLM.from_preset(efml_folder)
.save_to_preset(preset)`), and each round times `BiLM.from_preset` of both folders in the
same process (TensorFlow imported and one load done first, so neither pays the import), the
order rotating by round. Each source is also loaded as before 0.3.1 (`--no-before` leaves
that out): the model built with its initializers drawn (the LSTM's orthogonal initializer, a
QR decomposition of each 512 x 16384 recurrent kernel) and then overwritten, which was most of
the load time. The table shows the median and fastest round of each. The host is shared: read
the ratios rather than the absolute times.
"""

import argparse
import contextlib
import gc
import pathlib
import statistics
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from benchmarks import common  # noqa: E402

common.prefer_onednn()


@contextlib.contextmanager
def drawing_initializers(before):
    """With `before`, loads build the model as before 0.3.1: its initializers drawn first."""
    if not before:
        yield
        return
    from elmo_keras import weights
    from elmo_keras.models import preset_folder

    def build(bilm):
        if not bilm.built:
            bilm.build()
        return bilm

    saved = weights.build_for_weights, preset_folder.build_for_weights
    weights.build_for_weights = preset_folder.build_for_weights = build
    try:
        yield
    finally:
        weights.build_for_weights, preset_folder.build_for_weights = saved


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--workdir", required=True, type=pathlib.Path)
    parser.add_argument("--chars", type=int, default=10000)
    parser.add_argument("--words", type=int, default=150000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-before", action="store_true", help="leave out the old build")
    parser.add_argument("--json")
    parser.add_argument("--markdown")
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
    folders = {"pickles": efml_folder, "preset": preset}
    contenders = [(name, False) for name in folders]
    if not args.no_before:
        contenders += [(name, True) for name in folders]
    label = {(name, before): name + (" (before)" if before else "") for name, before in contenders}
    times = {label[c]: [] for c in contenders}
    BiLM.from_preset(preset)  # TensorFlow's first model: paid by neither
    for round_index in range(args.rounds):
        for name, before in common.rotated(contenders, round_index):
            with drawing_initializers(before):
                bilm, seconds = common.timed(BiLM.from_preset, folders[name])
            times[label[name, before]].append(seconds)
            parameters = bilm.count_params()
            del bilm
            gc.collect()
    env = common.environment()
    median = {name: statistics.median(values) for name, values in times.items()}
    rows = [
        [
            name,
            f"{sizes[name.split()[0]]:.0f}",
            f"{median[name]:.2f}",
            f"{min(values):.2f}",
            " ".join(f"{t:.2f}" for t in values),
        ]
        for name, values in times.items()
    ]
    ratios = [f"pickles / preset: {median['pickles'] / median['preset']:.2f}x"]
    if not args.no_before:
        ratios += [
            f"{name} before / now: {median[name + ' (before)'] / median[name]:.1f}x"
            for name in folders
        ]
    table = "\n".join(
        [
            common.table_header(["load from", "folder MB", "median s", "best s", "all rounds s"]),
            *(common.table_row(row) for row in rows),
            "",
            "; ".join(ratios) + f"; {parameters:,} parameters, {args.chars} characters, "
            f"{args.words} words, median of {args.rounds} rounds",
            common.machine_line(env),
        ]
    )
    results = {"times": times, "sizes_mb": sizes, "parameters": parameters, "environment": env}
    common.publish(table, results, args.json, args.markdown)


if __name__ == "__main__":
    main()
