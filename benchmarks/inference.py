#!/usr/bin/env python
"""Inference speed and peak memory of the biLM: eager, `tf.function` and XLA (and plug-ins).

Run from the repository root:

    python benchmarks/inference.py                          # full published configuration
    python benchmarks/inference.py --config tiny --repeats 1 # smoke run (seconds)
    python benchmarks/inference.py --modes function,xla --batches 32 --json results.json

What it does:
1. Builds a `BiLM` with random weights (the full published configuration, REFERENCE.md section
   2, or a tiny one), writes it in the published layout (`options.json` + hdf5, through
   `elmo_keras.weights`) into a temporary folder and loads it back with `load_bilm`, so the
   benchmark runs the real loading path.
2. Makes the workloads: batches of 1, 32 and 64 sentences of exactly 20 tokens, and one
   "natural" batch of 32 sentences of 5-60 tokens. Tokens are real text (WikiText-2 test
   from `../shared/data` when present, else a seeded Zipf draw over a fixed word list),
   converted with `elmo_keras.text.char_ids.batch_to_char_ids` before timing (conversion is
   not timed).
3. Timing, in this process: every (mode, workload) is called `--warmup` times first (tracing,
   XLA compilation, oneDNN primitive creation: excluded), then `--repeats` rounds in which
   each workload runs once in every mode, the mode order rotating each round (interleaved, so
   the noise of a shared machine hits every mode alike). Reported: the median.
   tokens/s counts real input tokens (no `<S>`/`</S>`, no padding); a call is timed until its
   `activations` are a NumPy array.
4. Peak memory (`--memory subprocess`, the default for the full config): one fresh process
   per mode (started after the timing, so it does not disturb it) loads the same files with
   `load_bilm`; then, for each workload, it resets the kernel's resident-set high-water mark
   (`echo 5 > /proc/self/clear_refs`), makes one warm-up call (tracing / XLA compilation
   included) and one timed call, and reads `VmHWM` from `/proc/self/status`. That is the peak
   resident set of the whole process during that workload: weights, TF runtime, allocator
   caches, compiled code included, and no memory of another mode or workload. (Not
   `ru_maxrss`: Linux carries it over from the forking parent across `exec`, so a child of a
   large process reports at least the parent's size.) The peak while loading (before any
   call; it can exceed a workload's peak, as loading holds the file's arrays and the random
   initial weights at once) is reported too. Where `clear_refs` cannot be written, the
   high-water mark is cumulative and the workloads run in increasing size, so it is still an
   upper bound.
   The tiny config defaults to `--memory none` to stay a seconds-long smoke run.

Modes are a registry: `register_mode(name, factory, description)`. A factory receives a
`BenchContext` (the loaded `bilm`, the options and weight paths, a scratch `workdir`, the
config name) and returns a callable `f(char_ids: np.ndarray int32 [B, T, 50]) -> outputs` (a
dict with "activations", or an array, or a list of arrays). Modes not registered here are
looked up in `benchmarks/inference_export.py` when `--modes` names them: that module may call
`register_mode` (import it as `from benchmarks.inference import register_mode`) or define a
`MODES = {name: factory}` dict or a `register_modes(register_mode)` function.

`run_benchmark(...)` is the programmatic entry point; it returns the result dict that
`--json` writes.
"""

import os

# oneDNN must be chosen before TensorFlow is first imported (PERFORMANCE.md, point 1).
_ONEDNN_ENV_BEFORE = os.environ.get("TF_ENABLE_ONEDNN_OPTS")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "1")

import sys  # noqa: E402

_TF_IMPORTED_BEFORE = "tensorflow" in sys.modules

import argparse  # noqa: E402
import dataclasses  # noqa: E402
import importlib.util  # noqa: E402
import json  # noqa: E402
import pathlib  # noqa: E402
import platform  # noqa: E402
import resource  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from concurrent.futures import ThreadPoolExecutor  # noqa: E402

