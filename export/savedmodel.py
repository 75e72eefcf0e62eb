"""Export a biLM to a TensorFlow SavedModel with the TF-Hub ELMo module's signatures.

The SavedModel holds only TensorFlow ops (plus, on request, one tensorflow-text op for the
sentence split), so it loads with `tf.saved_model.load` in a process that never imports
elmo-keras, and runs in TF Serving (whose C++ loader restores the variables into a session).

Signatures (the inputs and outputs of the TF-Hub ELMo module, so its users can switch):

- `default` (also `serving_default`, the one TF Serving runs when a request names none):
  `sentences` string `[B]`, untokenized; split in the graph (`elmo_keras.text.tf_tokenization`) as
  every elmo-keras entry point splits ("mat." -> "mat" "."), or, exported with
  `tokenization_mode="whitespace"`, on whitespace only as TF-Hub's module does.
- `tokens`: `tokens` string `[B, T]` plus `sequence_len` int32 `[B]`; positions at or past a
  sentence's length are padding, whatever they hold.
- `char_ids`: `char_ids` int32 `[B, T, max_characters_per_token]` (0 = padding token).
- `char_ids_with_state`: `char_ids`, `state_h` `[B, 2, n_layers, projection_dim]`, `state_c`
  `[B, 2, n_layers, lstm_units]`, for streaming a long document window by window.

Every signature returns `word_emb` `[B, T, P]`, `lstm_outputs1` ... `lstm_outputs{n_layers}`
`[B, T, 2P]`, `elmo` `[B, T, 2P]` (the ScalarMix with its current weights), `default` `[B, 2P]`
(the mean of `elmo` over the real tokens only) and `sequence_len` int32 `[B]`;
`char_ids_with_state` also returns `final_state_h` and `final_state_c`, to feed as the next
window's `state_h` and `state_c`.

The saved object is also a TF-Hub "reusable SavedModel": `obj(sentences, training=False)`
returns the `default` signature's outputs, `obj.variables` holds every variable,
`obj.trainable_variables` the ScalarMix's weights and gamma (TF-Hub's module trains those four
scalars too), and `obj.regularization_losses` the mix's L2 penalty when it has one. So
`hub.KerasLayer(path, output_key="elmo", trainable=True)` fine-tunes the mix.
Variables: a Keras 3 variable is a trackable wrapper around a `tf.Variable`. Saved as such, its
checkpoint entry is restored into a second variable that the wrapper creates at export time,
not into the one the functions read; `tf.saved_model.load` mends this through the object graph,
but TF1 sessions and TF Serving's C++ loader restore by name and then fail with "Could not find
variable ...". So the module keeps the Keras objects out of the saved object graph and saves
the `tf.Variable`s themselves, each once (keras' `ExportArchive` also saves the `tf.Variable`s,
but keeps the wrappers too, which stores every value twice).
"""

import functools
import os
import re
import types

import tensorflow as tf

from elmo_keras.text.tokenization import DEFAULT_TOKENIZATION_MODE as DEFAULT_MODE
from elmo_keras.text.tokenization import check_mode

SIGNATURE_NAMES = ("default", "tokens", "char_ids", "char_ids_with_state")
# TF Serving runs `serving_default` when a request names no signature; it is `default`.
SERVING_DEFAULT = "serving_default"
# No autograph: nothing traced branches in Python on a tensor, and it made each trace slower.
traced = functools.partial(tf.function, autograph=False)


def _bilm_dims(bilm):
    """`(n_layers, projection_dim, lstm_units, ids per token)` of a BiLM (the ids per token:
    `max_characters_per_token`, plus the word id for a model with its own dictionaries)."""
    lstm = bilm.to_options()["lstm"]
    return (
        int(lstm["n_layers"]),
        int(lstm["projection_dim"]),
        int(lstm["dim"]),
        int(bilm.char_cnn.input_width),
    )


def default_scalar_mix(n_layers):
    """A built `ScalarMix` over `n_layers + 1` layers with uniform weights and gamma 1."""
    from elmo_keras.layers import ScalarMix  # noqa: PLC0415 (keeps this module's import light)

    mix = ScalarMix(n_layers + 1, name="elmo_scalar_mix")
    mix.build((None, n_layers + 1, None, None))
    return mix


def tf_variables(variables):
    """The `tf.Variable`s behind Keras 3 variables (a `tf.Variable` stays itself), each once."""
    found = {}
    for variable in variables:
        if not isinstance(variable, tf.Variable):
            variable = variable.value  # a Keras 3 variable on TensorFlow wraps a tf.Variable
        found.setdefault(id(variable), variable)
    return list(found.values())


