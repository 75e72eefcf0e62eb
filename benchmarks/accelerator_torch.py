#!/usr/bin/env python
"""The biLM on Keras's PyTorch backend on an accelerator: `accelerator.py`'s torch section.

`accelerator.py` (a JAX process) calls `section()`, which runs this file in a process of its own
with `KERAS_BACKEND=torch` (one Keras backend per process) on the same sentences, and reports:

(a) exactness: both fixtures (tests/fixtures/bilm_tf/model and tests/fixtures/allennlp), 10
    batches of 3 sentences with the LSTM state carried between batches, max |diff| of the top
    layer against the fixtures' expected outputs and against the NumPy float64 reference
    (`fixture_check`), with TF32 off (`allow_tf32 = False` for matrix products and cuDNN,
    `set_float32_matmul_precision("highest")`), the biLSTM graphed and eager on CUDA; and the
    fixtures' own distance from float64 (1.14e-6 for AllenNLP's: its float32 round-off). The
    target on CUDA is 1e-6;
(b) inference: tokens/s of `BiLMEmbedder` (`embed_batch`), of `elmo_keras.allennlp.Elmo`
    (`batch_to_ids`, `forward` under `torch.no_grad`) and of `Elmo.forward` on ids already on
    the device, on random weights of the published size (a small configuration with
    `--small`), at `accelerator.py`'s first two batch sizes (64 and 512 x 20; 4 and 16 with
    `--small`), the biLSTM graphed and eager on CUDA (`torch_gpu_path`): the median of
    `--calls` calls after two warm-up calls, the device synchronized around each;
(c) the reference: `../shared/gpu/reference_elmo_jax.py --only torch`, the AllenNLP-style PyTorch
    loop (one step at a time, fp32), at the same batch sizes in the same run (`--reference`
    names the script where `../shared` is not there; the rows are then marked missing);
(d) the device's peak memory (`torch.cuda.max_memory_allocated`; peak RSS on a CPU).

Alone (the sentences drawn as `accelerator.py` draws them):

    KERAS_BACKEND=torch python benchmarks/accelerator_torch.py --small --json OUT.json
"""

import argparse
import importlib.util
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parents[1]
REFERENCE = REPO.parent / "shared" / "gpu" / "reference_elmo_jax.py"
FULL = dict(lstm_units=4096, projection_dim=512)  # the other arguments' defaults are published
SMALL = dict(lstm_units=64, projection_dim=16, filters=[(1, 8), (2, 8), (3, 16)], n_highway=1)
TARGET_ON_CUDA = 1e-6


def section(small, calls, workloads, reference=REFERENCE, timeout=900):
    """Runs this file with `KERAS_BACKEND=torch` on `workloads` `[(name, sentences)]` and
    returns its results (`{"skipped": why}` without torch, `{"error": ...}` if it failed)."""
    if importlib.util.find_spec("torch") is None:
        return {"skipped": "torch is not installed"}
    with tempfile.TemporaryDirectory() as tmp:
        sentences, out = pathlib.Path(tmp) / "workloads.json", pathlib.Path(tmp) / "torch.json"
        sentences.write_text(json.dumps(workloads))
        command = [sys.executable, __file__, "--workloads", str(sentences), "--json", str(out)]
        command += ["--calls", str(calls), "--reference", str(reference)]
        command += ["--small"] if small else []
        env = {**os.environ, "KERAS_BACKEND": "torch", "PYTHONUNBUFFERED": "1"}
        done = subprocess.run(command, env=env, timeout=timeout, check=False)
        if done.returncode != 0 or not out.is_file():
            return {"error": f"accelerator_torch.py exited with {done.returncode}"}
        return json.loads(out.read_text())


def set_tf32_off(torch):
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")