import numpy as np  # noqa: E402

_HERE = pathlib.Path(__file__).resolve().parent
_REPO = _HERE.parent
if str(_REPO) not in sys.path:
    sys.path.insert(0, str(_REPO))
if __name__ == "__main__":
    # One module object whichever way a plug-in imports us, so that `register_mode` calls made
    # by `benchmarks/inference_export.py` land in the registry this run uses.
    sys.modules.setdefault("benchmarks.inference", sys.modules[__name__])
    sys.modules.setdefault("inference", sys.modules[__name__])

# Yardsticks measured on this machine type (../shared/PERFORMANCE.md): the fp32 matmul ceiling
# of the full model on 2 cores, and AllenNLP's ELMo (PyTorch) on the same shapes.
MATMUL_CEILING_TOKENS_PER_S = 740.0
ALLENNLP_TOKENS_PER_S = {"b1x20": 40.0, "b32x20": 279.0, "natural32": 142.0}
ALLENNLP_B32 = ALLENNLP_TOKENS_PER_S["b32x20"]

CONFIGS = {
    # REFERENCE.md section 2: elmo_2x4096_512_2048cnn_2xhighway.
    "full": {
        "lstm": {
            "dim": 4096,
            "projection_dim": 512,
            "n_layers": 2,
            "cell_clip": 3.0,
            "proj_clip": 3.0,
            "use_skip_connections": True,
        },
        "char_cnn": {
            "embedding": {"dim": 16},
            "filters": [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]],
            "n_highway": 2,
            "n_characters": 262,
            "max_characters_per_token": 50,
            "activation": "relu",
        },
    },
    # Same structure (2 layers, residual, clips, 2 highway), tiny sizes: a smoke run.
    "tiny": {
        "lstm": {
            "dim": 64,
            "projection_dim": 16,
            "n_layers": 2,
            "cell_clip": 3.0,
            "proj_clip": 3.0,
            "use_skip_connections": True,
        },
        "char_cnn": {
            "embedding": {"dim": 4},
            "filters": [[1, 4], [2, 8], [3, 8]],
            "n_highway": 2,
            "n_characters": 262,
            "max_characters_per_token": 50,
            "activation": "relu",
        },
    },
}

DEFAULT_MODES = ("eager", "function", "xla")
DEFAULT_BATCHES = (1, 32, 64)
SENTENCE_LENGTH = 20
NATURAL_BATCH = 32
NATURAL_LENGTHS = (5, 60)
WIKITEXT = _REPO.parent / "shared" / "data" / "wikitext-2" / "test.raw.txt"


# --------------------------------------------------------------------------------------------
# Mode registry
# --------------------------------------------------------------------------------------------


@dataclasses.dataclass
class BenchContext:
    """What a mode factory gets: the loaded model and the files it was loaded from."""

    bilm: object
    options_path: pathlib.Path
    weights_path: pathlib.Path
    workdir: pathlib.Path
    config: str


@dataclasses.dataclass
class Mode:
    name: str
    factory: object
    description: str = ""


MODES = {}


def register_mode(name, factory, description=""):
    """Adds (or replaces) a mode: `factory(BenchContext) -> f(char_ids) -> outputs`."""
    MODES[name] = Mode(name, factory, description)
    return factory


def _signature(bilm):
    import tensorflow as tf

    return [tf.TensorSpec([None, None, bilm.max_characters_per_token], tf.int32, name="char_ids")]


def _eager_mode(ctx):
    bilm = ctx.bilm
    return lambda ids: bilm(ids, training=False)


def _function_mode(ctx):
    import tensorflow as tf

    bilm = ctx.bilm
    return tf.function(
        lambda ids: bilm(ids, training=False), input_signature=_signature(bilm), autograph=False
    )


def _xla_mode(ctx):
    import tensorflow as tf

    bilm = ctx.bilm
    return tf.function(
        lambda ids: bilm(ids, training=False),
        input_signature=_signature(bilm),
        jit_compile=True,
        autograph=False,
    )