def elmo_outputs(bilm_outputs, scalar_mix, n_layers):
    """Maps the BiLM's output dict to the TF-Hub output names.

    Args:
        bilm_outputs: dict. What `BiLM.call` returns.
        scalar_mix: callable. `scalar_mix(activations, mask=mask) -> [B, T, 2P]`.
        n_layers: int. The number of biLSTM layers.

    Returns:
        A dict of tensors: `word_emb`, `lstm_outputs1..n_layers`, `elmo`, `default`,
        `sequence_len`.
    """
    activations = bilm_outputs["activations"]
    mask = bilm_outputs["mask"]
    outputs = {"word_emb": bilm_outputs["token_embeddings"]}
    for k in range(1, n_layers + 1):
        outputs[f"lstm_outputs{k}"] = activations[:, k]
    elmo = scalar_mix(activations, mask=mask)
    float_mask = tf.cast(mask, elmo.dtype)[..., tf.newaxis]
    sequence_len = tf.reduce_sum(tf.cast(mask, tf.int32), axis=1)
    # Zero the padded positions before pooling so nothing there can leak into `default`.
    total = tf.reduce_sum(elmo * float_mask, axis=1)
    count = tf.maximum(tf.cast(sequence_len, elmo.dtype), 1.0)[:, tf.newaxis]
    outputs["elmo"] = elmo
    outputs["default"] = total / count
    outputs["sequence_len"] = sequence_len
    return outputs


class ElmoServingModule(tf.Module):
    """A `tf.Module` that serves a BiLM and a ScalarMix: the object `export_savedmodel` saves.

    Reusable: `export_savedmodel` saves one, and a model that wraps a BiLM (e.g. an
    `ElmoEmbedding` layer's) can build one around its own BiLM and mix. The BiLM and the mix
    are not part of the saved object graph; their `tf.Variable`s are (see the module
    docstring), in `variables` and `trainable_variables`.

    Args:
        bilm: `elmo_keras.models.BiLM`. A built biLM.
        scalar_mix: `elmo_keras.layers.ScalarMix` or `None`. The mix behind the `elmo` output.
            Defaults to `None`, uniform weights and gamma 1.
        tokenization_mode: str. The split of the `default` signature: `"punctuation"` (the
            split of every elmo-keras entry point, see `elmo_keras.text.tf_tokenization.tokenize`)
            or `"whitespace"` (the TF-Hub module's). Defaults to `"punctuation"`.
        use_tensorflow_text: bool. Split with tensorflow-text's `RegexSplitWithOffsets` op
            (then loading needs `import tensorflow_text` first) instead of core TensorFlow
            ops. Defaults to `False`.

    Attributes:
        variables: list of `tf.Variable`. Every variable of the biLM and the mix.
        trainable_variables: list of `tf.Variable`. The mix's trainable weights (its scalar
            weights and gamma); the biLM stays frozen, as in TF-Hub's module.
        regularization_losses: list of `tf.function`s without arguments: the mix's L2 penalty
            when its `l2_coef` is set, else empty.
    """

    # `tf.Module` computes these three by walking its attributes; here they are stored lists,
    # so that they are saved and TF-Hub's `KerasLayer` finds them on the loaded object.
    variables = ()
    trainable_variables = ()
    regularization_losses = ()

    def __init__(
        self, bilm, scalar_mix=None, tokenization_mode=DEFAULT_MODE, use_tensorflow_text=False
    ):
        super().__init__(name="elmo")
        check_mode(tokenization_mode)
        (
            self.n_layers,
            self.projection_dim,
            self.lstm_units,
            self.max_characters_per_token,
        ) = _bilm_dims(bilm)
        if scalar_mix is None:
            scalar_mix = default_scalar_mix(self.n_layers)
        # A plain namespace is not trackable: the Keras objects stay out of the object graph.
        self._keras = types.SimpleNamespace(bilm=bilm, scalar_mix=scalar_mix)
        self.variables = tf_variables([*bilm.variables, *scalar_mix.variables])
        self.trainable_variables = tf_variables(scalar_mix.trainable_variables)
        self.regularization_losses = []
        if getattr(scalar_mix, "l2_coef", 0.0):
            self.regularization_losses.append(traced(self._mix_l2_penalty, input_signature=[]))
        self.tokenization_mode = tokenization_mode
        self.use_tensorflow_text = bool(use_tensorflow_text)
        c = self.max_characters_per_token
        L, P, U = self.n_layers, self.projection_dim, self.lstm_units
        self.default = traced(
            self._default,
            input_signature=[tf.TensorSpec([None], tf.string, name="sentences")],
        )
        self.tokens = traced(
            self._tokens,
            input_signature=[
                tf.TensorSpec([None, None], tf.string, name="tokens"),
                tf.TensorSpec([None], tf.int32, name="sequence_len"),
            ],
        )
        self.char_ids = traced(
            self._char_ids,
            input_signature=[tf.TensorSpec([None, None, c], tf.int32, name="char_ids")],
        )
        self.char_ids_with_state = traced(
            self._char_ids_with_state,
            input_signature=[
                tf.TensorSpec([None, None, c], tf.int32, name="char_ids"),
                tf.TensorSpec([None, 2, L, P], tf.float32, name="state_h"),
                tf.TensorSpec([None, 2, L, U], tf.float32, name="state_c"),
            ],
        )

    @property
    def bilm(self):
        return self._keras.bilm

    @property
    def scalar_mix(self):
        return self._keras.scalar_mix

    @traced(
        input_signature=[
            tf.TensorSpec([None], tf.string, name="sentences"),
            tf.TensorSpec([], tf.bool, name="training"),
        ]
    )
    def __call__(self, sentences, training=False):
        """The `default` signature as a call, for TF-Hub's `KerasLayer` (without `signature=`).

        `training` is accepted as TF-Hub's convention asks; the export has no dropout, so the
        outputs do not depend on it.
        """
        del training
        return self.default(sentences)

    def _mix_l2_penalty(self):
        weights = self.scalar_mix.scalar_weights
        return self.scalar_mix.l2_coef * tf.reduce_sum(tf.square(weights))

    def _run(self, char_ids, state=None):
        inputs = {"char_ids": char_ids}
        if state is not None:
            inputs["state_h"], inputs["state_c"] = state
        bilm_outputs = self.bilm(inputs, training=False)
        outputs = elmo_outputs(bilm_outputs, self.scalar_mix, self.n_layers)
        if state is not None:
            outputs["final_state_h"] = bilm_outputs["state_h"]
            outputs["final_state_c"] = bilm_outputs["state_c"]
        return outputs

    def _default(self, sentences):
        from elmo_keras.text.tf_char_ids import tokens_to_char_ids  # noqa: PLC0415
        from elmo_keras.text.tf_tokenization import tokenize  # noqa: PLC0415

        tokens = tokenize(
            sentences,
            mode=self.tokenization_mode,
            use_tensorflow_text=self.use_tensorflow_text,
        )
        width, dictionary = self.max_characters_per_token, self.bilm.token_dictionary
        return self._run(tokens_to_char_ids(tokens, width, dictionary=dictionary))

    def _tokens(self, tokens, sequence_len):
        from elmo_keras.text.tf_char_ids import dense_tokens_to_char_ids  # noqa: PLC0415

        width, dictionary = self.max_characters_per_token, self.bilm.token_dictionary
        return self._run(dense_tokens_to_char_ids(tokens, sequence_len, width, dictionary))

    def _char_ids(self, char_ids):
        return self._run(char_ids)

    def _char_ids_with_state(self, char_ids, state_h, state_c):
        return self._run(char_ids, state=(state_h, state_c))

    def concrete_signatures(self):
        """The concrete functions to save, keyed by signature name (`serving_default` too)."""
        signatures = {name: getattr(self, name).get_concrete_function() for name in SIGNATURE_NAMES}
        signatures[SERVING_DEFAULT] = signatures["default"]
        return signatures


