"""What `inference.py` times: the model configurations, their files, the workloads, the modes.

A mode is a factory: it receives a `Context` (the options and weight paths, a scratch
`workdir`, the config name; the float32 Keras model is loaded on first use, so an ONNX mode's
memory process never loads TensorFlow) and returns an embedder. Every mode is timed end to end
from token lists through the embedder API (host-side conversion, deduplication and batching
count):

- `embed_batch(sentences)`: one model call on a list of token lists -> a list of float32 arrays
  `(n_layers + 1, n_tokens, 2 * projection_dim)`, in order;
- `iter_embed(sentences)` / `embed(sentences)`: any number of sentences, sorted and batched by
  the embedder's `batch_size` and `max_tokens` (the benchmark sets them per workload).

`keras` and `keras_bf16` are `BiLMEmbedder`s (float32, and the same weights under Keras's
`mixed_bfloat16` policy), `onnx` and `onnx_int8` are `OnnxEmbedder`s; `savedmodel` (the
`char_ids` signature of the reloaded SavedModel) and the older `eager` / `function` / `xla`
calls of the Keras model get the same API from `CharIdsEmbedder`. The exports are written
once into `WORKDIR/export/` with `elmo_keras.export.export_model` (the code behind
`elmo-keras export --format all --quantize`) and reused while the weight file is unchanged:
converting the full configuration to ONNX takes minutes and over 12 GB of memory.
"""

import dataclasses
import functools
import hashlib
import json
import pathlib
import time

import common
import numpy as np


def _options(dim, projection_dim, char_dim, filters):
    """bilm-tf options: 2 layers, residual, clips 3, 2 highway layers, 262 chars x 50."""
    lstm = {"dim": dim, "projection_dim": projection_dim, "n_layers": 2, "cell_clip": 3.0}
    lstm.update(proj_clip=3.0, use_skip_connections=True)
    cnn = {"embedding": {"dim": char_dim}, "filters": filters, "n_highway": 2}
    cnn.update(n_characters=262, max_characters_per_token=50, activation="relu")
    return {"lstm": lstm, "char_cnn": cnn}


CONFIGS = {
    # REFERENCE.md section 2: elmo_2x4096_512_2048cnn_2xhighway.
    "full": _options(
        4096, 512, 16, [[1, 32], [2, 32], [3, 64], [4, 128], [5, 256], [6, 512], [7, 1024]]
    ),
    # The same structure, tiny sizes: a smoke run.
    "tiny": _options(64, 16, 4, [[1, 4], [2, 8], [3, 8]]),
}


# --------------------------------------------------------------------------------------------
# Model files
# --------------------------------------------------------------------------------------------


def write_random_model(config, directory, seed=0):
    """Random weights for `config`, written as `options.json` + `weights.hdf5` in `directory`
    (the published layout); reused when `directory` already holds the same config and seed."""
    import keras

    from elmo_keras.models.bilm import BiLM
    from elmo_keras.weights import save_weights, write_options

    directory = pathlib.Path(directory)
    options_path = directory / "options.json"
    weights_path = directory / "weights.hdf5"
    marker = directory / "config.json"
    stamp = {"config": config, "seed": seed}
    if (
        options_path.is_file()
        and weights_path.is_file()
        and marker.is_file()
        and json.loads(marker.read_text()) == stamp
    ):
        return options_path, weights_path
    keras.utils.set_random_seed(seed)
    bilm = BiLM.from_options(CONFIGS[config])
    bilm.build()
    write_options(CONFIGS[config], options_path)
    save_weights(bilm, weights_path)
    marker.write_text(json.dumps(stamp))
    return options_path, weights_path


def load(options_path, weights_path, **kwargs):
    """The benchmark loads through the real path: `BiLM.from_bilm_tf` (kwargs: e.g. `dtype`)."""
    from elmo_keras.models import BiLM

    return BiLM.from_bilm_tf(options_path, weights_path, **kwargs)