def exactness(torch):
    """{path: {fixture: max |diff|}} of the top layer, state carried across 10 batches of 3,
    against the fixtures ("<path> vs fixture") and the NumPy float64 reference ("<path> vs
    float64"); on CUDA the biLSTM through its CUDA graphs (captured at each shape's first call,
    so that every result is a replay's) and eagerly; and the fixtures' own distance from float64
    ("fixture vs float64", their float32 round-off)."""
    import fixture_check

    from elmo_keras.layers import torch_gpu_path
    from elmo_keras.models import BiLM

    def load(folder):
        bilm = BiLM.from_bilm_tf(folder / "options.json", folder / "lm_weights.hdf5")

        def run(inputs):
            with torch.no_grad():
                out = bilm(inputs, training=False)
            state = {"state_h": out["state_h"], "state_c": out["state_c"]}
            return out["activations"][:, -1].cpu().numpy(), state

        return run

    results = {"fixture vs float64": fixture_check.fixture_rounding()}
    paths = {"graphed": (True, 1), "eager": (False, torch_gpu_path.CAPTURE_AT)}
    if not torch.cuda.is_available():  # the CPU's own path
        paths = {"cpu": (True, torch_gpu_path.CAPTURE_AT)}
    settings = torch_gpu_path.USE_GRAPHS, torch_gpu_path.CAPTURE_AT
    try:
        for path, (use_graphs, capture_at) in paths.items():
            torch_gpu_path.USE_GRAPHS, torch_gpu_path.CAPTURE_AT = use_graphs, capture_at
            for expected in ("fixture", "float64"):
                results[f"{path} vs {expected}"] = fixture_check.top_layer_diffs(load, expected)
    finally:
        torch_gpu_path.USE_GRAPHS, torch_gpu_path.CAPTURE_AT = settings
    return results


def random_model(small, folder):
    """bilm-tf files of random weights (N(0, 1) x 0.01, seeded) in `folder`, and the biLM."""
    import numpy as np

    from elmo_keras.models import BiLM
    from elmo_keras.options import write_options
    from elmo_keras.weights import save_weights

    bilm = BiLM(**(SMALL if small else FULL))
    bilm.build()
    rng = np.random.default_rng(0)
    bilm.set_weight_arrays(
        {
            name: (0.01 * rng.standard_normal(shape)).astype(np.float32)
            for name, shape in sorted(bilm.weight_shapes().items())
        }
    )
    write_options(bilm.to_options(), folder / "options.json")
    save_weights(bilm, folder / "weights.hdf5")
    return bilm


def timed(torch, call, calls):
    """Median seconds of `calls` calls of `call` after two warm-up calls (the second captures
    the CUDA graphs of the call's shapes), the device synchronized."""
    sync = torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None)
    for _ in range(2):
        call()
    sync()
    seconds = []
    for _ in range(calls):
        start = time.perf_counter()
        call()
        sync()
        seconds.append(time.perf_counter() - start)
    return statistics.median(seconds)


def speed(torch, small, workloads, calls):
    """Rows of tokens/s per workload: `BiLMEmbedder` (sentences in, NumPy arrays out),
    `elmo_keras.allennlp.Elmo` (`batch_to_ids` on the host, then `forward`) and `Elmo` on
    character ids already on the device (as the reference's loop is timed); on CUDA each with
    the biLSTM's CUDA graphs ("graphed") and without ("eager")."""
    from elmo_keras.allennlp import Elmo, batch_to_ids
    from elmo_keras.layers import torch_gpu_path
    from elmo_keras.models import BiLMEmbedder

    rows, use_graphs = [], torch_gpu_path.USE_GRAPHS
    cuda = torch.cuda.is_available()
    paths = ("graphed", "eager") if cuda else ("cpu",)
    with tempfile.TemporaryDirectory() as tmp:
        folder = pathlib.Path(tmp)
        bilm = random_model(small, folder)
        device = "cuda" if cuda else "cpu"
        elmo = Elmo(str(folder / "options.json"), str(folder / "weights.hdf5"), 1, dropout=0.0)
        elmo = elmo.to(device).eval()
        for name, sentences in workloads:
            tokens = sum(len(s) for s in sentences)
            embedder = BiLMEmbedder(bilm, batch_size=len(sentences), max_tokens=1 << 30)
            ids = batch_to_ids(sentences).to(device)

            def run_elmo(sentences=sentences):
                with torch.no_grad():
                    return elmo(batch_to_ids(sentences).to(device))

            def run_elmo_on_ids(ids=ids):
                with torch.no_grad():
                    return elmo(ids)

            for path in paths:
                torch_gpu_path.USE_GRAPHS = path != "eager"
                for model, call in (
                    ("BiLMEmbedder", lambda s=sentences, e=embedder: e.embed_batch(s)),
                    ("Elmo", run_elmo),
                    ("Elmo, ids on the device", run_elmo_on_ids),
                ):
                    seconds = timed(torch, call, calls)
                    row = {"model": model, "path": path, "workload": name}
                    rows.append({**row, "tokens_per_s": tokens / seconds, "median_s": seconds})
                    print(json.dumps(rows[-1]), flush=True)
    torch_gpu_path.USE_GRAPHS = use_graphs
    return rows


