"""The data of `downstream.py`: MR sentences, the fixed split, the vocabulary, GloVe, and the
ELMo activations computed once with the frozen biLM and cached.

A frozen `ElmoEmbedding` is exactly a `ScalarMix` + dropout over these cached activations, so
the classifier trains the mix on the cache; `check_cache_matches_layer` checks the equivalence
on a few sentences.
"""

import collections
import hashlib
import time

import numpy as np

from elmo_keras.data import MR_SPLIT_SEED as SPLIT_SEED
from elmo_keras.data import mr_split as split_indices  # the fixed 80/10/10 split
from elmo_keras.data import read_glove
from elmo_keras.data import read_mr_sentiment as load_mr  # (texts, labels); label 1 = pos

MAX_TOKENS = 64


def tokenize_all(texts, max_tokens=MAX_TOKENS):
    from elmo_keras.text import tokenize_python

    return [tokenize_python(t)[:max_tokens] or ["."] for t in texts]


def build_vocabulary(token_lists, train_idx):
    """Lower-cased training words -> ids (0 = padding, 1 = unknown)."""
    counts = collections.Counter(w.lower() for i in train_idx for w in token_lists[i])
    vocab = {"<pad>": 0, "<unk>": 1}
    for word, _ in counts.most_common():
        vocab[word] = len(vocab)
    return vocab


def word_ids(token_lists, vocab):
    return [np.array([vocab.get(w.lower(), 1) for w in toks], np.int32) for toks in token_lists]


def glove_matrix(vocab, glove_path):
    """`[len(vocab), 50]`: GloVe where the word has a vector, else a seeded random one (row 0,
    padding, is zero); and how many words GloVe covered."""
    glove = read_glove(glove_path, vocab)
    matrix = np.random.default_rng(SPLIT_SEED).normal(0, 0.3, (len(vocab), 50)).astype(np.float32)
    matrix[0] = 0
    found = 0
    for word, i in vocab.items():
        if word in glove:
            matrix[i] = glove[word]
            found += 1
    return matrix, found


def compute_elmo_cache(bilm, token_lists, batch_size=64, log=print):
    """Runs the frozen biLM once per sentence: `(flat [n_tokens, L, D] float16, offsets)`."""
    import tensorflow as tf

    from elmo_keras.text import batch_to_char_ids

    @tf.function(input_signature=[tf.TensorSpec([None, None, 50], tf.int32)])
    def run(ids):
        return bilm(ids, training=False)["activations"]

    lengths = np.array([len(t) for t in token_lists])
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    n_layers = bilm.n_layers + 1
    flat = np.zeros((offsets[-1], n_layers, 2 * bilm.projection_dim), np.float16)
    order = np.argsort(lengths)
    start = time.perf_counter()
    for b in range(0, len(order), batch_size):
        batch = order[b : b + batch_size]
        acts = run(tf.constant(batch_to_char_ids([token_lists[i] for i in batch]))).numpy()
        for row, i in enumerate(batch):
            flat[offsets[i] : offsets[i + 1]] = acts[row, :, : lengths[i]].transpose(1, 0, 2)
        if b // batch_size % 40 == 0:
            log(f"  elmo cache {b}/{len(order)} sentences, {time.perf_counter() - start:.0f}s")
    return flat, offsets


def load_or_compute_cache(bilm, token_lists, cache_path, log=print):
    if cache_path is not None and cache_path.exists():
        data = np.load(cache_path)
        if len(data["offsets"]) == len(token_lists) + 1:
            log(f"ELMo cache: {cache_path}")
            return data["flat"], data["offsets"], 0.0
    start = time.perf_counter()
    flat, offsets = compute_elmo_cache(bilm, token_lists, log=log)
    seconds = time.perf_counter() - start
    if cache_path is not None:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache_path, flat=flat, offsets=offsets)
    return flat, offsets, seconds


def check_cache_matches_layer(bilm, token_lists, flat, offsets, n=4):
    """A frozen `ElmoEmbedding` (dropout 0) equals the even mix of the cached activations."""
    import tensorflow as tf

    from elmo_keras.models import ElmoEmbedding

    elmo = ElmoEmbedding(bilm, input_type="tokens", dropout=0.0)
    tokens = token_lists[:n]
    width = max(len(t) for t in tokens)
    out = elmo(tf.constant([t + [""] * (width - len(t)) for t in tokens])).numpy()
    worst = 0.0
    for i, t in enumerate(tokens):
        cached = flat[offsets[i] : offsets[i + 1]].astype(np.float32).mean(axis=1)
        worst = max(worst, float(np.abs(out[i, : len(t)] - cached).max()))
    return worst


def _elmo_activations(bilm, tokens, args, bilm_tag, log):
    """The cached (or computed) activations, checked against `ElmoEmbedding`."""
    digest = hashlib.sha256("\n".join(" ".join(t) for t in tokens).encode()).hexdigest()[:12]
    cache = args.cache_dir / f"elmo_{bilm_tag}_{digest}.npz" if args.cache_dir else None
    flat, offsets, seconds = load_or_compute_cache(bilm, tokens, cache, log=log)
    log(f"ELMo activations {flat.shape} float16, computed in {seconds:.0f}s")
    diff = check_cache_matches_layer(bilm, tokens, flat, offsets)
    log(f"ElmoEmbedding vs cached even mix: max |diff| {diff:.1e} (float16 cache)")
    return flat, offsets, seconds


def prepare(bilm, args, bilm_tag, log=print):
    """Loads the data and the ELMo cache: the dict that `downstream_model.train_one` reads.

    `args`: `data`, `glove`, `limit` and `cache_dir` of the command line. `bilm_tag` names the
    biLM in the cache file (its name and the first 12 hex digits of its weights' SHA-256).
    """
    texts, labels = load_mr(args.data)
    if args.limit:  # a random subset, for smoke tests and notebooks
        keep = np.sort(np.random.default_rng(1).permutation(len(texts))[: args.limit])
        texts, labels = [texts[i] for i in keep], labels[keep]
    train_idx, valid_idx, test_idx = split_indices(len(texts))
    tokens = tokenize_all(texts)
    vocab = build_vocabulary(tokens, train_idx)
    matrix, found = glove_matrix(vocab, args.glove)
    log(
        f"{len(texts)} sentences: train {len(train_idx)} / valid {len(valid_idx)} / test "
        f"{len(test_idx)}; vocabulary {len(vocab)}, {found} in GloVe"
    )
    flat = offsets = None
    seconds = 0.0
    if bilm is not None:
        flat, offsets, seconds = _elmo_activations(bilm, tokens, args, bilm_tag, log)
    return {
        "ids": word_ids(tokens, vocab),
        "labels": labels,
        "flat": flat,
        "offsets": offsets,
        "train": train_idx,
        "valid": valid_idx,
        "test": test_idx,
        "vocab_size": len(vocab),
        "glove_matrix": matrix,
        "n_elmo_layers": None if flat is None else flat.shape[1],
        "elmo_dim": None if flat is None else flat.shape[2],
        "elmo_cache_seconds": seconds,
        "glove_coverage": found / len(vocab),
    }
