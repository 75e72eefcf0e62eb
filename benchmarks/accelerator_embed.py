"""benchmarks/accelerator.py's embedding part (issue 43): `embed` end to end against the
compute alone, and JAX's length-aware inference path against the core path, on the device.

(f) `embed_speed`: `BiLMEmbedder.iter_embed` over natural WikiText-2 lines (batches of 64 as
    `elmo-keras embed`), `--layers average` and the hdf5 writing of the command
    (`cli.embed.select_layers`, `hdf5_writer.write_datasets`), after a first pass that compiled
    every bucketed shape once; against the compute alone: the same batches' inputs prepared and
    put on the device beforehand, only the jitted program timed. Both in tokens/s, and their
    ratio (issue 43's target: end to end >= 0.8 of the compute).
(g) `fast_path_speed`: one natural batch through `BiLM.stateless_call` with `length_aware` on
    (`elmo_keras.layers.jax_fast_path`, enabled on the device's platform for the row) and off
    (the core path, one `lax.scan` per layer and direction), fp32: tokens/s of each.
"""

import statistics
import tempfile
import time

import jax
import numpy as np

from elmo_keras import batching
from elmo_keras.cli.embed import select_layers
from elmo_keras.file_io.hdf5_writer import write_datasets
from elmo_keras.layers import jax_fast_path
from elmo_keras.models import BiLM, BiLMEmbedder
from elmo_keras.models.bilm_vocabulary import token_rows


def _random_bilm(config):
    bilm = BiLM(**config)
    bilm.build()
    rng = np.random.default_rng(0)
    shapes = sorted(bilm.weight_shapes().items())
    bilm.set_weight_arrays(
        {k: (0.01 * rng.standard_normal(s)).astype("float32") for k, s in shapes}
    )
    return bilm


def embed_speed(config, sentences, batch_size=64):
    """(f): end-to-end and compute-only tokens/s of `sentences`, each shape compiled once."""
    bilm = _random_bilm(config)
    embedder = BiLMEmbedder(bilm, batch_size=batch_size)
    tokens = sum(len(s) for s in sentences)
    start = time.perf_counter()
    for _ in embedder.iter_embed(sentences):  # compiles every bucket
        pass
    first = time.perf_counter() - start
    with tempfile.TemporaryDirectory() as folder:
        start = time.perf_counter()
        pairs = ((str(i), array) for i, array in embedder.iter_embed(sentences))
        write_datasets(f"{folder}/out.hdf5", select_layers(pairs, "average"))
        end_to_end = time.perf_counter() - start
    inputs = []
    for rows in batching.length_batches(sentences, batch_size):
        batch = [sentences[i] for i in rows if sentences[i]]
        if not batch:
            continue
        ids, index = token_rows(bilm, batch)
        ids, index = embedder._bucketed(ids.astype(np.int32), index.astype(np.int32))
        inputs.append((jax.device_put(ids), jax.device_put(index)))
    weights = embedder._jax_weights()
    start = time.perf_counter()
    for ids, index in inputs:
        out = embedder._jitted(*weights, embedder._step_kernels(weights[0]), ids, index)
    jax.block_until_ready(out)
    compute = time.perf_counter() - start
    return {
        "sentences": len(sentences),
        "tokens": tokens,
        "shapes": len(embedder.compiled_shapes),
        "first_pass_s": first,
        "end_to_end_tokens_per_s": tokens / end_to_end,
        "compute_tokens_per_s": tokens / compute,
        "end_to_end_over_compute": compute / end_to_end,
    }


def fast_path_speed(config, sentences, calls):
    """(g): tokens/s of one batch with the length-aware path and with the core path."""
    bilm = _random_bilm(config)
    ids, index = token_rows(bilm, sentences)
    inputs = {"token_char_ids": ids.astype(np.int32), "token_index": index.astype(np.int32)}
    trainable = [v.value for v in bilm.trainable_variables]
    non_trainable = [v.value for v in bilm.non_trainable_variables]
    platforms = jax_fast_path.PLATFORMS
    row = {"workload": f"{len(sentences)} natural sentences", "tokens": int((index >= 0).sum())}
    try:
        jax_fast_path.PLATFORMS = (*platforms, jax.default_backend())
        for name, flag in (("length_aware", True), ("core", False)):

            def run(trainable, non_trainable, inputs, flag=flag):
                with jax_fast_path.inference():
                    outputs, _ = bilm.stateless_call(
                        trainable, non_trainable, inputs, training=False, length_aware=flag
                    )
                return outputs["activations"]

            run = jax.jit(run)
            start = time.perf_counter()
            jax.block_until_ready(run(trainable, non_trainable, inputs))
            row[f"{name}_compile_s"] = time.perf_counter() - start
            times = []
            for _ in range(calls):
                start = time.perf_counter()
                jax.block_until_ready(run(trainable, non_trainable, inputs))
                times.append(time.perf_counter() - start)
            row[f"{name}_tokens_per_s"] = row["tokens"] / statistics.median(times)
    finally:
        jax_fast_path.PLATFORMS = platforms
    return row


def report(embed, fast):
    """The two tables, markdown."""
    lines = [
        "",
        "| `embed`, --layers average | sentences | tokens | shapes | end to end tokens/s | "
        "compute-only tokens/s | end to end / compute |",
        "|---|---|---|---|---|---|---|",
        f"| batches of 64 | {embed['sentences']} | {embed['tokens']} | {embed['shapes']} | "
        f"{embed['end_to_end_tokens_per_s']:,.0f} | {embed['compute_tokens_per_s']:,.0f} | "
        f"{embed['end_to_end_over_compute']:.2f} |",
        "",
        "| fp32 | length-aware tokens/s | core path tokens/s | length-aware / core |",
        "|---|---|---|---|",
        f"| {fast['workload']} | {fast['length_aware_tokens_per_s']:,.0f} | "
        f"{fast['core_tokens_per_s']:,.0f} | "
        f"{fast['length_aware_tokens_per_s'] / fast['core_tokens_per_s']:.2f} |",
    ]
    return "\n".join(lines)
