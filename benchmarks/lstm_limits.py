#!/usr/bin/env python
"""What limits the full biLSTM on this CPU (issue 10): two probes behind docs/benchmarks.md.

    python benchmarks/lstm_limits.py [--json PATH]        # about a minute on 2 cores

1. `directions`: Keras's `ProjectedBiLSTM` of the published size (random weights, packed path)
   on 64 x 22 positions, in two fresh processes: TensorFlow's default inter-op threads, which
   may run the forward and the backward loops at the same time, and `inter_op=1`, which runs
   them one after the other as ONNX Runtime's sequential executor does. Medians of 5 calls.
2. `products`: one recurrent step's two products, `[n, 512] @ [512, 16384]` then
   `[n, 4096] @ [4096, 512]` (40 MB of float32 weights), for n running rows, 50 steps in a
   loop: TensorFlow (`tf.while_loop` in a `tf.function`) against ONNX Runtime (one session
   call per step). Few rows stream the weights; the `GB/s` column is 40 MB over the step time.
"""

import argparse
import json
import statistics
import subprocess
import sys

import common
import numpy as np

ROWS = (1, 4, 16, 32, 64)
STEPS = 50


def _seconds_per_step(run_steps):
    """Median over 5 calls of `run_steps()` (which runs `STEPS` steps), per step; after one
    warm-up call."""
    run_steps()
    return statistics.median(common.timed(run_steps)[1] / STEPS for _ in range(5))


DIRECTIONS_CHILD = """
import json, sys, time, statistics
sys.path.insert(0, sys.argv[1])
import common
common.prefer_onednn()
import tensorflow as tf
if sys.argv[2] != "default":
    tf.config.threading.set_inter_op_parallelism_threads(int(sys.argv[2]))
from elmo_keras.layers import ProjectedBiLSTM
layer = ProjectedBiLSTM(lstm_units=4096, projection_dim=512, n_layers=2)
x = tf.random.normal([64, 22, 512], seed=0)
run = tf.function(lambda x: layer(x, training=False))
run(x)
times = []
for _ in range(5):
    start = time.perf_counter()
    run(x).numpy()
    times.append(time.perf_counter() - start)
print(json.dumps({"ms": 1000 * statistics.median(times), "env": common.environment()}))
"""


def directions():
    results = {}
    for setting in ("default", "1"):
        out = subprocess.run(
            [sys.executable, "-c", DIRECTIONS_CHILD, str(common.REPO / "benchmarks"), setting],
            capture_output=True,
            text=True,
            check=True,
        )
        results[setting] = json.loads(out.stdout.strip().splitlines()[-1])
    return results


def _tf_products():
    import tensorflow as tf

    rng = np.random.default_rng(0)
    recurrent = tf.constant(rng.normal(0, 0.01, (512, 16384)).astype("float32"))
    projection = tf.constant(rng.normal(0, 0.01, (4096, 512)).astype("float32"))

    @tf.function
    def steps(h):
        def body(i, h):
            z = tf.matmul(h, recurrent)
            return i + 1, h + 1e-3 * tf.matmul(z[:, :4096], projection)

        return tf.while_loop(lambda i, _: i < STEPS, body, (0, h))[1]

    rows = {n: tf.constant(rng.normal(size=(n, 512)).astype("float32")) for n in ROWS}
    return {n: _seconds_per_step(lambda h=h: steps(h).numpy()) for n, h in rows.items()}


def _ort_products():
    import onnxruntime
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    weights = {
        "recurrent": rng.normal(0, 0.01, (512, 16384)).astype("float32"),
        "projection": rng.normal(0, 0.01, (4096, 512)).astype("float32"),
        "starts": np.array([0], np.int64),
        "ends": np.array([4096], np.int64),
        "axes": np.array([1], np.int64),
    }
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["h", "recurrent"], ["z"]),
            helper.make_node("Slice", ["z", "starts", "ends", "axes"], ["gate"]),
            helper.make_node("MatMul", ["gate", "projection"], ["out"]),
        ],
        "step_products",
        [helper.make_tensor_value_info("h", TensorProto.FLOAT, ["n", 512])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 512])],
        [numpy_helper.from_array(value, name) for name, value in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    session = onnxruntime.InferenceSession(model.SerializeToString())

    def run_steps(h):
        for _ in range(STEPS):
            session.run(None, {"h": h})

    rows = {n: rng.normal(size=(n, 512)).astype("float32") for n in ROWS}
    return {n: _seconds_per_step(lambda h=h: run_steps(h)) for n, h in rows.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args(argv)
    common.prefer_onednn()

    both = directions()
    # the children inherit this process's variable: who chose it is this process's record
    both["default"]["env"]["onednn_env_set_by"] = common.environment(False)["onednn_env_set_by"]
    print(common.machine_line(both["default"]["env"]))
    print("\n1. ProjectedBiLSTM (4096 units, projection 512, 2 layers), 64 x 22 positions")
    print(common.table_header(["inter-op threads", "ms per call (median of 5)"]))
    for setting, result in both.items():
        print(common.table_row([setting, f"{result['ms']:.0f}"]))
    ratio = both["1"]["ms"] / both["default"]["ms"]
    print(f"one direction after the other: {ratio:.2f}x the time of both at once")

    tf_times, ort_times = _tf_products(), _ort_products()
    print("\n2. One step's two products (40 MB of weights), ms per step (GB/s of weights)")
    print(common.table_header(["rows", "TensorFlow", "ONNX Runtime", "TF / ORT time"]))
    for n in ROWS:
        cells = [f"{1000 * t[n]:.2f} ({0.04 / t[n]:.0f})" for t in (tf_times, ort_times)]
        print(common.table_row([n, *cells, f"{tf_times[n] / ort_times[n]:.2f}"]))
    if args.json:
        common.write_json(
            args.json,
            {
                "environment": both["default"]["env"],
                "directions_ms": {k: v["ms"] for k, v in both.items()},
                "products_s": {
                    "tensorflow": {str(n): t for n, t in tf_times.items()},
                    "onnxruntime": {str(n): t for n, t in ort_times.items()},
                },
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
