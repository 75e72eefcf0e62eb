"""ELMo embeddings from an exported ONNX model with ONNX Runtime: no TensorFlow, no Keras.

Inputs are prepared in NumPy (`elmo_keras.text.char_ids`, `elmo_keras.text.pretokenize`), the
model runs in an `onnxruntime.InferenceSession`. Importing this module imports neither
TensorFlow nor Keras, so it serves from a small environment (`pip install elmo-keras[runtime]`
needs only onnxruntime, NumPy and h5py at run time).
"""

import json

import numpy as np

from elmo_keras.batching import as_sentences, length_batches
from elmo_keras.text.char_ids import MAX_CHARACTERS_PER_TOKEN, batch_to_char_ids
from elmo_keras.validation import check_int


class OnnxEmbedder:
    """Computes ELMo layer activations with ONNX Runtime from a model written by `export_onnx`.

    Sentences are sorted by length, run in batches of up to `batch_size` similar lengths (little
    padding), and returned in input order. Every sentence starts from the zero state, so an
    embedding never depends on the other sentences of the call.

    Args:
        model_path: str or path-like. An `.onnx` file from `elmo_keras.export.export_onnx`
            (float32 or int8-quantized; stateful or not).
        batch_size: int. The most sentences per ONNX Runtime call. Defaults to `64`.
        providers: list or `None`. ONNX Runtime execution providers, e.g.
            `["CUDAExecutionProvider", "CPUExecutionProvider"]`. Defaults to `None`, the CPU.
        session_options: `onnxruntime.SessionOptions` or `None`. E.g. to set
            `intra_op_num_threads`. Defaults to `None`, ONNX Runtime's defaults.

    Example:

    >>> from elmo_keras.runtime import OnnxEmbedder
    >>> embedder = OnnxEmbedder("elmo.onnx")  # doctest: +SKIP
    >>> layers = embedder.embed([["Hello", "world", "!"], ["Hi"]])  # doctest: +SKIP
    >>> layers[0].shape  # (n_layers + 1, n_tokens, 2 * projection_dim)  # doctest: +SKIP
    (3, 3, 1024)
    """

    def __init__(self, model_path, batch_size=64, providers=None, session_options=None):
        import onnxruntime  # noqa: PLC0415 (a heavy import, done once the client is built)

        self.batch_size = check_int("batch_size", batch_size)
        self.model_path = str(model_path)
        self._session = onnxruntime.InferenceSession(
            self.model_path,
            sess_options=session_options,
            providers=list(providers) if providers is not None else ["CPUExecutionProvider"],
        )
        self._metadata = dict(self._session.get_modelmeta().custom_metadata_map)
        self._input_names = [value.name for value in self._session.get_inputs()]
        self._outputs = {value.name: value for value in self._session.get_outputs()}
        if "char_ids" not in self._input_names:
            raise ValueError(
                "The ONNX model has no `char_ids` input; was it written by "
                f"`elmo_keras.export.export_onnx`? Received inputs: {self._input_names} "
                f"in model_path={self.model_path!r}"
            )
        n_layers = self._metadata.get("n_layers")
        if n_layers is None:  # no metadata: count the layer outputs
            n_layers = sum(name.startswith("lstm_outputs") for name in self._outputs)
        self._n_layers = int(n_layers)
        projection_dim = self._metadata.get("projection_dim")
        if projection_dim is None:
            projection_dim = self._outputs["word_emb"].shape[-1]
        self._projection_dim = int(projection_dim)
        self._lstm_units = int(self._metadata.get("lstm_units", 0)) or None
        if self._lstm_units is None and "state_c" in self._input_names:
            state_c = self._session.get_inputs()[self._input_names.index("state_c")]
            self._lstm_units = int(state_c.shape[-1])
        self._max_characters = int(
            self._metadata.get("max_characters_per_token", MAX_CHARACTERS_PER_TOKEN)
        )
        self._layer_outputs = ["word_emb"] + [
            f"lstm_outputs{k}" for k in range(1, self._n_layers + 1)
        ]
        missing = [name for name in self._layer_outputs if name not in self._outputs]
        if missing:
            raise ValueError(
                f"The ONNX model lacks the outputs {missing}. Received outputs: "
                f"{sorted(self._outputs)} in model_path={self.model_path!r}"
            )

    @property
    def n_layers(self):
        """int. The number of biLSTM layers (the embeddings have `n_layers + 1` layers)."""
        return self._n_layers

    @property
    def projection_dim(self):
        """int. The biLM's projection size `P` (the embeddings have `2 * P` features)."""
        return self._projection_dim

    @property
    def output_dim(self):
        """int. The number of features of each layer's vectors, `2 * projection_dim`."""
        return 2 * self._projection_dim

    @property
    def max_characters_per_token(self):
        """int. The number of character ids per token the model takes."""
        return self._max_characters

    @property
    def stateful(self):
        """bool. Whether the model takes and returns the LSTM state (`state_h`, `state_c`)."""
        return "state_h" in self._input_names

    @property
    def metadata(self):
        """dict. The model's `metadata_props` (str -> str)."""
        return dict(self._metadata)

    @property
    def output_names(self):
        """list of str. The model's outputs."""
        meta = self._metadata.get("outputs")
        return json.loads(meta) if meta else sorted(self._outputs)

    def run(self, char_ids, state_h=None, state_c=None, output_names=None):
        """Runs the model on one batch of character ids.

        Args:
            char_ids: int32 array `[B, T, max_characters_per_token]`, 0 = padding token.
            state_h: float32 array `[B, 2, n_layers, projection_dim]` or `None` (zeros); only
                for a stateful model.
            state_c: float32 array `[B, 2, n_layers, lstm_units]` or `None` (zeros).
            output_names: list of str or `None`. The outputs to compute. Defaults to all.

        Returns:
            A dict from output name to array: `word_emb`, `lstm_outputs{k}`, `elmo`, `default`,
            `sequence_len` (and `final_state_h`, `final_state_c` for a stateful model).
        """
        char_ids = np.asarray(char_ids, dtype=np.int32)
        if char_ids.ndim != 3 or char_ids.shape[-1] != self._max_characters:
            raise ValueError(
                f"`char_ids` must have shape [batch, tokens, {self._max_characters}]. "
                f"Received: char_ids.shape={char_ids.shape}"
            )
        feeds = {"char_ids": char_ids}
        if self.stateful:
            batch = char_ids.shape[0]
            shape_h = (batch, 2, self._n_layers, self._projection_dim)
            shape_c = (batch, 2, self._n_layers, self._lstm_units)
            feeds["state_h"] = (
                np.zeros(shape_h, np.float32)
                if state_h is None
                else np.asarray(state_h, np.float32)
            )
            feeds["state_c"] = (
                np.zeros(shape_c, np.float32)
                if state_c is None
                else np.asarray(state_c, np.float32)
            )
        elif state_h is not None or state_c is not None:
            raise ValueError(
                "This ONNX model has no state inputs; export it with `stateful=True` "
                f"(`--onnx-state`) to pass `state_h` / `state_c`. model_path={self.model_path!r}"
            )
        names = list(output_names) if output_names is not None else list(self._outputs)
        return dict(zip(names, self._session.run(names, feeds), strict=True))

    def embed(self, sentences, progress=None):
        """Computes the layer activations of each tokenized sentence.

        Args:
            sentences: an iterable (list, generator, ...) of sentences, each a sequence of
                `str` tokens. A string where a sequence of tokens belongs, or a token that is
                not a string, is a `ValueError` (`elmo_keras.batching.as_sentences`, the same
                rules as `BiLMEmbedder.embed`).
            progress: optional callable, given the number of sentences done after each batch
                (the same hook as `BiLMEmbedder.embed`).

        Returns:
            A list, in input order, of float32 arrays of shape
            `(n_layers + 1, n_tokens, 2 * projection_dim)`: layer 0 is the token embedding
            repeated twice, layer k the concatenated forward and backward outputs of biLSTM
            layer k. An empty sentence gives shape `(n_layers + 1, 0, 2 * projection_dim)`.
        """
        sentences = as_sentences(sentences)
        depth, width = self._n_layers + 1, 2 * self._projection_dim
        results = [None] * len(sentences)
        done = 0
        for rows in length_batches(sentences, self.batch_size):
            if not sentences[rows[0]]:  # the group of empty sentences needs no model call
                for index in rows:
                    results[index] = np.zeros((depth, 0, width), np.float32)
            else:
                batch = [sentences[i] for i in rows]
                char_ids = batch_to_char_ids(batch, max_characters_per_token=self._max_characters)
                outputs = self.run(char_ids, output_names=self._layer_outputs)
                word_emb = outputs["word_emb"]
                for row, index in enumerate(rows):
                    n = len(sentences[index])
                    layers = np.empty((depth, n, width), np.float32)
                    layers[0, :, : self._projection_dim] = word_emb[row, :n]
                    layers[0, :, self._projection_dim :] = word_emb[row, :n]
                    for k in range(1, depth):
                        layers[k] = outputs[f"lstm_outputs{k}"][row, :n]
                    results[index] = layers
            done += len(rows)
            if progress is not None:
                progress(done)
        return results

    def embed_text(self, texts, mode="punctuation"):
        """Tokenizes untokenized sentences in Python and embeds them.

        Args:
            texts: list of str. Untokenized sentences.
            mode: str. `"punctuation"` or `"whitespace"` (see
                `elmo_keras.text.pretokenize.tokenize_python`). Defaults to `"punctuation"`.

        Returns:
            A tuple `(tokens, embeddings)`: the list of token lists and what `embed` returns.
        """
        from elmo_keras.text.pretokenize import tokenize_python  # noqa: PLC0415

        if isinstance(texts, str | bytes):
            raise ValueError(f"`texts` must be a list of str. Received: texts={texts!r}")
        tokens = [tokenize_python(text, mode=mode) for text in texts]
        return tokens, self.embed(tokens)

    def __repr__(self):
        return (
            f"OnnxEmbedder(model_path={self.model_path!r}, batch_size={self.batch_size}, "
            f"n_layers={self._n_layers}, projection_dim={self._projection_dim})"
        )