register_mode("eager", _eager_mode, "Keras eager call, `bilm(ids)`")
register_mode("function", _function_mode, "`tf.function`, input signature [None, None, 50] int32")
register_mode("xla", _xla_mode, "`tf.function(jit_compile=True)`, same signature")

_PLUGIN = "inference_export"


def _load_plugins(names):
    """Imports `benchmarks/inference_export.py` if a requested mode is not registered yet."""
    missing = [n for n in names if n not in MODES]
    if not missing:
        return
    path = _HERE / f"{_PLUGIN}.py"
    if not path.is_file():
        raise SystemExit(
            f"error: unknown mode(s) {missing}; known: {sorted(MODES)} "
            f"(and {path.name} does not exist)"
        )
    module = sys.modules.get(f"benchmarks.{_PLUGIN}")
    if module is None:
        spec = importlib.util.spec_from_file_location(f"benchmarks.{_PLUGIN}", path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        try:
            spec.loader.exec_module(module)
        except Exception as error:  # a broken plug-in must not hide the core modes' message
            del sys.modules[spec.name]
            raise SystemExit(
                f"error: mode(s) {missing} need {path.name}, which failed to import: "
                f"{type(error).__name__}: {error}"
            ) from None
    if callable(getattr(module, "register_modes", None)):
        module.register_modes(register_mode)
    for name, factory in dict(getattr(module, "MODES", {}) or {}).items():
        if name not in MODES:
            register_mode(name, factory, getattr(factory, "__doc__", "") or "")
    still = [n for n in names if n not in MODES]
    if still:
        raise SystemExit(f"error: unknown mode(s) {still}; known: {sorted(MODES)}")


# --------------------------------------------------------------------------------------------
# Workloads
# --------------------------------------------------------------------------------------------

# A fallback vocabulary when WikiText-2 is not at ../shared: common words first, so a Zipf draw
# repeats them the way real text does.
_WORDS = (
    "the , . of and to in a is that for it as was with on he by I 's at be from his an this "
    "are or have not which had but they were their one has been ( ) all also its who there "
    "more would first new after can time than two some other into when only her she years "
    "most over between about made may many these such during year up world city state "
    "however used under people three \" later part him them so while first known season war "
    "game film series album song government century American British United States French "
    "German London John David North South river church school university team league club "
    "released including became began number early several following against called second "
    "around until where before high city's won't couldn't 1990 2000 2011 @-@ @,@ @.@ ; : "
    "Robert Boulter television actor starring role performed theatre episode Teddy Story "
    "hurricane storm tropical wind damage coast island ship navy battle army division forces "
    "species genus female male birds plumage breeding nest eggs population habitat forest"
).split()


def _wikitext_stream():
    """The WikiText-2 test tokens, sentence by sentence (split after ' . '), or None."""
    if not WIKITEXT.is_file():
        return None
    sentences = []
    for line in WIKITEXT.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("="):
            continue
        current = []
        for token in line.split():
            current.append(token)
            if token in (".", "?", "!"):
                sentences.append(current)
                current = []
        if current:
            sentences.append(current)
    return sentences


def _synthetic_sentences(rng, n, lengths):
    ranks = np.arange(1, len(_WORDS) + 1)
    p = 1.0 / ranks**1.1
    p /= p.sum()
    out = []
    for length in lengths[:n]:
        out.append([_WORDS[i] for i in rng.choice(len(_WORDS), size=int(length), p=p)])
    return out


@dataclasses.dataclass
class Workload:
    name: str
    label: str
    sentences: list
    char_ids: np.ndarray

    @property
    def batch(self):
        return len(self.sentences)

    @property
    def tokens(self):
        return sum(len(s) for s in self.sentences)

    @property
    def positions(self):
        return int(np.prod(self.char_ids.shape[:2]))


def make_workloads(batches=DEFAULT_BATCHES, natural=True, seed=0, max_characters_per_token=50):
    """Fixed-length batches `b{B}x20` and a `natural32` batch; returns (workloads, source)."""
    from elmo_keras.text.char_ids import batch_to_char_ids

    stream = _wikitext_stream()
    source = f"WikiText-2 test ({WIKITEXT})" if stream else "synthetic Zipf draw (fallback)"
    workloads = []
    if stream:
        flat = [t for s in stream for t in s]
    for batch in batches:
        rng = np.random.default_rng([seed, batch])  # each workload independent of the others
        if stream:
            start = int(rng.integers(0, len(flat) - batch * SENTENCE_LENGTH))
            chunk = flat[start : start + batch * SENTENCE_LENGTH]
            sentences = [
                chunk[i * SENTENCE_LENGTH : (i + 1) * SENTENCE_LENGTH] for i in range(batch)
            ]
        else:
            sentences = _synthetic_sentences(rng, batch, [SENTENCE_LENGTH] * batch)
        workloads.append(
            Workload(
                f"b{batch}x{SENTENCE_LENGTH}",
                f"{batch} x {SENTENCE_LENGTH}",
                sentences,
                batch_to_char_ids(sentences, max_characters_per_token=max_characters_per_token),
            )
        )
    if natural:
        rng = np.random.default_rng([seed, 0])
        low, high = NATURAL_LENGTHS
        if stream:
            fitting = [s for s in stream if low <= len(s) <= high]
            start = int(rng.integers(0, len(fitting) - NATURAL_BATCH))
            sentences = fitting[start : start + NATURAL_BATCH]
        else:
            lengths = np.clip(rng.gamma(3.0, 8.0, NATURAL_BATCH).astype(int), low, high)
            sentences = _synthetic_sentences(rng, NATURAL_BATCH, lengths)
        longest = max(len(s) for s in sentences)
        workloads.append(
            Workload(
                f"natural{NATURAL_BATCH}",
                f"{NATURAL_BATCH} natural ({min(len(s) for s in sentences)}-{longest})",
                sentences,
                batch_to_char_ids(sentences, max_characters_per_token=max_characters_per_token),
            )
        )
    return workloads, source


# --------------------------------------------------------------------------------------------
# Model files
# --------------------------------------------------------------------------------------------


def write_random_model(config, directory, seed=0):
    """Random weights for `config`, written as `options.json` + `weights.hdf5` in `directory`."""
    import keras

    from elmo_keras.models.bilm import BiLM
    from elmo_keras.weights import save_weights, write_options

    directory = pathlib.Path(directory)
    options_path = directory / "options.json"
    weights_path = directory / "weights.hdf5"
    options = CONFIGS[config]
    marker = directory / "config.json"
    if (
        options_path.is_file()
        and weights_path.is_file()
        and marker.is_file()
        and json.loads(marker.read_text()) == {"config": config, "seed": seed}
    ):
        return options_path, weights_path  # reused (--workdir kept from an earlier run)
    keras.utils.set_random_seed(seed)
    bilm = BiLM.from_options(options)
    bilm.build()
    write_options(options, options_path)
    save_weights(bilm, weights_path)
    marker.write_text(json.dumps({"config": config, "seed": seed}))
    del bilm
    return options_path, weights_path


def _load(options_path, weights_path):
    from elmo_keras.weights import load_bilm

    return load_bilm(options_path, weights_path)


def _materialize(outputs):
    """Forces the result to host memory: TF may return before a value is used."""
    if isinstance(outputs, dict):
        outputs = outputs.get("activations", next(iter(outputs.values())))
    if isinstance(outputs, list | tuple):
        return [np.asarray(o) for o in outputs]
    return np.asarray(outputs)


def _maxrss_mb():
    """This process's peak resident set in MB: `VmHWM` (Linux), else `ru_maxrss`."""
    try:
        for line in pathlib.Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0  # kB
    except OSError:
        pass
    scale = 1024.0 if sys.platform.startswith("linux") else 2.0**20  # KiB on Linux, B on macOS
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


def _reset_peak_rss():
    """Resets the high-water mark to the current RSS (Linux >= 4.0); False if not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def _environment():
    import keras
    import tensorflow as tf
    from tensorflow.python.util import _pywrap_util_port

    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    cpu = platform.processor()
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    onednn_env = os.environ.get("TF_ENABLE_ONEDNN_OPTS")
    return {
        "tensorflow": tf.__version__,
        "keras": keras.__version__,
        "python": platform.python_version(),
        "cpu": cpu,
        "cpus_usable": affinity,
        "intra_op_threads": tf.config.threading.get_intra_op_parallelism_threads(),
        "inter_op_threads": tf.config.threading.get_inter_op_parallelism_threads(),
        "onednn_env": onednn_env,
        "onednn_env_set_by": "user" if _ONEDNN_ENV_BEFORE is not None else "this script",
        "onednn_on": bool(_pywrap_util_port.IsMklEnabled()),
        "tf_imported_before_script": _TF_IMPORTED_BEFORE,
    }


# --------------------------------------------------------------------------------------------
# Memory: one fresh process per mode
# --------------------------------------------------------------------------------------------


def _memory_worker(args):
    """Runs in a fresh process: load, then per workload (ascending) a warm and a timed call."""
    import tensorflow as tf

    _set_threads(tf, args.intra_op, args.inter_op)
    bilm = _load(args.options, args.weights)
    after_load = _maxrss_mb()
    _load_plugins([args.mode])
    ctx = BenchContext(
        bilm, pathlib.Path(args.options), pathlib.Path(args.weights),
        pathlib.Path(args.workdir), args.config,
    )
    fn = MODES[args.mode].factory(ctx)
    workloads, _ = make_workloads(_batches(args.batches), not args.no_natural, args.seed)
    result = {"mode": args.mode, "rss_after_load_mb": after_load, "peak_rss_mb": {},
              "single_call_s": {}, "peak_reset": True}
    for w in sorted(workloads, key=lambda w: w.positions):
        result["peak_reset"] &= _reset_peak_rss()
        _materialize(fn(w.char_ids))
        start = time.perf_counter()
        _materialize(fn(w.char_ids))
        result["single_call_s"][w.name] = time.perf_counter() - start
        result["peak_rss_mb"][w.name] = _maxrss_mb()
    print("MEMORY_RESULT " + json.dumps(result), flush=True)


def _run_memory_worker(mode, files, args_for_worker):
    command = [
        sys.executable, str(pathlib.Path(__file__).resolve()), "--_memory-worker",
        "--mode", mode,
        "--options", str(files["options"]), "--weights", str(files["weights"]),
        "--workdir", str(files["workdir"]),
    ] + args_for_worker
    proc = subprocess.run(command, capture_output=True, text=True)
    for line in proc.stdout.splitlines():
        if line.startswith("MEMORY_RESULT "):
            return json.loads(line[len("MEMORY_RESULT "):])
    tail = "\n".join((proc.stderr or "").strip().splitlines()[-5:])
    return {"mode": mode, "error": f"worker exited {proc.returncode}: {tail}"}


# --------------------------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------------------------


def _set_threads(tf, intra_op, inter_op):
    if intra_op is not None:
        tf.config.threading.set_intra_op_parallelism_threads(intra_op)
    if inter_op is not None:
        tf.config.threading.set_inter_op_parallelism_threads(inter_op)


def _batches(text):
    if isinstance(text, list | tuple):
        return tuple(int(b) for b in text)
    return tuple(int(b) for b in str(text).split(",") if b.strip())


def run_benchmark(
    modes=DEFAULT_MODES,
    batches=DEFAULT_BATCHES,
    config="full",
    repeats=5,
    warmup=1,
    natural=True,
    memory="subprocess",
    memory_jobs=1,
    workdir=None,
    seed=0,
    intra_op=None,
    inter_op=None,
    log=print,
):
    """Times `modes` on the workloads, interleaved; returns a dict (environment, rows).

    `memory`: "subprocess" (a fresh process per mode, `ru_maxrss`) or "none".
    `workdir`: where the model files go (kept, and reused by a later run with the same
    config); default a temporary folder, deleted at the end.
    """
    import tensorflow as tf

    if config not in CONFIGS:
        raise ValueError(f"`config` must be one of {sorted(CONFIGS)}. Received: config={config!r}")
    if memory not in ("subprocess", "none"):
        raise ValueError(f"`memory` must be 'subprocess' or 'none'. Received: memory={memory!r}")
    modes = tuple(modes)
    batches = _batches(batches)
    _set_threads(tf, intra_op, inter_op)
    _load_plugins(modes)
    env = _environment()
    log(
        f"TensorFlow {env['tensorflow']}, Keras {env['keras']}; {env['cpu']}, "
        f"{env['cpus_usable']} usable CPUs; intra_op_parallelism_threads="
        f"{env['intra_op_threads']}, inter_op_parallelism_threads={env['inter_op_threads']} "
        "(0 = TensorFlow's default, one per usable core)"
    )
    log(
        f"oneDNN: {'ON' if env['onednn_on'] else 'OFF'} (TF_ENABLE_ONEDNN_OPTS="
        f"{env['onednn_env']}, set by {env['onednn_env_set_by']}"
        + ("; TensorFlow was imported before this script, so the setting may not apply)"
           if env["tf_imported_before_script"] else ")")
    )

    temp = None
    if workdir is None:
        temp = tempfile.TemporaryDirectory(prefix="elmo-bench-")
        workdir = temp.name
    workdir = pathlib.Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        start = time.perf_counter()
        options_path, weights_path = write_random_model(config, workdir, seed)
        written = time.perf_counter() - start
        start = time.perf_counter()
        bilm = _load(options_path, weights_path)
        loaded = time.perf_counter() - start
        n_params = int(bilm.count_params())
        log(
            f"config {config}: {n_params:,} parameters; random weights written to {workdir} in "
            f"{written:.1f} s ({weights_path.stat().st_size / 2**20:.0f} MiB), loaded back "
            f"with load_bilm in {loaded:.1f} s"
        )
        workloads, source = make_workloads(batches, natural, seed)
        log(f"text: {source}; " + ", ".join(
            f"{w.name}: {w.tokens} tokens, {len({t for s in w.sentences for t in s})} distinct"
            for w in workloads))
        ctx = BenchContext(bilm, options_path, weights_path, workdir, config)
        fns = {m: MODES[m].factory(ctx) for m in modes}

        warm_s = {}
        for w in workloads:
            for m in modes:
                start = time.perf_counter()
                for _ in range(warmup):
                    _materialize(fns[m](w.char_ids))
                warm_s[(m, w.name)] = time.perf_counter() - start
        log(f"warm-up done ({warmup} call(s) per mode and workload, "
            f"{sum(warm_s.values()):.1f} s); timing {repeats} interleaved rounds")

        times = {(m, w.name): [] for m in modes for w in workloads}
        for r in range(repeats):
            order = modes[r % len(modes):] + modes[: r % len(modes)]
            for w in workloads:
                for m in order:
                    start = time.perf_counter()
                    _materialize(fns[m](w.char_ids))
                    times[(m, w.name)].append(time.perf_counter() - start)
            log(f"  round {r + 1}/{repeats} done")
        timing_process_peak = _maxrss_mb()

        memory_results = {}
        if memory == "subprocess":
            worker_args = ["--config", config, "--batches", ",".join(map(str, batches)),
                           "--seed", str(seed)]
            if not natural:
                worker_args.append("--no-natural")
            if intra_op is not None:
                worker_args += ["--intra-op", str(intra_op)]
            if inter_op is not None:
                worker_args += ["--inter-op", str(inter_op)]
            files = {"options": options_path, "weights": weights_path, "workdir": workdir}
            log(f"memory: a fresh process per mode ({min(memory_jobs, len(modes))} at a time)")
            with ThreadPoolExecutor(max(1, memory_jobs)) as pool:
                for result in pool.map(
                    lambda m: _run_memory_worker(m, files, worker_args), modes
                ):
                    memory_results[result["mode"]] = result
                    if "error" in result:
                        log(f"  memory worker for {result['mode']} failed: {result['error']}")
    finally:
        if temp is not None:
            temp.cleanup()

    full = config == "full"
    rows = []
    for w in workloads:
        for m in modes:
            samples = times[(m, w.name)]
            median = statistics.median(samples)
            tps = w.tokens / median
            mem = memory_results.get(m, {})
            allennlp = ALLENNLP_TOKENS_PER_S.get(w.name) if full else None
            rows.append({
                "mode": m,
                "workload": w.name,
                "label": w.label,
                "batch": w.batch,
                "tokens": w.tokens,
                "positions": w.positions,
                "tokens_per_s": tps,
                "ms_per_batch": median * 1e3,
                "ms_samples": [s * 1e3 for s in samples],
                "warmup_s": warm_s[(m, w.name)],
                "peak_rss_mb": mem.get("peak_rss_mb", {}).get(w.name),
                "rss_after_load_mb": mem.get("rss_after_load_mb"),
                "vs_matmul_ceiling": tps / MATMUL_CEILING_TOKENS_PER_S if full else None,
                "vs_allennlp_b32": tps / ALLENNLP_B32 if full else None,
                "allennlp_same_shape_tokens_per_s": allennlp,
                "vs_allennlp_same_shape": tps / allennlp if allennlp else None,
            })
    return {
        "environment": env,
        "config": config,
        "options": CONFIGS[config],
        "parameters": n_params,
        "text_source": source,
        "repeats": repeats,
        "warmup": warmup,
        "memory_method": _memory_method(memory, memory_results),
        "timing_process_peak_rss_mb": timing_process_peak,
        "memory_workers": memory_results,
        "modes": {m: MODES[m].description for m in modes},
        "rows": rows,
    }


def _memory_method(memory, memory_results):
    if memory != "subprocess":
        return "not measured (--memory none)"
    reset = all(r.get("peak_reset", False) for r in memory_results.values())
    return (
        "a fresh process per mode; VmHWM (peak resident set of the whole process: weights, "
        "runtime, caches) over one warm-up + one timed call of that workload, "
        + ("the high-water mark reset before each workload" if reset else
           "cumulative over the workloads in increasing size (clear_refs not writable)")
    )


def _fmt(value, pattern):
    return "—" if value is None else format(value, pattern)


def format_table(results):
    """The rows as a markdown table."""
    full = results["config"] == "full"
    lines = [
        "| mode | batch | tokens | tokens/s (median) | ms/batch | peak RSS MB | "
        "x ceiling 740 | x AllenNLP b32 279 | x AllenNLP same shape |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for row in results["rows"]:
        lines.append(
            f"| {row['mode']} | {row['label']} | {row['tokens']} | {row['tokens_per_s']:.1f} | "
            f"{row['ms_per_batch']:.1f} | {_fmt(row['peak_rss_mb'], '.0f')} | "
            f"{_fmt(row['vs_matmul_ceiling'], '.2f')} | {_fmt(row['vs_allennlp_b32'], '.2f')} | "
            + (
                f"{row['vs_allennlp_same_shape']:.2f} "
                f"({row['allennlp_same_shape_tokens_per_s']:.0f})"
                if row["vs_allennlp_same_shape"]
                else "—"
            )
            + " |"
        )
    notes = [
        "",
        f"Medians of {results['repeats']} interleaved rounds after {results['warmup']} warm-up "
        "call(s); tokens = real input tokens (no boundaries, no padding).",
        f"Peak RSS: {results['memory_method']}.",
    ]
    after = {m: r.get("rss_after_load_mb") for m, r in results["memory_workers"].items()}
    if after:
        notes.append("Peak RSS while loading (load_bilm: build, random init, hdf5 read, assign; "
                     "before any call): " + ", ".join(
            f"{m} {_fmt(v, '.0f')} MB" for m, v in after.items()) + ".")
    notes.append("Timing process (all modes in one process) peak RSS: "
                 f"{results['timing_process_peak_rss_mb']:.0f} MB.")
    if full:
        notes.append(
            "Yardsticks from ../shared/PERFORMANCE.md (measured on this machine type): fp32 "
            "matmul ceiling ~740 tokens/s for the full model; AllenNLP ELMo 279 tokens/s at "
            "32 x 20, 40 at 1 x 20, 142 on a natural batch of 32 (11-75 tokens)."
        )
    else:
        notes.append("Ratios to the full model's yardsticks are omitted for this config.")
    return "\n".join(lines + notes)


def _parser():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", choices=sorted(CONFIGS), default="full")
    parser.add_argument("--modes", default=",".join(DEFAULT_MODES),
                        help="comma-separated; the plug-in's modes come from "
                             f"benchmarks/{_PLUGIN}.py (default %(default)s)")
    parser.add_argument("--batches", default=None,
                        help="comma-separated sentences per batch, 20 tokens each (default "
                             "1,32,64; tiny: 1,32, fewer XLA compilations)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--warmup", type=int, default=1)
    parser.add_argument("--no-natural", action="store_true", help="skip the natural-lengths row")
    parser.add_argument("--memory", choices=("subprocess", "none"), default=None,
                        help="peak memory method (default: subprocess for full, none for tiny)")
    parser.add_argument("--memory-jobs", type=int, default=None,
                        help="memory workers at once (default 1 for full, all for tiny)")
    parser.add_argument("--workdir", default=None,
                        help="keep the model files here (reused when the config matches)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--intra-op", type=int, default=None)
    parser.add_argument("--inter-op", type=int, default=None)
    parser.add_argument("--json", default=None, help="write the results here")
    # Internal: the per-mode memory process.
    parser.add_argument("--_memory-worker", dest="memory_worker", action="store_true",
                        help=argparse.SUPPRESS)
    parser.add_argument("--mode", help=argparse.SUPPRESS)
    parser.add_argument("--options", help=argparse.SUPPRESS)
    parser.add_argument("--weights", help=argparse.SUPPRESS)
    return parser


def main(argv=None):
    args = _parser().parse_args(argv)
    if args.memory_worker:
        _memory_worker(args)
        return 0
    if args.repeats < 1 or args.warmup < 0:
        print("error: --repeats must be >= 1 and --warmup >= 0", file=sys.stderr)
        return 2
    modes = tuple(m.strip() for m in args.modes.split(",") if m.strip())
    batches = _batches(args.batches or ("1,32,64" if args.config == "full" else "1,32"))
    memory = args.memory or ("subprocess" if args.config == "full" else "none")
    memory_jobs = args.memory_jobs or (1 if args.config == "full" else len(modes))
    start = time.perf_counter()
    results = run_benchmark(
        modes=modes,
        batches=batches,
        config=args.config,
        repeats=args.repeats,
        warmup=args.warmup,
        natural=not args.no_natural,
        memory=memory,
        memory_jobs=memory_jobs,
        workdir=args.workdir,
        seed=args.seed,
        intra_op=args.intra_op,
        inter_op=args.inter_op,
    )
    results["wall_s"] = time.perf_counter() - start
    print()
    print(format_table(results))
    print(f"\n(total {results['wall_s']:.0f} s)")
    if args.json:
        path = pathlib.Path(args.json)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(results, indent=2) + "\n")
        print(f"results written to {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