def set_threads(intra_op, inter_op):
    """TensorFlow's thread pools; `None` keeps its default (one thread per usable core)."""
    import tensorflow as tf

    if intra_op is not None:
        tf.config.threading.set_intra_op_parallelism_threads(intra_op)
    if inter_op is not None:
        tf.config.threading.set_inter_op_parallelism_threads(inter_op)


def bf16_available():
    """Where bfloat16 can pay: a CPU with AVX512_BF16 or AMX-BF16, or a GPU. `(bool, why)`."""
    flags = [f for f in common.cpu_flags() if f in ("avx512_bf16", "amx_bf16")]
    if flags:
        return True, "CPU has " + " ".join(flags)
    import tensorflow as tf

    if tf.config.list_physical_devices("GPU"):
        return True, "a GPU is present"
    return False, "no avx512_bf16 / amx_bf16 and no GPU"


@dataclasses.dataclass
class Context:
    """What a mode factory gets: the model files, a scratch folder, the config name."""

    options_path: pathlib.Path
    weights_path: pathlib.Path
    workdir: pathlib.Path
    config: str
    reuse_export: bool = False  # a memory worker uses the export its parent made, as it is

    @functools.cached_property
    def bilm(self):
        """The float32 `BiLM`, loaded with `BiLM.from_bilm_tf` on first use."""
        return load(self.options_path, self.weights_path)


# --------------------------------------------------------------------------------------------
# The embedder API over a char-ids function, and the calls the benchmark makes
# --------------------------------------------------------------------------------------------


def _batching_with_max_tokens(sentences, batch_size, max_tokens):
    """`length_batches`, with `max_tokens` where batching.py has it (issue 10)."""
    from elmo_keras.batching import length_batches

    if max_tokens is None:
        return length_batches(sentences, batch_size)
    return length_batches(sentences, batch_size, max_tokens=max_tokens)


def iter_embeddings(embed_batch, sentences, batch_size, max_tokens, empty):
    """`elmo_keras.batching.iter_embeddings` where it exists, else the same pairs from sorted
    `length_batches` (one list in memory)."""
    from elmo_keras import batching

    if hasattr(batching, "iter_embeddings"):
        yield from batching.iter_embeddings(
            embed_batch, sentences, batch_size, max_tokens=max_tokens, empty=empty
        )
        return
    sentences = batching.as_sentences(sentences)
    for rows in _batching_with_max_tokens(sentences, batch_size, max_tokens):
        if not sentences[rows[0]]:
            yield from ((i, empty()) for i in rows)
            continue
        yield from zip(rows, embed_batch([sentences[i] for i in rows]), strict=True)


class CharIdsEmbedder:
    """The embedder API over `run(char_ids [B, T, C]) -> activations [B, L + 1, T, 2P]`."""

    def __init__(self, run, max_characters, batch_size=64, max_tokens=None):
        self.run, self.max_characters = run, max_characters
        self.batch_size, self.max_tokens = batch_size, max_tokens

    def embed_batch(self, sentences):
        from elmo_keras.text.char_ids import batch_to_char_ids

        ids = batch_to_char_ids(sentences, max_characters_per_token=self.max_characters)
        layers = np.asarray(self.run(ids))
        return [
            np.ascontiguousarray(layers[i, :, : len(s)], np.float32)
            for i, s in enumerate(sentences)
        ]

    def iter_embed(self, sentences, progress=None):
        def empty():
            return np.zeros((0,), np.float32)

        return iter_embeddings(self.embed_batch, sentences, self.batch_size, self.max_tokens, empty)

    def embed(self, sentences, progress=None):
        pairs = dict(self.iter_embed(sentences))
        return [pairs[i] for i in range(len(pairs))]


def call_batch(embedder, sentences):
    """One model call on `sentences` (`embed_batch`; an embedder from before issue 10: `embed`
    with the whole list as one batch)."""
    if hasattr(embedder, "embed_batch"):
        return embedder.embed_batch(sentences)
    embedder.batch_size = max(len(sentences), 1)
    return embedder.embed(sentences)


