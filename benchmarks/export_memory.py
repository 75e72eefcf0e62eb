"""Peak memory and wall time of an ONNX export, each in a fresh process.

Writes random weights for a configuration of `inference_modes.CONFIGS` (`full` is the published
2x4096_512_2048cnn_2xhighway model) once into `--workdir`, then runs `export_onnx` in a new
Python process and reports that process's peak resident set (`VmHWM`: TensorFlow, the loaded
biLM and the conversion together) and its wall times, as a table with the machine line.

    nice python benchmarks/export_memory.py                     # full config, token_index form
    python benchmarks/export_memory.py --config tiny --input-form char_ids

Before the weights became graph inputs (issue 10), tf2onnx froze them into constants: the full
configuration peaked at 18.3 GiB and took 127 s on the AVX-512 machine of
../shared/PERFORMANCE.md.
"""

import argparse
import json
import pathlib
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))

from common import machine_line, peak_rss_mb, table_header, table_row  # noqa: E402

_WRITE = """
import sys
sys.path.insert(0, {bench!r})
from inference_modes import write_random_model
write_random_model({config!r}, {workdir!r})
"""

_EXPORT = """
import json, os, resource, sys, time
sys.path.insert(0, {bench!r})
from common import environment, peak_rss_mb
start = time.perf_counter()
from elmo_keras.export import export_onnx
from elmo_keras.models import BiLM
imported, rss_imported = time.perf_counter(), peak_rss_mb()
bilm = BiLM.from_bilm_tf({options!r}, {weights!r})
loaded, rss_loaded = time.perf_counter(), peak_rss_mb()
export_onnx(bilm, {output!r}, stateful={stateful!r}, input_form={input_form!r})
done = time.perf_counter()
usage = resource.getrusage(resource.RUSAGE_SELF)
print(json.dumps({{
    "cpu_s": usage.ru_utime + usage.ru_stime,
    "import_s": imported - start, "load_s": loaded - imported, "export_s": done - loaded,
    "peak_after_import_mb": rss_imported, "peak_after_load_mb": rss_loaded,
    "peak_mb": peak_rss_mb(), "onnx_mb": os.path.getsize({output!r}) / 2**20,
    "env": environment(),
}}))
"""


def _python(code):
    """Runs `code` in a fresh interpreter; returns its last stdout line."""
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=False
    )
    if result.returncode != 0:
        raise SystemExit(f"child process failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default="full", help="a key of inference_modes.CONFIGS")
    parser.add_argument(
        "--workdir", default=str(pathlib.Path(tempfile.gettempdir()) / "elmo_export_memory")
    )
    parser.add_argument("--input-form", default="token_index", choices=["token_index", "char_ids"])
    parser.add_argument("--stateful", action="store_true")
    args = parser.parse_args(argv)

    bench = str(pathlib.Path(__file__).resolve().parent)
    workdir = pathlib.Path(args.workdir) / args.config
    workdir.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    _python(_WRITE.format(bench=bench, config=args.config, workdir=str(workdir)))
    print(f"weights ready in {workdir} ({time.perf_counter() - start:.0f} s)", flush=True)
    output = workdir / "model.onnx"
    report = json.loads(
        _python(
            _EXPORT.format(
                bench=bench,
                options=str(workdir / "options.json"),
                weights=str(workdir / "weights.hdf5"),
                output=str(output),
                stateful=args.stateful,
                input_form=args.input_form,
            )
        )
    )
    output.unlink(missing_ok=True)
    print()
    print(
        f"ONNX export of the `{args.config}` configuration ({args.input_form} form"
        f"{', stateful' if args.stateful else ''}), fresh process"
    )
    rows = [
        ("import TensorFlow + elmo_keras", report["import_s"], report["peak_after_import_mb"]),
        ("load_bilm", report["load_s"], report["peak_after_load_mb"]),
        ("export_onnx", report["export_s"], report["peak_mb"]),
    ]
    total = sum(seconds for _, seconds, _ in rows)
    print(table_header(["stage", "wall s", "peak RSS GiB (VmHWM, cumulative)"]))
    for stage, seconds, peak in rows:
        print(table_row([stage, f"{seconds:.1f}", f"{peak / 1024:.2f}"]))
    print(table_row(["**whole process**", f"{total:.1f}", f"**{report['peak_mb'] / 1024:.2f}**"]))
    print(
        f"\nCPU time of the export process: {report['cpu_s']:.0f} s (user + system; the wall "
        "times include waiting for the CPU when it is shared)"
    )
    print(f"model.onnx: {report['onnx_mb']:.0f} MiB; this process: {peak_rss_mb():.0f} MB peak")
    print(machine_line(report["env"]))
    return report


if __name__ == "__main__":
    main()
