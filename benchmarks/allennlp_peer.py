"""AllenNLP's own `Elmo` side by side with `elmo_keras.allennlp.Elmo` and `BiLMEmbedder`.

One command, one run, the same random full-size weights (bilm-tf files) for every mode:

    python benchmarks/allennlp_peer.py --allennlp-src DIR \
        --json benchmarks/results/allennlp_peer.json \
        --markdown benchmarks/results/allennlp_peer.md

`DIR` is a checkout of allenai/allennlp (its last commit, 80fb6061: `git clone
https://github.com/allenai/allennlp DIR`). Nothing of it is installed or copied: AllenNLP's
ELMo modules (`modules/elmo.py`, `elmo_lstm.py`, `lstm_cell_with_projection.py`,
`encoder_base.py`, `highway.py`, `scalar_mix.py`, `nn/util.py`, `nn/initializers.py`,
`common/checks.py`, the `ELMoCharacterMapper` of `data/token_indexers/elmo_indexer.py`) are
imported unchanged from `DIR`; only the imports they make that have nothing to do with ELMo
(the registry, the dataset classes, the file cache) are stubbed, at run time
(`allennlp_peer_modes.stub_allennlp`).
`pip install allennlp` itself no longer resolves on a current Python (torch < 1.13).

Each mode runs in a child process of its own (one Keras backend per process), one after the
other: `allennlp` (AllenNLP's `Elmo` on PyTorch), `elmo_torch` (`elmo_keras.allennlp.Elmo`,
`KERAS_BACKEND=torch`), `embedder_torch` and `embedder_tf` (`BiLMEmbedder` on Keras's torch and
TensorFlow backends), `onnx` (`OnnxEmbedder`: the package's ONNX export of the same weights,
made once outside the clock, run by ONNX Runtime). Every mode is timed end to end from token
lists (character ids made in the clock: AllenNLP's `ELMoCharacterMapper`, `batch_to_ids`, the
embedder's own), in inference mode (`eval()` and `torch.no_grad()` for the two `Elmo`s,
dropout off), after one warm-up call, as the median of `--repeats` calls, on: 1, 32 and 64
sentences of 20 tokens, 32 natural sentences in one padded batch, and 256 natural sentences
sorted by length in batches of 32.
AllenNLP's biLM carries LSTM state between batches; its states are reset before each batch, so
that every mode computes the same numbers.

Agreement: each layer of each mode against AllenNLP's on the 32 natural sentences (the two
`Elmo`s give a layer each through a mix fixed to it, `[-9e10, ..., 0, ..., -9e10]`; the
embedders give all layers). The weights are N(0, 1) x 0.01: at the published scale random
weights are chaotic (float32 against float64 of one implementation drifts to 1e-2 by position
70), at 0.01 they are not; speed does not depend on the scale. Peak RSS is each child's high
water mark (loading included). The machine line gives the CPU and its SIMD flags.

The full run takes about 10 minutes on 2 quiet cores (one timed call per workload by default,
`--repeats N` for more). Quick run (the published Small model's size, a minute or two):
`--small`; smoke run (tiny sizes, seconds): `--config tiny`.
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

import allennlp_peer_modes
import common
import numpy as np

MODES = ("allennlp", "elmo_torch", "embedder_torch", "embedder_tf", "onnx")
LABELS = {
    "allennlp": "AllenNLP `Elmo` (torch)",
    "elmo_torch": "`elmo_keras.allennlp.Elmo` (torch)",
    "embedder_torch": "`BiLMEmbedder` (torch)",
    "embedder_tf": "`BiLMEmbedder` (TensorFlow)",
    "onnx": "`OnnxEmbedder` (ONNX Runtime)",
}
BACKENDS = {"allennlp": None, "elmo_torch": "torch", "embedder_torch": "torch"}
SCALE = 0.01
SORTED_BATCH = allennlp_peer_modes.SORTED_BATCH
AGREEMENT_WORKLOAD = "natural32"
PUBLISHED_FILTERS = [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]
CONFIGS = {  # bilm-tf options: the published Original and Small models, a tiny one for a smoke run
    "full": (4096, 512, 16, PUBLISHED_FILTERS, 2),
    "small": (1024, 128, 16, PUBLISHED_FILTERS, 1),
    "tiny": (64, 16, 4, [[1, 4], [2, 8], [3, 8]], 2),
}


# --------------------------------------------------------------------------------------------
# The parent: weights, workloads, children, table
# --------------------------------------------------------------------------------------------


def options_of(config):
    dim, projection_dim, char_dim, filters, n_highway = CONFIGS[config]
    return {
        "lstm": {
            "dim": dim,
            "projection_dim": projection_dim,
            "n_layers": 2,
            "cell_clip": 3.0,
            "proj_clip": 3.0,
            "use_skip_connections": True,
        },
        "char_cnn": {
            "embedding": {"dim": char_dim},
            "filters": filters,
            "n_highway": n_highway,
            "n_characters": 262,
            "max_characters_per_token": 50,
            "activation": "relu",
        },
    }


def weight_shapes(options):
    """{dataset: shape} of bilm-tf's weight file (../shared/REFERENCE.md section 3), written
    from the layout itself, not from either implementation."""
    cnn, lstm = options["char_cnn"], options["lstm"]
    char_dim, n_filters = cnn["embedding"]["dim"], sum(n for _, n in cnn["filters"])
    proj, dim = lstm["projection_dim"], lstm["dim"]
    shapes = {"char_embed": (261, char_dim)}
    for i, (width, n) in enumerate(cnn["filters"]):
        shapes[f"CNN/W_cnn_{i}"], shapes[f"CNN/b_cnn_{i}"] = (1, width, char_dim, n), (n,)
    for k in range(cnn["n_highway"]):
        for part in ("carry", "transform"):
            shapes[f"CNN_high_{k}/W_{part}"] = (n_filters, n_filters)
            shapes[f"CNN_high_{k}/b_{part}"] = (n_filters,)
    shapes["CNN_proj/W_proj"], shapes["CNN_proj/b_proj"] = (n_filters, proj), (proj,)
    for d in (0, 1):
        for layer in range(lstm["n_layers"]):
            cell = f"RNN_{d}/RNN/MultiRNNCell/Cell{layer}/LSTMCell"
            shapes[f"{cell}/W_0"], shapes[f"{cell}/B"] = (2 * proj, 4 * dim), (4 * dim,)
            shapes[f"{cell}/W_P_0"] = (dim, proj)
    return shapes


def write_model(config, workdir, seed=0):
    """`options.json` and `weights.hdf5` of N(0, 1) x SCALE weights in `workdir`, reused when
    the same config and seed wrote them."""
    import h5py

    options_path, weights_path = workdir / "options.json", workdir / "weights.hdf5"
    stamp_path, stamp = workdir / "stamp.json", {"config": config, "seed": seed, "scale": SCALE}
    if weights_path.is_file() and stamp_path.is_file():
        if json.loads(stamp_path.read_text()) == stamp:
            return options_path, weights_path
    options = options_of(config)
    rng = np.random.default_rng(seed)
    with h5py.File(weights_path, "w") as handle:
        for name, shape in weight_shapes(options).items():
            handle[name] = (rng.standard_normal(shape, np.float32) * SCALE).astype(np.float32)
    options_path.write_text(json.dumps(options))
    stamp_path.write_text(json.dumps(stamp))
    return options_path, weights_path


def make_workloads(seed=0):
    """[(name, label, batches of token lists)]: the inference benchmark's four one-batch
    workloads and 256 natural sentences, sorted, in batches of 32."""
    fixed, _ = common.make_workloads(batches=(1, 32, 64), seed=seed)
    workloads = [(w.name, w.label, [w.sentences]) for w in fixed]
    sentences, source = common.natural_sentences(256, seed=seed)
    ordered = sorted(sentences, key=len)
    batches = [ordered[i : i + SORTED_BATCH] for i in range(0, len(ordered), SORTED_BATCH)]
    workloads.append(("natural256", f"256 natural, sorted batches of {SORTED_BATCH}", batches))
    return workloads, source


def agreement_workload(workloads):
    """The workload of the agreement check: `AGREEMENT_WORKLOAD`, else the last one run."""
    names = [name for name, _, _ in workloads]
    return AGREEMENT_WORKLOAD if AGREEMENT_WORKLOAD in names else names[-1]


def start_child(mode, args, workdir):
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2")
    env.pop("KERAS_BACKEND", None)
    if mode != "allennlp":
        env["KERAS_BACKEND"] = BACKENDS.get(mode, "tensorflow")
    if args.threads:
        env["OMP_NUM_THREADS"] = str(args.threads)
    command = [sys.executable, __file__, "--child", mode, "--workdir", str(workdir)]
    command += ["--repeats", str(args.repeats), "--allennlp-src", str(args.allennlp_src)]
    command += ["--threads", str(args.threads)]
    (workdir / f"{mode}.json").unlink(missing_ok=True)
    return subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def finish_child(mode, process, workdir):
    output, _ = process.communicate()
    if process.returncode != 0:
        return {"error": "\n".join(output.strip().splitlines()[-15:])}
    return json.loads((workdir / f"{mode}.json").read_text())


def run_children(modes, args, workdir):
    """{mode: result}: one child per mode, one after the other (or all at once, `--parallel`)."""
    results = {}
    if args.parallel:
        processes = {mode: start_child(mode, args, workdir) for mode in modes}
        for mode, process in processes.items():
            results[mode] = finish_child(mode, process, workdir)
        return results
    for mode in modes:
        print(f"running {mode} ...", file=sys.stderr, flush=True)
        results[mode] = finish_child(mode, start_child(mode, args, workdir), workdir)
    return results


def agreement(workdir, modes):
    """{mode: [max |mode - allennlp| per layer]} on the agreement workload, and under
    `"allennlp"` the largest |value| of each of AllenNLP's layers, for scale."""
    reference = workdir / "allennlp.npz"
    if not reference.is_file():
        return {}
    want = np.load(reference)
    out = {"allennlp": [float(np.max(np.abs(want[k]))) for k in sorted(want.files)]}
    for mode in modes:
        path = workdir / f"{mode}.npz"
        if mode == "allennlp" or not path.is_file():
            continue
        got = np.load(path)
        out[mode] = [float(np.max(np.abs(got[k] - want[k]))) for k in sorted(want.files)]
    return out