def call_embed(embedder, sentences, batch_size, max_tokens):
    """Streams `sentences` through `iter_embed` (as `elmo-keras embed` does), keeping no array;
    an embedder without it: `embed`. Returns the number of arrays (the result is on the host)."""
    embedder.batch_size = batch_size
    if hasattr(embedder, "max_tokens") or hasattr(embedder, "iter_embed"):
        embedder.max_tokens = max_tokens
    if hasattr(embedder, "iter_embed"):
        return sum(1 for _ in embedder.iter_embed(sentences))
    return len(embedder.embed(sentences))


# --------------------------------------------------------------------------------------------
# The workloads of issue 10
# --------------------------------------------------------------------------------------------

EMBED_BATCH, EMBED_MAX_TOKENS = 64, 4096  # `elmo-keras embed` defaults


@dataclasses.dataclass
class Workload:
    """Token lists and how they are sent: one call (`batch_size=None`) or through `iter_embed`
    with `batch_size` / `max_tokens`. `long`: timed once per mode (see the module docstring)."""

    name: str
    label: str
    sentences: list
    batch_size: int | None = None
    max_tokens: int | None = None
    long: bool = False

    @property
    def tokens(self):
        return sum(len(s) for s in self.sentences)

    def run(self, embedder):
        if self.batch_size is None:
            return call_batch(embedder, self.sentences)
        return call_embed(embedder, self.sentences, self.batch_size, self.max_tokens)


def make_workloads(seed=0, embed_lines=10000):
    """The workloads of issue 10, smallest first; `(workloads, text source)`."""
    fixed, source = common.make_workloads((1, 32, 64), natural=False, seed=seed)
    natural32, _ = common.natural_sentences(32, seed)
    natural256, _ = common.natural_sentences(256, seed)
    lines, lines_source = common.text_lines(embed_lines, seed)
    cut = common.cut_into_lines(lines)

    def span(s):
        return f"{min(map(len, s))}-{max(map(len, s))}"

    workloads = [Workload(w.name, w.label, w.sentences) for w in fixed]
    workloads += [
        Workload("natural32", f"32 natural ({span(natural32)}), one batch", natural32),
        Workload("natural256", f"256 natural ({span(natural256)}), sorted, 32s", natural256, 32),
    ]
    embeds = [("embed", f"embed {len(lines):,} lines ({span(lines)})", lines)] if lines else []
    embeds += [("embed_cut20", f"embed, same tokens in {len(cut):,} 20-token lines", cut)]
    workloads += [Workload(*e, EMBED_BATCH, EMBED_MAX_TOKENS, True) for e in embeds if e[2]]
    return workloads, f"{source}; embed: {lines_source}"


# --------------------------------------------------------------------------------------------
# Modes
# --------------------------------------------------------------------------------------------


def _bilm_embedder(bilm):
    from elmo_keras.models.bilm_embedder import BiLMEmbedder

    return BiLMEmbedder(bilm, batch_size=64)


def _keras_bf16(ctx):
    return _bilm_embedder(load(ctx.options_path, ctx.weights_path, dtype="mixed_bfloat16"))


def _keras_call(kind):
    """`eager`: `bilm(ids)`; `function`: under `tf.function`; `xla`: the same, compiled."""

    def factory(ctx):
        bilm = ctx.bilm
        if kind == "xla" and getattr(bilm, "length_aware", False):  # dynamic shapes: no XLA
            bilm = load(ctx.options_path, ctx.weights_path, length_aware=False)

        def call(ids):
            return bilm(ids, training=False)["activations"]

        if kind != "eager":
            import tensorflow as tf

            spec = tf.TensorSpec([None, None, bilm.max_characters_per_token], tf.int32)
            jit = {"jit_compile": True} if kind == "xla" else {}
            call = tf.function(call, input_signature=[spec], autograph=False, **jit)
        return CharIdsEmbedder(call, bilm.max_characters_per_token)

    return factory


