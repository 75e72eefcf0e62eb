"""One tokenization default: the same raw sentences give the same vectors through every entry
point (issue 29, point 4): `ElmoEmbedding(input_type="sentences")`, `elmo-keras embed`, the
SavedModel's `default` signature, ONNX through `OnnxEmbedder.embed_text`, and Beam's
`EmbedLines`; the whitespace split stays available by name everywhere.

The sentences are the first 50 of WikiText-2 valid (../shared/data; the test skips without it):
already tokenized text, but with tokens such as "@-@", "H." and "1 @,@ 000" that the two modes
split differently (19 of the 50 sentences).
"""

import re

import h5py
import numpy as np
import pytest
import tensorflow as tf

from elmo_keras.text.tokenization import TOKENIZATION_MODES, tokenize_python

N_SENTENCES = 50
ATOL = 1e-5  # float32 paths (Keras, TensorFlow graph, ONNX Runtime) against each other


@pytest.fixture(scope="module")
def wikitext_sentences(shared_data):
    """The first `N_SENTENCES` sentences of WikiText-2 valid (paragraphs split after " . ")."""
    sentences = []
    for line in (shared_data / "wikitext-2" / "valid.raw.txt").open(encoding="utf-8"):
        line = line.strip()
        if line and not line.startswith("="):  # skip blank lines and " = Heading = " lines
            sentences.extend(re.split(r"(?<= \.) ", line))
        if len(sentences) >= N_SENTENCES:
            return sentences[:N_SENTENCES]
    raise AssertionError("WikiText-2 valid has fewer sentences than expected")


def _layers_from_savedmodel(outputs, n_layers):
    """The SavedModel's outputs as `embed`'s per-sentence layer stacks `(L + 1, T, 2P)`."""
    word = outputs["word_emb"].numpy()
    stack = [np.concatenate([word, word], axis=-1)]
    stack += [outputs[f"lstm_outputs{k}"].numpy() for k in range(1, n_layers + 1)]
    stack = np.stack(stack, axis=1)
    return [stack[i, :, :n] for i, n in enumerate(outputs["sequence_len"].numpy())]


def _mix(layers, mix):
    """The ScalarMix in float64 NumPy: `gamma * sum_k softmax(w)_k * layer_k` (no layer norm)."""
    weights = np.exp(np.asarray(mix.scalar_weights, np.float64))
    weights /= weights.sum()
    gamma = float(np.asarray(mix.gamma))
    return gamma * np.tensordot(weights, np.asarray(layers, np.float64), axes=1)


def _embed_cli(entry, path, tmp_path, mode, onnx_path=None):
    """`elmo-keras embed` on Keras (its default engine), or on ONNX Runtime given `onnx_path`."""
    from elmo_keras.cli import main

    output = tmp_path / f"embed_{mode}.hdf5"
    if onnx_path is None:
        args = ["--options", str(entry["options"]), "--weights", str(entry["weights"])]
    else:
        args = ["--backend", "onnx", "--model", str(onnx_path)]
    args += ["--input", str(path), "--output", str(output)]
    assert main(["embed", *args, *(["--tokenization-mode", mode] if mode else [])]) == 0
    with h5py.File(output, "r") as f:
        return [f[str(i)][...] for i in range(len(f))]


def _beam(onnx_path, path, tmp_path, mode):
    import apache_beam as beam

    from elmo_keras.beam import EmbedLines, ReadLines, WriteEmbeddings, read_embeddings

    prefix = tmp_path / f"beam_{mode}" / "embeddings"
    kwargs = {"tokenization_mode": mode} if mode else {}
    with beam.Pipeline() as pipeline:
        _ = (
            pipeline
            | ReadLines(str(path))
            | EmbedLines(str(onnx_path), batch_size=16, **kwargs)
            | WriteEmbeddings(str(prefix), num_shards=1)
        )
    records = {
        int(r["line"]): ([t.decode() for t in r["tokens"]], r["embeddings"])
        for r in read_embeddings(f"{prefix}-*").as_numpy_iterator()
    }
    return [records[i] for i in range(len(records))]