def report(results, agree, workloads, env, source, setup):
    names = [name for name, _, _ in workloads]
    labels = dict((name, label) for name, label, _ in workloads)
    ran = [m for m in results if "error" not in results[m]]
    base = results.get("allennlp", {}).get("tokens_per_s", {})
    lines = [f"{setup}; text: {source}.", ""]
    header = ["workload"] + [f"{LABELS[m]} tokens/s" for m in ran]
    header += [f"{LABELS[m]} / AllenNLP" for m in ran if m != "allennlp" and base]
    lines += [common.table_header(header)]
    for name in names:
        row = [labels[name]] + [f"{results[m]['tokens_per_s'][name]:,.0f}" for m in ran]
        if base:
            row += [
                f"{results[m]['tokens_per_s'][name] / base[name]:.2f}x"
                for m in ran
                if m != "allennlp"
            ]
        lines.append(common.table_row(row))
    lines.append(
        common.table_row(
            ["peak RSS (MB)"]
            + [f"{results[m]['peak_rss_mb']:,.0f}" for m in ran]
            + [""] * (len(header) - 1 - len(ran))
        )
    )
    if agree:
        lines += [
            "",
            f"Largest |difference| from AllenNLP's `Elmo`, per layer "
            f"({agreement_workload(workloads)}):",
            "",
        ]
        n_layers = len(next(iter(agree.values())))
        lines.append(common.table_header(["mode"] + [f"layer {k}" for k in range(n_layers)]))
        for mode, diffs in agree.items():
            label = "(largest \\|value\\| of AllenNLP's)" if mode == "allennlp" else LABELS[mode]
            lines.append(common.table_row([label] + [f"{d:.1e}" for d in diffs]))
    for mode, result in results.items():
        if "error" in result:
            lines += ["", f"{LABELS[mode]} failed:", "", "```", result["error"], "```"]
        elif "note" in result:
            lines += ["", f"{LABELS[mode]}: {result['note']}"]
    lines += ["", common.machine_line(env)]
    threads = {m: results[m].get("threads") for m in ran}
    loads = {m: results[m].get("load_average_at_end") for m in ran}
    lines.append(f"Threads per mode: {json.dumps(threads)}; 1-minute load average at the end")
    lines.append(f"of each mode's process: {json.dumps(loads)}")
    return "\n".join(lines)


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.small:
        args.config = "small"
    if args.child:
        return child_main(args)
    src = pathlib.Path(args.allennlp_src)
    if not (src / "allennlp" / "modules" / "elmo.py").is_file():
        print(
            f"--allennlp-src must be a checkout of allenai/allennlp (with allennlp/modules/"
            f"elmo.py). Received: {src}",
            file=sys.stderr,
        )
        return 2
    workdir = pathlib.Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    workloads, source = make_workloads()
    if args.workloads:  # a subset, by name (b1x20, b32x20, b64x20, natural32, natural256)
        workloads = [w for w in workloads if w[0] in args.workloads.split(",")]
    modes = [m.strip() for m in args.modes.split(",")]
    if args.report_only:  # the table again from the children's files of an earlier run
        results = {m: json.loads((workdir / f"{m}.json").read_text()) for m in modes}
    else:
        write_model(args.config, workdir)
        (workdir / "workloads.json").write_text(json.dumps(workloads))
        results = run_children(modes, args, workdir)
    agree = agreement(workdir, modes)
    env = common.environment(with_tensorflow=False)
    setup = (
        f"Config `{args.config}`, weights N(0, 1) x {SCALE}; {args.repeats} timed calls per "
        f"workload (median) after a warm-up; threads per mode: {args.threads or 'default'}; "
        f"modes {'all at once' if args.parallel else 'one after the other'}"
    )
    table = report(results, agree, workloads, env, source, setup)
    data = {"config": args.config, "scale": SCALE, "environment": env, "text": source}
    data.update(repeats=args.repeats, threads=args.threads, parallel=args.parallel)
    data.update(results=results, agreement=agree)
    if args.json:
        common.write_json(args.json, data)
    if args.markdown:
        pathlib.Path(args.markdown).write_text(table + "\n")
    print(table)
    return 0


