"""An independent NumPy float64 implementation of ELMo, written from REFERENCE.md.

It shares no code with the package. The LSTM is written in TensorFlow's convention (one matrix
`W_0` over `[x ; h]`, gate blocks i, j, f, o, forget bias added at run time), which is the
published weight layout, so tests can check the package's layers, its gate reordering and its
weight loading against the formulas themselves. Sentences are processed one at a time, with no
padding, so the reference has no masking logic to get wrong.
"""

import numpy as np


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def lstm_sentence(x, w0, b, wp, h, c, cell_clip=None, proj_clip=None, forget_bias=1.0):
    """One LSTM over one sentence `x` [T, D] (no padding). Returns (outputs [T, P], h, c)."""
    outputs = []
    for t in range(x.shape[0]):
        z = np.concatenate([x[t], h]) @ w0 + b
        i, j, f, o = np.split(z, 4)
        c = sigmoid(f + forget_bias) * c + sigmoid(i) * np.tanh(j)
        if cell_clip:
            c = np.clip(c, -cell_clip, cell_clip)
        h = (sigmoid(o) * np.tanh(c)) @ wp
        if proj_clip:
            h = np.clip(h, -proj_clip, proj_clip)
        outputs.append(h)
    return np.array(outputs).reshape(x.shape[0], wp.shape[1]), h, c


def bilstm_sentence(x, cells, use_skip, cell_clip, proj_clip, state=None):
    """Stacked biLSTM on one sentence.

    cells[d][l] = (W_0, B, W_P_0) in TensorFlow layout; d 0 forward, 1 backward.
    state: optional dict {(d, l): (h, c)}. Returns (layers [L, T, 2P], final state dict).
    """
    n_layers = len(cells[0])
    final = {}
    per_direction = []
    for d in (0, 1):
        inputs = x if d == 0 else x[::-1]
        outs = []
        for layer in range(n_layers):
            w0, b, wp = cells[d][layer]
            units, proj = wp.shape
            h, c = state[(d, layer)] if state else (np.zeros(proj), np.zeros(units))
            out, h, c = lstm_sentence(inputs, w0, b, wp, h, c, cell_clip, proj_clip)
            final[(d, layer)] = (h, c)
            if layer > 0 and use_skip:
                out = out + inputs
            outs.append(out if d == 0 else out[::-1])
            inputs = out
        per_direction.append(outs)
    layers = np.stack(
        [np.concatenate([per_direction[0][k], per_direction[1][k]], -1) for k in range(n_layers)]
    )
    return layers, final


def char_cnn(char_ids, embedding, convolutions, highways, projection, activation="relu"):
    """char_ids [N, C] ints (0 = padding token; row 0 of `embedding` is used as is).

    convolutions: [(kernel [w, E, n], bias [n])]; highways: [(W_carry, b_carry, W_tr, b_tr)];
    projection: (W [F, P], b [P]). Returns [N, P].
    """
    x = embedding[char_ids]  # [N, C, E]
    pooled = []
    for kernel, bias in convolutions:
        width = kernel.shape[0]
        positions = x.shape[1] - width + 1
        windows = np.stack([x[:, p : p + width] for p in range(positions)], axis=1)
        conv = np.einsum("npwe,wek->npk", windows, kernel) + bias
        act = np.maximum(conv, 0.0) if activation == "relu" else np.tanh(conv)
        pooled.append(act.max(axis=1))
    y = np.concatenate(pooled, axis=-1)
    for w_carry, b_carry, w_tr, b_tr in highways:
        gate = sigmoid(y @ w_carry + b_carry)
        y = gate * np.maximum(y @ w_tr + b_tr, 0.0) + (1.0 - gate) * y
    w_proj, b_proj = projection
    return y @ w_proj + b_proj


def char_cnn_from_published(arrays, n_filters_widths, char_ids, activation="relu"):
    """`char_cnn` with weights given in the published hdf5 layout (dict name -> array)."""
    embedding = np.concatenate([np.zeros((1, arrays["char_embed"].shape[1])), arrays["char_embed"]])
    convolutions = [
        (arrays[f"CNN/W_cnn_{i}"][0], arrays[f"CNN/b_cnn_{i}"]) for i in range(n_filters_widths)
    ]
    highways = []
    k = 0
    while f"CNN_high_{k}/W_carry" in arrays:
        highways.append(
            tuple(
                arrays[f"CNN_high_{k}/{n}"]
                for n in ("W_carry", "b_carry", "W_transform", "b_transform")
            )
        )
        k += 1
    projection = (arrays["CNN_proj/W_proj"], arrays["CNN_proj/b_proj"])
    return char_cnn(char_ids, embedding, convolutions, highways, projection, activation)


def published_cells(arrays, n_layers):
    return [
        [
            tuple(
                arrays[f"RNN_{d}/RNN/MultiRNNCell/Cell{layer}/LSTMCell/{n}"]
                for n in ("W_0", "B", "W_P_0")
            )
            for layer in range(n_layers)
        ]
        for d in (0, 1)
    ]


def top_layers_of_streams(arrays, options, streams):
    """The published model `arrays` (hdf5 layout) over `streams[k][i]`, the character ids
    `[T + 2, C]` of sentence `i` of stream `k` with `<S>` and `</S>` around it, each stream's
    state carried from sentence to sentence (the fixtures' replay). Returns `[i][k]`: the top
    layer `[T, 2P]` without the boundary positions."""
    lstm, char_cnn_options = options["lstm"], options["char_cnn"]
    cells = published_cells(arrays, lstm["n_layers"])
    states, outputs = [None] * len(streams), []
    for i in range(len(streams[0])):
        outputs.append([])
        for k, stream in enumerate(streams):
            tokens = char_cnn_from_published(
                arrays, len(char_cnn_options["filters"]), stream[i], char_cnn_options["activation"]
            )
            layers, states[k] = bilstm_sentence(
                tokens,
                cells,
                lstm["use_skip_connections"],
                lstm["cell_clip"],
                lstm["proj_clip"],
                states[k],
            )
            outputs[-1].append(layers[-1][1:-1])
    return outputs


def scalar_mix(layers, mask, weights, gamma, do_layer_norm=False, epsilon=1e-12, top_only=False):
    """layers [B, N, T, D]; mask [B, T]."""
    if top_only:
        return gamma * layers[:, -1]
    w = np.exp(weights - np.max(weights))
    w = w / w.sum()
    total = 0.0
    m = mask.astype(np.float64)[:, :, None]
    for j in range(layers.shape[1]):
        x = layers[:, j]
        if do_layer_norm:
            n = m.sum() * x.shape[-1]
            mean = (x * m).sum() / n
            var = (((x - mean) * m) ** 2).sum() / n
            x = (x - mean) / np.sqrt(var + epsilon)
        total = total + w[j] * x
    return gamma * total