def _elmo_embedding(entry, sentences, mode):
    from elmo_keras.models import BiLM, ElmoEmbedding

    bilm = BiLM.from_bilm_tf(entry["options"], entry["weights"])  # the session's stays as is
    kwargs = {"tokenization_mode": mode} if mode else {}
    elmo = ElmoEmbedding(bilm, input_type="sentences", dropout=0.0, **kwargs)
    elmo.build()
    elmo.scalar_mixes[0].set_weights(entry["mix"].get_weights())
    vectors = elmo(tf.constant(sentences))
    lengths = np.sum(np.asarray(vectors._keras_mask), axis=1)
    return [np.asarray(vectors)[i, :n] for i, n in enumerate(lengths)]


def _max_diff(a, b):
    assert a.shape == b.shape, (a.shape, b.shape)
    return float(np.max(np.abs(np.asarray(a, np.float64) - b), initial=0.0))


def _check_entry_points(entry, sentences, tmp_path, mode, savedmodel_default):
    """Every entry point's vectors against `OnnxEmbedder.embed_text`'s (the reference), for the
    default split (`mode=None`: nobody is told a mode) or one asked for by name.

    `savedmodel_default` is the SavedModel's `default` signature (or the serving module's
    function that it saves); `embed` runs on Keras by default, on ONNX Runtime otherwise.
    """
    from elmo_keras.runtime import OnnxEmbedder

    tokens = [tokenize_python(s, mode or "punctuation") for s in sentences]
    onnx_tokens, reference = OnnxEmbedder(entry["onnx"]).embed_text(
        sentences, **({"mode": mode} if mode else {})
    )
    assert onnx_tokens == tokens
    n_layers = reference[0].shape[0] - 1
    path = tmp_path / f"sentences_{mode}.txt"
    path.write_text("\n".join(sentences) + "\n", encoding="utf-8")
    from_embed = _embed_cli(entry, path, tmp_path, mode, None if mode is None else entry["onnx"])
    from_beam = _beam(entry["onnx"], path, tmp_path, mode)
    outputs = savedmodel_default(sentences=tf.constant(sentences))
    from_savedmodel = _layers_from_savedmodel(outputs, n_layers)
    from_elmo = _elmo_embedding(entry, sentences, mode)
    diffs = dict.fromkeys(("embed", "beam", "savedmodel", "elmo_embedding"), 0.0)
    for i, layers in enumerate(reference):
        assert layers.shape[1] == len(tokens[i]) and from_beam[i][0] == tokens[i]
        mixed = _mix(layers, entry["mix"])
        saved_elmo = outputs["elmo"].numpy()[i, : len(tokens[i])]
        for name, got, want in (
            ("embed", from_embed[i], layers),
            ("beam", from_beam[i][1], layers),
            ("savedmodel", from_savedmodel[i], layers),
            ("savedmodel", saved_elmo, mixed),
            ("elmo_embedding", from_elmo[i], mixed),
        ):
            diffs[name] = max(diffs[name], _max_diff(got, want))
    print(f"tokenization {mode or 'default'}: max abs differences {diffs}")
    assert max(diffs.values()) <= ATOL, diffs


def test_every_entry_point_splits_and_embeds_alike_by_default(
    exported, loaded_savedmodels, wikitext_sentences, tmp_path
):
    """About 10 s on 2 busy cores, besides the session's exports (shared with
    test_savedmodel.py and test_onnx.py): `embed` on Keras compiles a few batch shapes."""
    entry = exported["allennlp"]
    default = loaded_savedmodels["allennlp"].signatures["default"]
    _check_entry_points(entry, wikitext_sentences, tmp_path, None, default)


def test_the_whitespace_split_is_available_by_name_everywhere(
    exported, wikitext_sentences, tmp_path
):
    """TF-Hub's module's split, asked for by name in the export (the serving module's
    `default` function, unsaved: the saved twin is checked in test_savedmodel.py), `embed`,
    Beam, `OnnxEmbedder` and the layer."""
    from elmo_keras.export import ElmoServingModule

    entry = exported["allennlp"]
    module = ElmoServingModule(entry["bilm"], entry["mix"], tokenization_mode="whitespace")
    _check_entry_points(entry, wikitext_sentences, tmp_path, "whitespace", module.default)


def test_the_modes_differ_on_this_text(wikitext_sentences):
    """Not vacuous: the two splits give different tokens for many of these sentences."""
    differ = [
        s
        for s in wikitext_sentences
        if len({tuple(tokenize_python(s, m)) for m in TOKENIZATION_MODES}) > 1
    ]
    assert len(differ) >= 10, len(differ)