def reference_rows(small, workloads, reference):
    """The AllenNLP-style PyTorch loop of `reference` at the workloads' batch sizes."""
    if not pathlib.Path(reference).is_file():
        return [{"missing": str(reference)}]
    sizes = ",".join(str(len(sentences)) for _, sentences in workloads)
    command = [sys.executable, str(reference), "--only", "torch", "--fwd", sizes]
    command += ["--small"] if small else []
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, check=False)
    rows = []
    for line in done.stdout.splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if row.get("part") == "torch_allennlp_style_infer" or "error" in row:
            rows.append(row)
    return rows or [{"error": f"no rows (exit {done.returncode}): {done.stderr[-500:]}"}]


def peak_memory_mb(torch):
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20, "torch.cuda.max_memory_allocated"
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "process peak RSS (CPU)"


def report(results):
    """The section's Markdown tables."""
    if "skipped" in results or "error" in results:
        return f"PyTorch section: {results.get('skipped') or results.get('error')}"
    lines = [
        f"PyTorch {results['torch']} on {results['device']} (TF32 off), Keras {results['keras']}",
        "",
        "| top layer, max abs diff (TF32 off) | bilm-tf | allennlp |",
        "|---|---|---|",
    ]
    lines += [
        f"| {name} | " + " | ".join(f"{d:.2e}" for d in row.values()) + " |"
        for name, row in results["exactness"].items()
    ]
    reference = {
        row["batch"]: row["tokens_per_s"] for row in results["reference"] if "batch" in row
    }
    lines += [
        "",
        "| workload | PyTorch model | biLSTM | tokens/s | AllenNLP-style loop tokens/s | ratio |",
        "|---|---|---|---|---|---|",
    ]
    for row in results["speed"]:
        rows = int(row["workload"].split(" x ")[0])
        peer = reference.get(rows)
        ratio = f"{row['tokens_per_s'] / peer:.2f}x" if peer else ""
        lines.append(
            f"| {row['workload']} | {row['model']} | {row.get('path', '')} | "
            f"{row['tokens_per_s']:,.0f} | {f'{peer:,.0f}' if peer else 'missing'} | {ratio} |"
        )
    lines.append(
        f"\nPyTorch peak memory: {results['peak_memory_mb']:,.0f} MB "
        f"({results['peak_memory_kind']})"
    )
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--small", action="store_true", help="a small biLM and batches (CPU)")
    parser.add_argument("--calls", type=int, default=5, help="timed calls per row (default 5)")
    parser.add_argument("--workloads", type=pathlib.Path, help="[[name, sentences], ...] JSON")
    parser.add_argument("--reference", type=pathlib.Path, default=REFERENCE)
    parser.add_argument("--json", type=pathlib.Path, help="also write the results here")
    args = parser.parse_args()
    if os.environ.setdefault("KERAS_BACKEND", "torch") != "torch":
        backend = os.environ["KERAS_BACKEND"]
        sys.exit(f"error: KERAS_BACKEND must be torch here. Received: {backend!r}")
    sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]
    # As on the GPU machine, where there is none: Keras' serializer would import it otherwise.
    sys.modules["tensorflow"] = None
    import keras
    import torch

    set_tf32_off(torch)
    if args.workloads:
        workloads = json.loads(args.workloads.read_text())
    else:  # 20-token sentences of the AllenNLP fixture's vocabulary
        import numpy as np

        words = (REPO / "tests/fixtures/allennlp/vocab_test.txt").read_text().split()
        rng = np.random.default_rng(0)
        workloads = [
            (f"{n} x 20", [list(rng.choice(words, 20)) for _ in range(n)])
            for n in ((4, 16) if args.small else (64, 512))
        ]
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"
    results = {"device": device, "torch": torch.__version__, "keras": keras.__version__}
    results["exactness"] = exactness(torch)
    for expected in ("fixture", "float64"):
        diffs = [
            diff
            for name, row in results["exactness"].items()
            if name.endswith(f"vs {expected}") and not name.startswith("fixture")
            for diff in row.values()
        ]
        results[f"within_1e-6_of_{expected}"] = max(diffs) <= TARGET_ON_CUDA
    print(json.dumps({"exactness": results["exactness"]}), flush=True)
    results["speed"] = speed(torch, args.small, workloads, args.calls)
    results["reference"] = reference_rows(args.small, workloads, args.reference)
    results["peak_memory_mb"], results["peak_memory_kind"] = peak_memory_mb(torch)
    print(report(results), flush=True)
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(results, indent=1) + "\n")


if __name__ == "__main__":
    main()