def _parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--allennlp-src", required=True, help="a checkout of allenai/allennlp")
    parser.add_argument("--config", choices=sorted(CONFIGS), default="full")
    parser.add_argument("--modes", default=",".join(MODES))
    parser.add_argument("--repeats", type=int, default=1, help="timed calls per workload")
    parser.add_argument(
        "--small", action="store_true", help="the quick run: config `small` (same workloads)"
    )
    parser.add_argument("--workloads", help="a subset, e.g. b1x20,b32x20 (default: all five)")
    parser.add_argument(
        "--threads", type=int, default=0, help="threads per mode (torch, TensorFlow); 0: theirs"
    )
    parser.add_argument(
        "--parallel", action="store_true", help="all modes at once (a busy shared machine)"
    )
    parser.add_argument("--workdir", default="/tmp/elmo_allennlp_peer")
    parser.add_argument(
        "--report-only", action="store_true", help="the table from an earlier run's --workdir"
    )
    parser.add_argument("--json")
    parser.add_argument("--markdown")
    parser.add_argument("--child", choices=MODES, help=argparse.SUPPRESS)
    return parser


# --------------------------------------------------------------------------------------------
# A child: one mode (its classes in allennlp_peer_modes.py)
# --------------------------------------------------------------------------------------------


def child_main(args):
    workdir, mode = pathlib.Path(args.workdir), args.child
    options_path, weights_path = workdir / "options.json", workdir / "weights.hdf5"
    workloads = json.loads((workdir / "workloads.json").read_text())
    if mode in ("allennlp", "elmo_torch"):
        import torch

        torch.set_grad_enabled(False)  # the two `Elmo`s as users run them: torch.no_grad()
    allennlp_peer_modes.set_threads(mode, args.threads)
    model = allennlp_peer_modes.load(mode, args.allennlp_src, options_path, weights_path)
    started, tokens_per_s = time.perf_counter(), {}
    for name, _, batches in workloads:
        calls = model.calls(batches)
        calls[0]()  # warm-up
        seconds = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            for call in calls:
                call()
            seconds.append(time.perf_counter() - start)
        tokens = sum(len(s) for batch in batches for s in batch)
        tokens_per_s[name] = tokens / float(np.median(seconds))
    sentences = next(b[0] for n, _, b in workloads if n == agreement_workload(workloads))
    n_layers = 1 + json.loads(options_path.read_text())["lstm"]["n_layers"]
    layers = model.layers(sentences, n_layers)
    np.savez(workdir / f"{mode}.npz", **{f"layer{k}": x for k, x in enumerate(layers)})
    result = {"tokens_per_s": tokens_per_s, "peak_rss_mb": common.peak_rss_mb()}
    threads = allennlp_peer_modes.threads(mode)
    result.update(threads=threads, load_average_at_end=os.getloadavg()[0])
    result["seconds"] = time.perf_counter() - started
    (workdir / f"{mode}.json").write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
