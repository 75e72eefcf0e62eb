#!/usr/bin/env python
"""Host operators per call of the biLM on PyTorch: what a GPU's host launches, counted on a CPU.

On a GPU each PyTorch operator costs the host microseconds to launch whatever its size, so a
call of many small operators is bound by the host. This counts the operators one
`elmo_keras.allennlp.Elmo` forward dispatches (ids already made; views, which launch nothing,
left out), the whole call and its biLSTM alone, for the biLSTM's three ways on a non-CPU device:

- "CPU design": `torch_fast_path`'s packed steps as they run off the CPU (plain `addmm`, no
  direction threads), what ran on the H200 before `torch_gpu_path`;
- "masked, eager": `torch_gpu_path.masked_bilstm` (every row at every step, no graph);
- "masked, graphed": `torch_gpu_path.packed_bilstm` with a CUDA graph, whose replay launches
  its kernels from the device's side: here the capture is replaced by a replay that does
  nothing, so what is counted is what the host still does (copies in, the replay, copies out).

The model is the small configuration of `accelerator_torch.py`: the counts depend on the shape
and the configuration (filters, windows of input products), not on the machine.

    python benchmarks/torch_host_operators.py --rows 64 --steps 20
"""

import argparse
import json
import os
import pathlib
import sys
import tempfile

REPO = pathlib.Path(__file__).resolve().parents[1]
# Operators that make a view of a tensor: no kernel runs.
VIEWS = {
    "aten.slice.Tensor",
    "aten.select.int",
    "aten.view.default",
    "aten._unsafe_view.default",
    "aten.transpose.int",
    "aten.t.default",
    "aten.permute.default",
    "aten.unsqueeze.default",
    "aten.squeeze.dim",
    "aten.expand.default",
    "aten.reshape.default",
    "aten.unflatten.int",
    "aten.unfold.default",
    "aten.alias.default",
    "aten.detach.default",
    "aten.split.Tensor",
    "aten.as_strided.default",
}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=64, help="sentences per call (default 64)")
    parser.add_argument("--steps", type=int, default=20, help="tokens per sentence (default 20)")
    parser.add_argument("--json", type=pathlib.Path, help="also write the counts here")
    args = parser.parse_args()
    if os.environ.setdefault("KERAS_BACKEND", "torch") != "torch":
        sys.exit(
            f"error: KERAS_BACKEND must be torch here. Received: {os.environ['KERAS_BACKEND']!r}"
        )
    sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]
    import numpy as np
    import torch
    from accelerator_torch import random_model
    from torch.utils._python_dispatch import TorchDispatchMode

    from elmo_keras.allennlp import Elmo, batch_to_ids
    from elmo_keras.layers import torch_fast_path, torch_gpu_path, torch_products

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.kernels = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.kernels += str(func) not in VIEWS
            return func(*args, **(kwargs or {}))

    counted = {}

    def counting(function):
        def wrapped(*a):
            with Count() as count:
                result = function(*a)
            counted["bilstm"] = count.kernels
            return result

        return wrapped

    def idle_capture(function, static):
        return (lambda: None), function(*static)

    cpu_design = torch_fast_path.packed_bilstm
    ways = {
        "CPU design": counting(cpu_design),
        "masked, eager": counting(torch_gpu_path.masked_bilstm),
        "masked, graphed": counting(torch_gpu_path.packed_bilstm),
    }
    torch_products.ONEDNN = False  # as off the CPU: plain addmm, no direction threads
    torch_fast_path._direction_pool = lambda device: None
    torch_gpu_path._capture = idle_capture
    torch_gpu_path.GRAPH_DEVICES = ("cpu",)
    torch_gpu_path.CAPTURE_AT = 1
    words = (REPO / "tests/fixtures/allennlp/vocab_test.txt").read_text().split()
    rng = np.random.default_rng(0)
    sentences = [list(rng.choice(words, args.steps)) for _ in range(args.rows)]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        random_model(True, pathlib.Path(tmp))
        elmo = Elmo(f"{tmp}/options.json", f"{tmp}/weights.hdf5", 1, dropout=0.0).eval()
        ids = batch_to_ids(sentences)
        for way, function in ways.items():
            torch_fast_path.packed_bilstm = function
            with torch.no_grad():
                elmo(ids)  # a first call: products made, the graph captured
                with Count() as count:
                    elmo(ids)
            rows.append({"way": way, "call": count.kernels, "bilstm": counted["bilstm"]})
    print(f"Host operators (views left out), `Elmo` forward, {args.rows} x {args.steps} tokens")
    print("\n| biLSTM | whole call | biLSTM alone |\n|---|---|---|")
    for row in rows:
        print(f"| {row['way']} | {row['call']:,} | {row['bilstm']:,} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