def export_savedmodel(
    bilm, directory, scalar_mix=None, tokenization_mode=DEFAULT_MODE, use_tensorflow_text=False
):
    """Saves a biLM as a SavedModel with the TF-Hub ELMo module's signatures.

    The SavedModel loads with plain `tf.saved_model.load(directory)` (elmo-keras is not
    needed), in a TF1 session and in TF Serving. With `use_tensorflow_text=True` the graph holds
    a tensorflow-text op and loading needs `import tensorflow_text` first.

    Args:
        bilm: `elmo_keras.models.BiLM`. A built biLM (e.g. from `BiLM.from_bilm_tf`).
        directory: str or path-like. Where to write the SavedModel (created).
        scalar_mix: `elmo_keras.layers.ScalarMix` or `None`. The mix behind the `elmo` output,
            saved with its current weights (trainable after loading). Defaults to `None`,
            uniform weights and gamma 1.
        tokenization_mode: str. How the `default` signature splits sentences:
            `"punctuation"` (the split of every elmo-keras entry point: "mat." -> "mat" ".")
            or `"whitespace"` (the TF-Hub module's split: "mat." stays one token). Defaults
            to `"punctuation"`.
        use_tensorflow_text: bool. Split with tensorflow-text instead of core TensorFlow ops
            (same tokens). Defaults to `False`.

    Returns:
        The `ElmoServingModule` that was saved.

    Example:

    >>> from elmo_keras.models import BiLM
    >>> bilm = BiLM.from_bilm_tf("options.json", "lm_weights.hdf5")  # doctest: +SKIP
    >>> export_savedmodel(bilm, "elmo_savedmodel")  # doctest: +SKIP
    >>> import tensorflow as tf  # doctest: +SKIP
    >>> elmo = tf.saved_model.load("elmo_savedmodel")  # doctest: +SKIP
    >>> elmo.signatures["default"](sentences=tf.constant(["Hello world."]))["elmo"].shape
    TensorShape([1, 3, 1024])
    """
    module = ElmoServingModule(
        bilm,
        scalar_mix=scalar_mix,
        tokenization_mode=tokenization_mode,
        use_tensorflow_text=use_tensorflow_text,
    )
    tf.saved_model.save(module, os.fspath(directory), signatures=module.concrete_signatures())
    return module


