"""Helpers shared by the export tests (a uniquely named module: `conftest` is ambiguous)."""

import numpy as np

# Sentences of assorted lengths: a batch of one, a one-token sentence, lengths up to 12 tokens,
# a multi-byte token and one longer than 48 bytes.
SENTENCES = [
    ["The", "cat", "sat", "on", "the", "mat", "."],
    ["Hi"],
    ["Déjà", "vu", ",", "naïve", "café", "!"],
    ["A", "much", "longer", "sentence", "that", "goes", "on", "and", "on", "until", "it", "ends"],
    ["x" * 60, "tail"],
]

# The mix used for the `elmo` output: not the default, so the test sees the saved weights.
MIX_WEIGHTS = [0.1, 0.3, 0.5]
MIX_GAMMA = 1.1


def make_mix(n_layers, weights=None, gamma=MIX_GAMMA):
    from elmo_keras.layers import ScalarMix

    weights = weights or [0.1 * (k + 1) for k in range(n_layers + 1)]
    mix = ScalarMix(n_layers + 1, initial_scalar_weights=weights, initial_gamma=gamma)
    mix.build((None, n_layers + 1, None, None))
    return mix


def keras_outputs(bilm, mix, char_ids, state=None):
    """The expected export outputs computed with the Keras model."""
    inputs = {"char_ids": char_ids}
    if state is not None:
        inputs["state_h"], inputs["state_c"] = state
    out = bilm(inputs, training=False)
    acts = np.asarray(out["activations"])
    mask = np.asarray(out["mask"])
    elmo = np.asarray(mix(out["activations"], mask=out["mask"]))
    lengths = mask.sum(axis=1).astype(np.int32)
    result = {"word_emb": np.asarray(out["token_embeddings"]), "elmo": elmo}
    for k in range(1, acts.shape[1]):
        result[f"lstm_outputs{k}"] = acts[:, k]
    default = np.zeros((len(lengths), elmo.shape[-1]), np.float32)
    for i, n in enumerate(lengths):  # the mean over real tokens, computed independently
        if n:
            default[i] = elmo[i, :n].mean(axis=0)
    result["default"] = default
    result["sequence_len"] = lengths
    if state is not None:
        result["final_state_h"] = np.asarray(out["state_h"])
        result["final_state_c"] = np.asarray(out["state_c"])
    return result


def assert_outputs_close(actual, expected, atol=1e-5):
    assert set(actual) == set(expected), (sorted(actual), sorted(expected))
    for name, value in expected.items():
        got = np.asarray(actual[name])
        assert got.shape == value.shape, (name, got.shape, value.shape)
        diff = float(np.max(np.abs(got.astype(np.float64) - value), initial=0.0))
        assert diff <= atol, f"{name}: max abs diff {diff:.3g} > {atol}"


def leftovers(parent, name, locks=True):
    """Hidden entries of writes of `name`: staging folders and (with `locks`) its lock file."""
    found = (p.name for p in parent.iterdir() if p.name.startswith(f".{name}."))
    return sorted(n for n in found if locks or n != f".{name}.lock")