@functools.cache
def _export_code_sha256():
    """The package's code as this process first saw it (one export per run, even if its files
    are edited meanwhile): the layers and models shape the exported graphs as much as the
    exporter does."""
    import elmo_keras.export  # binds `elmo_keras` too

    code = hashlib.sha256()
    for module in (elmo_keras, elmo_keras.export):  # two folders in a checkout
        package = pathlib.Path(module.__file__).parent
        for path in sorted(package.rglob("*.py")):
            code.update(str(path.relative_to(package)).encode() + b"\0" + path.read_bytes())
    return code.hexdigest()


def _source_stamp(options_path, weights_path):
    """What an export depends on: the model files and the export code (a changed exporter
    writes a new export)."""
    stat = pathlib.Path(weights_path).stat()
    return {
        "options_sha256": hashlib.sha256(pathlib.Path(options_path).read_bytes()).hexdigest(),
        "weights_size": stat.st_size,
        "weights_mtime_ns": stat.st_mtime_ns,
        "export_code_sha256": _export_code_sha256(),
    }


def ensure_exports(options_path, weights_path, workdir, log=print, reuse=False):
    """`WORKDIR/export/` with savedmodel/, model.onnx, model.int8.onnx; written once."""
    from elmo_keras.export import export_model

    output = pathlib.Path(workdir) / "export"
    stamp = _source_stamp(options_path, weights_path)
    stamp_path = output / "source.json"
    if stamp_path.is_file() and (reuse or json.loads(stamp_path.read_text()) == stamp):
        return output
    log(f"exporting {options_path} to {output} (SavedModel, ONNX, int8 ONNX) ...")
    start = time.perf_counter()
    export_model(options_path, weights_path, output, formats="all", quantize=True, overwrite=True)
    stamp_path.write_text(json.dumps(stamp))
    log(f"  export done in {time.perf_counter() - start:.0f} s")
    return output


def _savedmodel(ctx):
    import tensorflow as tf

    output = ensure_exports(ctx.options_path, ctx.weights_path, ctx.workdir, reuse=ctx.reuse_export)
    signature = tf.saved_model.load(str(output / "savedmodel")).signatures["char_ids"]
    n_layers = CONFIGS[ctx.config]["lstm"]["n_layers"]

    def run(char_ids):
        out = signature(char_ids=tf.constant(char_ids))
        word = out["word_emb"].numpy()
        layers = [np.concatenate([word, word], axis=-1)]
        layers += [out[f"lstm_outputs{k}"].numpy() for k in range(1, n_layers + 1)]
        return np.stack(layers, axis=1)

    chars = CONFIGS[ctx.config]["char_cnn"]["max_characters_per_token"]
    return CharIdsEmbedder(run, chars)


def _onnx(filename):
    def factory(ctx):
        from elmo_keras.runtime import OnnxEmbedder

        output = ensure_exports(
            ctx.options_path, ctx.weights_path, ctx.workdir, reuse=ctx.reuse_export
        )
        return OnnxEmbedder(output / filename, batch_size=64)

    return factory


@dataclasses.dataclass
class Mode:
    factory: object
    description: str


MODES = {
    "keras": Mode(lambda ctx: _bilm_embedder(ctx.bilm), "`BiLMEmbedder`, float32"),
    "savedmodel": Mode(
        _savedmodel, "reloaded SavedModel, `signatures['char_ids']`, host-side char ids"
    ),
    "onnx": Mode(_onnx("model.onnx"), "`OnnxEmbedder`, float32 model.onnx (tf2onnx, opset 17)"),
    "onnx_int8": Mode(
        _onnx("model.int8.onnx"), "`OnnxEmbedder`, int8 dynamic quantization (QInt8 weights)"
    ),
    "keras_bf16": Mode(
        _keras_bf16,
        "`BiLMEmbedder`, `BiLM.from_bilm_tf(..., dtype='mixed_bfloat16')` (bf16 compute)",
    ),
    "eager": Mode(_keras_call("eager"), "Keras eager call `bilm(ids)` over host char ids"),
    "function": Mode(_keras_call("function"), "`tf.function` of `bilm(ids)`, [None, None, C]"),
    "xla": Mode(
        _keras_call("xla"), "`tf.function(jit_compile=True)`, same signature, length_aware=False"
    ),
}
