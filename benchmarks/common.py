"""What the timing scripts in `benchmarks/` share: the machine line, peak memory, timing, the
benchmark text, tables and JSON results.

Import it before TensorFlow and call `prefer_onednn()` first: oneDNN must be chosen before
TensorFlow is imported (../shared/PERFORMANCE.md, point 1).
"""

import dataclasses
import json
import os
import pathlib
import platform
import resource
import sys
import time

import numpy as np

REPO = pathlib.Path(__file__).resolve().parents[1]
WIKITEXT_DIR = REPO.parent / "shared" / "data" / "wikitext-2"
if str(REPO) not in sys.path:  # `python benchmarks/x.py` from a checkout that is not installed
    sys.path.insert(0, str(REPO))

# The instruction sets that decide matmul speed on a CPU, in the order they are printed.
SIMD_FLAGS = tuple(
    "avx avx2 fma f16c avx512f avx512_bf16 avx512_vnni avx_vnni amx_tile amx_bf16 amx_int8".split()
)

_STARTUP = {"onednn_env_set_by": None, "tf_imported_before_script": None}


def prefer_onednn(log_level="1"):
    """Sets `TF_ENABLE_ONEDNN_OPTS=1` unless the user chose; records who chose, and whether
    TensorFlow was imported already (then the setting may not apply)."""
    _STARTUP["onednn_env_set_by"] = (
        "user" if "TF_ENABLE_ONEDNN_OPTS" in os.environ else "this script"
    )
    _STARTUP["tf_imported_before_script"] = "tensorflow" in sys.modules
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "1")
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", log_level)


# --------------------------------------------------------------------------------------------
# The machine
# --------------------------------------------------------------------------------------------


def _cpuinfo_field(name):
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(name):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return None


def cpu_flags():
    """The SIMD flags of `SIMD_FLAGS` this CPU has (Linux), in that order; [] if unknown."""
    have = set((_cpuinfo_field("flags") or "").split())
    return [flag for flag in SIMD_FLAGS if flag in have]


def environment(with_tensorflow=True):
    """The machine and runtime a result was measured on (a dict stored with the results)."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    env = {
        "python": platform.python_version(),
        "cpu": _cpuinfo_field("model name") or platform.processor(),
        "cpu_flags": cpu_flags(),
        "cpus_usable": usable,
        "onednn_env": os.environ.get("TF_ENABLE_ONEDNN_OPTS"),
        **_STARTUP,
    }
    if with_tensorflow:
        import keras
        import tensorflow as tf
        from tensorflow.python.util import _pywrap_util_port

        env.update(
            tensorflow=tf.__version__,
            keras=keras.__version__,
            intra_op_threads=tf.config.threading.get_intra_op_parallelism_threads(),
            inter_op_threads=tf.config.threading.get_inter_op_parallelism_threads(),
            onednn_on=bool(_pywrap_util_port.IsMklEnabled()),
        )
    return env


def machine_line(env):
    """One line for the top or foot of a table: CPU, its flags, TensorFlow, threads, oneDNN."""
    flags = " ".join(env["cpu_flags"]) or "unknown"
    line = f"CPU: {env['cpu']}, {env['cpus_usable']} usable cores; flags: {flags}"
    if "tensorflow" not in env:
        return line + f"; Python {env['python']}"
    line += (
        f"; TensorFlow {env['tensorflow']}, Keras {env['keras']}; intra_op/inter_op threads "
        f"{env['intra_op_threads']}/{env['inter_op_threads']} (0 = one per usable core); "
        f"oneDNN {'ON' if env['onednn_on'] else 'OFF'} (TF_ENABLE_ONEDNN_OPTS="
        f"{env['onednn_env']}, set by {env['onednn_env_set_by'] or 'the environment'}"
    )
    if env["tf_imported_before_script"]:
        line += "; TensorFlow was imported first, so the setting may not apply"
    return line + ")"


# --------------------------------------------------------------------------------------------
# Peak memory and timing
# --------------------------------------------------------------------------------------------


def peak_rss_mb():
    """This process's peak resident set in MB: `VmHWM` (Linux), else `ru_maxrss`."""
    try:
        for line in pathlib.Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0  # kB
    except OSError:
        pass
    scale = 1024.0 if sys.platform.startswith("linux") else 2.0**20  # KiB on Linux, B on macOS
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / scale


def reset_peak_rss():
    """Resets the high-water mark to the current RSS (Linux >= 4.0); False if not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


def timed(fn, *args, **kwargs):
    """`(fn(*args, **kwargs), seconds)`, wall clock."""
    start = time.perf_counter()
    result = fn(*args, **kwargs)
    return result, time.perf_counter() - start


def rotated(items, round_index):
    """`items` starting at `round_index % len(items)`: interleaved rounds change the order."""
    if not items:
        return ()
    k = round_index % len(items)
    return tuple(items[k:]) + tuple(items[:k])


# --------------------------------------------------------------------------------------------
# Tables and results
# --------------------------------------------------------------------------------------------


def table_header(columns):
    """A markdown table's two header lines."""
    return "| " + " | ".join(columns) + " |\n" + "|---" * len(columns) + "|"