ONNX_INPUT_FORMS = ("token_index", "char_ids")


def _weight_input_names(variables):
    """A distinct graph-input name per variable, from its path (`char_cnn/char_embed/...`)."""
    names, seen = [], set()
    for index, variable in enumerate(variables):
        name = re.sub(r"[^A-Za-z0-9_.]", "_", getattr(variable, "path", variable.name))
        name = f"weight.{name}" if name not in seen else f"weight{index}.{name}"
        seen.add(name)
        names.append(name)
    return names


def _positions_as_tokens(char_ids, width):
    """`char_ids` `[B, T, C]` as the `token_char_ids` / `token_index` inputs of the BiLM, one
    row per position (tf2onnx cannot convert the BiLM's own deduplication, `UniqueV2`)."""
    shape = tf.shape(char_ids)
    positions = tf.reshape(tf.range(shape[0] * shape[1]), shape[:2])
    return {
        "token_char_ids": tf.reshape(char_ids, [-1, width]),
        "token_index": tf.where(char_ids[:, :, 0] != 0, positions, -1),
    }


def weights_as_inputs_function(module, input_form="token_index", stateful=False):
    """The serving computation with every biLM weight as an input, for a graph converter.

    A converter given a function that reads variables freezes them into graph constants and
    copies the values several times (tf2onnx peaked at 18 GiB on the published model). Here the
    biLM runs with `stateless_call`, so each weight is an argument of the function; the
    converted graph holds no weight values and the caller attaches them (e.g. as ONNX
    initializers) afterwards. The ScalarMix's four scalars stay captured (frozen, tiny).

    Args:
        module: `ElmoServingModule`. The biLM and mix to serve.
        input_form: str. `"token_index"` (`token_char_ids` int32 `[U, C]`, the distinct
            tokens, and `token_index` int32 `[B, T]`, -1 = padding) or `"char_ids"` (int32
            `[B, T, C]`). Defaults to `"token_index"`.
        stateful: bool. Adds the `state_h` / `state_c` inputs and the `final_state_h` /
            `final_state_c` outputs. Defaults to `False`.

    Returns:
        A tuple `(function, input_signature, weights)`: a `tf.function`, its `TensorSpec`s
        (the model inputs first, then one per weight), and a list of `(input name, variable)`
        pairs in the order of the weight inputs.
    """
    if input_form not in ONNX_INPUT_FORMS:
        raise ValueError(
            f"`input_form` must be one of {ONNX_INPUT_FORMS}. Received: input_form={input_form!r}"
        )
    bilm = module.bilm
    trainable = list(bilm.trainable_variables)
    variables = trainable + list(bilm.non_trainable_variables)
    c, L = module.max_characters_per_token, module.n_layers
    P, U = module.projection_dim, module.lstm_units
    if input_form == "token_index":
        signature = [
            tf.TensorSpec([None, c], tf.int32, name="token_char_ids"),
            tf.TensorSpec([None, None], tf.int32, name="token_index"),
        ]
    else:
        signature = [tf.TensorSpec([None, None, c], tf.int32, name="char_ids")]
    if stateful:
        signature += [
            tf.TensorSpec([None, 2, L, P], tf.float32, name="state_h"),
            tf.TensorSpec([None, 2, L, U], tf.float32, name="state_c"),
        ]
    input_names = [spec.name for spec in signature]
    weight_names = _weight_input_names(variables)
    signature += [
        tf.TensorSpec(v.shape, v.dtype, name=name)
        for v, name in zip(variables, weight_names, strict=True)
    ]

    def run(*args):
        inputs = dict(zip(input_names, args[: len(input_names)], strict=True))
        if input_form == "char_ids":  # every position its own row: no in-graph UniqueV2
            inputs.update(_positions_as_tokens(inputs.pop("char_ids"), c))
        values = list(args[len(input_names) :])
        bilm_outputs, _ = bilm.stateless_call(
            values[: len(trainable)], values[len(trainable) :], inputs, training=False
        )
        outputs = elmo_outputs(bilm_outputs, module.scalar_mix, module.n_layers)
        if stateful:
            outputs["final_state_h"] = bilm_outputs["state_h"]
            outputs["final_state_c"] = bilm_outputs["state_c"]
        return outputs

    return traced(run), signature, list(zip(weight_names, variables, strict=True))