def table_row(cells):
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def fmt(value, pattern):
    """`value` formatted, or an em dash for a missing value."""
    return "—" if value is None else format(value, pattern)


def write_json(path, data, log=print):
    """Writes `data` (indented, trailing newline) to `path`, creating its folder."""
    path = pathlib.Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2) + "\n")
    log(f"results written to {path}")


def publish(table, results, json_path=None, markdown_path=None):
    """Prints the markdown `table`; writes `results` to `json_path` and the table to
    `markdown_path` when given (the `--json` / `--markdown` flags of the benchmarks)."""
    print(table)
    if json_path:
        write_json(json_path, results)
    if markdown_path:
        pathlib.Path(markdown_path).write_text(table + "\n")


# --------------------------------------------------------------------------------------------
# Benchmark text: WikiText-2 test sentences, else a seeded Zipf draw over a fixed word list
# --------------------------------------------------------------------------------------------

SENTENCE_LENGTH = 20
NATURAL_BATCH = 32
NATURAL_LENGTHS = (11, 75)  # the range of the AllenNLP reference batch (PERFORMANCE.md)
WIKITEXT_TEST = WIKITEXT_DIR / "test.raw.txt"
WIKITEXT_VALID = WIKITEXT_DIR / "valid.raw.txt"

# The fallback vocabulary: common words first, so a Zipf draw repeats them as real text does.
_WORDS = (
    "the , . of and to in a is that for it as was with on he by I 's at be from his an this "
    "are or have not which had but they were their one has been ( ) all also its who there "
    "more would first new after can time than two some other into when only her she years "
    "most over between about made may many these such during year up world city state "
    'however used under people three " later part him them so while first known season war '
    "game film series album song government century American British United States French "
    "German London John David North South river church school university team league club "
    "released including became began number early several following against called second "
    "around until where before high city's won't couldn't 1990 2000 2011 @-@ @,@ @.@ ; : "
    "Robert Boulter television actor starring role performed theatre episode Teddy Story "
    "hurricane storm tropical wind damage coast island ship navy battle army division forces "
    "species genus female male birds plumage breeding nest eggs population habitat forest"
).split()


@dataclasses.dataclass
class Workload:
    """One batch to time: its sentences and their character ids (converted before timing)."""

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


def _wikitext_sentences(paths=(WIKITEXT_TEST,)):
    """The WikiText-2 tokens of `paths`, sentence by sentence (split after . ? !), or None."""
    if not all(path.is_file() for path in paths):
        return None
    sentences = []
    lines = [x for path in paths for x in path.read_text(encoding="utf-8").splitlines()]
    for line in lines:
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


def _zipf_sentences(rng, lengths):
    p = 1.0 / np.arange(1, len(_WORDS) + 1) ** 1.1
    p /= p.sum()
    return [[_WORDS[i] for i in rng.choice(len(_WORDS), size=int(n), p=p)] for n in lengths]


def _fixed_length(stream, rng, batch):
    if stream is None:
        return _zipf_sentences(rng, [SENTENCE_LENGTH] * batch)
    flat = [t for s in stream for t in s]
    start = int(rng.integers(0, len(flat) - batch * SENTENCE_LENGTH))
    chunk = flat[start : start + batch * SENTENCE_LENGTH]
    return [chunk[i * SENTENCE_LENGTH : (i + 1) * SENTENCE_LENGTH] for i in range(batch)]


def _natural_lengths(stream, rng):
    low, high = NATURAL_LENGTHS
    if stream is None:
        lengths = np.clip(rng.gamma(3.0, 8.0, NATURAL_BATCH).astype(int), low, high)
        return _zipf_sentences(rng, lengths)
    fitting = [s for s in stream if low <= len(s) <= high]
    start = int(rng.integers(0, len(fitting) - NATURAL_BATCH))
    return fitting[start : start + NATURAL_BATCH]


def natural_sentences(n, seed=0, lengths=NATURAL_LENGTHS):
    """`n` consecutive WikiText-2 test sentences of `lengths` tokens (else a seeded Zipf draw
    with the same range) and the text source."""
    stream, rng = _wikitext_sentences(), np.random.default_rng([seed, n, 1])
    if stream is None:
        drawn = np.clip(rng.gamma(3.0, 8.0, n).astype(int), *lengths)
        return _zipf_sentences(rng, drawn), "synthetic Zipf draw (fallback)"
    fitting = [s for s in stream if lengths[0] <= len(s) <= lengths[1]]
    start = int(rng.integers(0, len(fitting) - n))
    return fitting[start : start + n], f"WikiText-2 test ({WIKITEXT_TEST})"


def text_lines(n, seed=0):
    """The first `n` sentences of WikiText-2 test, then validation, one per line, as they come
    (1-131 tokens, a text file to `embed`); else a seeded Zipf draw. `(lines, source)`."""
    stream = _wikitext_sentences((WIKITEXT_TEST, WIKITEXT_VALID))
    if stream is not None and len(stream) >= n:
        return stream[:n], f"WikiText-2 test + validation sentences ({WIKITEXT_DIR})"
    rng = np.random.default_rng([seed, n, 2])
    lengths = np.clip(rng.gamma(2.0, 12.0, n).astype(int), 1, 131)
    return _zipf_sentences(rng, lengths), "synthetic Zipf draw (fallback)"


def cut_into_lines(sentences, length=SENTENCE_LENGTH):
    """The same tokens in order, cut into lines of `length` tokens (the last one shorter)."""
    flat = [t for s in sentences for t in s]
    return [flat[i : i + length] for i in range(0, len(flat), length)]


# --------------------------------------------------------------------------------------------
# The compute ceiling: FLOP of the biLM per position, and the in-process matmul speed
# --------------------------------------------------------------------------------------------


def bilm_flop_per_position(options):
    """Multiply-add FLOP (2 per MAC) of one position of the biLM described by bilm-tf
    `options`: char convolutions, highway, projection, and each LSTM layer-direction (input
    and recurrent products, projection). 204 MFLOP for the published model (PERFORMANCE.md)."""
    cnn, lstm = options["char_cnn"], options["lstm"]
    chars, emb = cnn["max_characters_per_token"], cnn["embedding"]["dim"]
    n_filters = sum(n for _, n in cnn["filters"])
    conv = sum(2 * (chars - w + 1) * w * emb * n for w, n in cnn["filters"])
    highway = cnn["n_highway"] * 2 * n_filters * 2 * n_filters
    dim, proj = lstm["dim"], lstm["projection_dim"]
    projection = 2 * n_filters * proj if n_filters != proj else 0
    per_layer = 2 * proj * 4 * dim * 2 + 2 * dim * proj
    return conv + highway + projection + 2 * lstm["n_layers"] * per_layer


def flop_per_token(options, sentence_length=SENTENCE_LENGTH):
    """FLOP per real token for sentences of `sentence_length` tokens (<S> and </S> included):
    224.7 MFLOP for the published model and 20-token sentences."""
    return bilm_flop_per_position(options) * (sentence_length + 2) / sentence_length


def matmul_seconds(size=4096):
    """Wall time of one float32 `tf.matmul` of two `size` x `size` matrices (made before the
    clock starts), forced to host memory."""
    import tensorflow as tf

    a = tf.random.stateless_normal([size, size], seed=[1, 2])
    b = tf.random.stateless_normal([size, size], seed=[3, 4])
    start = time.perf_counter()
    tf.matmul(a, b).numpy()
    return time.perf_counter() - start


def make_workloads(batches=(1, 32, 64), natural=True, seed=0, max_characters_per_token=50):
    """Batches `b{B}x20` of B 20-token sentences and a `natural32` batch of 32 sentences of
    11-75 tokens; returns `(workloads, text source)`. Each workload has its own seed."""
    from elmo_keras.text.char_ids import batch_to_char_ids

    stream = _wikitext_sentences()
    source = f"WikiText-2 test ({WIKITEXT_TEST})" if stream else "synthetic Zipf draw (fallback)"
    named = []
    for b in batches:
        sentences = _fixed_length(stream, np.random.default_rng([seed, b]), b)
        named.append((f"b{b}x{SENTENCE_LENGTH}", f"{b} x {SENTENCE_LENGTH}", sentences))
    if natural:
        sentences = _natural_lengths(stream, np.random.default_rng([seed, 0]))
        lengths = [len(s) for s in sentences]
        label = f"{NATURAL_BATCH} natural ({min(lengths)}-{max(lengths)})"
        named.append((f"natural{NATURAL_BATCH}", label, sentences))
    workloads = [
        Workload(
            name,
            label,
            sentences,
            batch_to_char_ids(sentences, max_characters_per_token=max_characters_per_token),
        )
        for name, label, sentences in named
    ]
    return workloads, source


def cosines(a, b):
    """Cosine similarity of two lists of `(layers, tokens, features)` arrays, per token and
    layer, flattened (float64)."""
    out = []
    for x, y in zip(a, b, strict=True):
        x, y = np.asarray(x, np.float64), np.asarray(y, np.float64)
        den = np.linalg.norm(x, axis=-1) * np.linalg.norm(y, axis=-1)
        out.append((np.sum(x * y, axis=-1) / np.maximum(den, 1e-30)).reshape(-1))
    return np.concatenate(out)
