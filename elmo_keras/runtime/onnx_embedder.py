"""ELMo embeddings from an exported ONNX model with ONNX Runtime: no TensorFlow, no Keras.

Inputs are prepared in NumPy (`elmo_keras.text.char_ids`, `elmo_keras.text.tokenization`), the
model runs in an `onnxruntime.InferenceSession`. Importing this module imports neither
TensorFlow nor Keras, so it serves from a small environment (`pip install elmo-keras[runtime]`
needs only onnxruntime, NumPy and h5py at run time).

Two input forms (the model's `input_form` metadata; models without it take `char_ids`):

- `token_index` (what `export_onnx` writes): `token_char_ids` int32 `[U, C]`, the distinct
  tokens of the batch, and `token_index` int32 `[B, T]`, each position's row there (-1 =
  padding). The client deduplicates the tokens on the host, exactly (on the token strings), so
  the model's char CNN runs once per distinct token.
- `char_ids`: one input `char_ids` int32 `[B, T, C]` (models exported before issue 10).
"""

import json

import numpy as np

from elmo_keras.batching import as_sentences
from elmo_keras.embedder import Embedder
from elmo_keras.runtime.onnx_metadata import model_dictionary, model_sizes, read_metadata
from elmo_keras.text.char_ids import batch_to_char_ids, distinct_token_ids
from elmo_keras.validation import check_int

# ONNX Runtime's run option that returns the arena's free memory to the system after a call.
ARENA_SHRINKAGE = "memory.enable_memory_arena_shrinkage"
# Calls between two shrinkages by default. With the full model (`python benchmarks/onnx_gap.py`),
# shrinking after every call cost 9% of `embed`'s speed in two of three runs (the next call faults
# its buffers in again); every 8th call cost little, and its peak resident set over 48 calls of
# random shapes was within 100 MB of shrinking every call, without the growth of never shrinking.
SHRINK_ARENA_EVERY = 8


class OnnxEmbedder(Embedder):
    """Computes ELMo layer activations with ONNX Runtime from a model written by `export_onnx`.

    Sentences are sorted by length, run in batches of up to `batch_size` similar lengths (little
    padding; at most `max_tokens` padded positions when set), and returned in input order.
    Every sentence starts from the zero state, so an embedding never depends on the other
    sentences of the call. Within a batch each distinct token is sent once (see the module
    docstring); models of the older `char_ids` form keep working. `embed`, `iter_embed` and
    `embed_text` come from `elmo_keras.embedder.Embedder`, shared with the Keras client
    `elmo_keras.models.BiLMEmbedder`.

    Every `shrink_arena_every` calls (8 by default, without `session_options`) the session
    shrinks ONNX Runtime's CPU memory arena back (run option
    `memory.enable_memory_arena_shrinkage`), so the resident memory levels off instead of
    growing with every new batch shape.

    Args:
        model_path: str or path-like. An `.onnx` file from `elmo_keras.export.export_onnx`
            (float32 or int8-quantized; stateful or not; either input form).
        batch_size: int. The most sentences per ONNX Runtime call. Defaults to `64`.
        max_tokens: int or `None`. The most padded token positions (sentences x longest
            sentence) per call; a longer sentence runs alone. Defaults to `None`, no limit.
        providers: list or `None`. ONNX Runtime execution providers, e.g.
            `["CUDAExecutionProvider", "CPUExecutionProvider"]`. One this onnxruntime cannot
            use is a `ValueError`, unless `"CPUExecutionProvider"` is listed as the fallback
            (then a `UserWarning` names it). Defaults to `None`, the CPU.
        session_options: `onnxruntime.SessionOptions` or `None`. E.g. to set
            `intra_op_num_threads`. Given, it is used as is (and no arena shrinkage unless
            `shrink_arena_every` is given too). Defaults to `None`: ONNX Runtime's defaults.
        shrink_arena_every: int or `None`. Shrink the CPU arena after every n-th call: `1`
            after each call (the least memory, slower), `0` never (ONNX Runtime's own
            behaviour). Defaults to `None`: `8` without `session_options`, `0` with them.

    Example:

    >>> from elmo_keras.runtime import OnnxEmbedder
    >>> embedder = OnnxEmbedder("elmo.onnx")  # doctest: +SKIP
    >>> layers = embedder.embed([["Hello", "world", "!"], ["Hi"]])  # doctest: +SKIP
    >>> layers[0].shape  # (n_layers + 1, n_tokens, 2 * projection_dim)  # doctest: +SKIP
    (3, 3, 1024)
    """

    def __init__(
        self,
        model_path,
        batch_size=64,
        max_tokens=None,
        providers=None,
        session_options=None,
        shrink_arena_every=None,
    ):
        import onnxruntime  # noqa: PLC0415 (a heavy import, done once the client is built)

        super().__init__(batch_size, max_tokens)
        if shrink_arena_every is None:
            shrink_arena_every = SHRINK_ARENA_EVERY if session_options is None else 0
        self.shrink_arena_every = check_int("shrink_arena_every", shrink_arena_every, minimum=0)
        self.model_path = str(model_path)
        self._session = _open_session(
            onnxruntime,
            self.model_path,
            sess_options=session_options,
            providers=_check_providers(onnxruntime, providers),
        )
        self._calls = 0
        self._shrink_options = None  # the run options of a call that shrinks the arena
        if self.shrink_arena_every and "CPUExecutionProvider" in self._session.get_providers():
            self._shrink_options = onnxruntime.RunOptions()
            self._shrink_options.add_run_config_entry(ARENA_SHRINKAGE, "cpu:0")
        self._metadata = read_metadata(self._session)
        self._input_names = [value.name for value in self._session.get_inputs()]
        self._outputs = {value.name: value for value in self._session.get_outputs()}
        if "token_char_ids" in self._input_names and "token_index" in self._input_names:
            self._input_form = "token_index"
        elif "char_ids" in self._input_names:
            self._input_form = "char_ids"
        else:
            raise ValueError(
                "The ONNX model has neither a `char_ids` input nor `token_char_ids` and "
                "`token_index`; was it written by `elmo_keras.export.export_onnx`? Received "
                f"inputs: {self._input_names} in model_path={self.model_path!r}"
            )
        inputs = {value.name: value for value in self._session.get_inputs()}
        sizes = model_sizes(self.model_path, self._metadata, inputs, self._outputs)
        self._n_layers = sizes["n_layers"]
        self._projection_dim = sizes["projection_dim"]
        self._lstm_units = sizes["lstm_units"]
        self._max_characters = sizes["max_characters_per_token"]
        self._id_width = sizes["id_width"]  # the columns of a token's id row
        # A model with its own dictionaries (ELMoForManyLangs), else None (byte ids).
        self._dictionary = model_dictionary(self._metadata, self._max_characters)
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
    def max_characters_per_token(self):
        """int. The number of character ids per token the model takes."""
        return self._max_characters

    @property
    def stateful(self):
        """bool. Whether the model takes and returns the LSTM state (`state_h`, `state_c`)."""
        return "state_h" in self._input_names

    @property
    def input_form(self):
        """str. `"token_index"` (distinct tokens + an index) or `"char_ids"` (older models)."""
        return self._input_form

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
        """Runs the model on one batch of character ids (either input form).

        For a `token_index` model the distinct rows of `char_ids` are found with `np.unique`
        (exact) and sent once each.

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
        if char_ids.ndim != 3 or char_ids.shape[-1] != self._id_width:
            raise ValueError(
                f"`char_ids` must have shape [batch, tokens, {self._id_width}]. "
                f"Received: char_ids.shape={char_ids.shape}"
            )
        if self._input_form == "char_ids":
            feeds = {"char_ids": char_ids}
        else:
            flat = char_ids.reshape(-1, self._id_width)
            real = flat[:, 0] != 0
            distinct, inverse = np.unique(flat[real], axis=0, return_inverse=True)
            token_index = np.full(flat.shape[0], -1, np.int32)
            token_index[real] = inverse.reshape(-1)
            feeds = self._token_feeds(distinct, token_index.reshape(char_ids.shape[:2]))
        return self._run_feeds(feeds, char_ids.shape[0], state_h, state_c, output_names)

    def run_tokens(
        self, token_char_ids, token_index, state_h=None, state_c=None, output_names=None
    ):
        """Runs a `token_index` model on one batch given as distinct tokens and an index.

        Args:
            token_char_ids: int32 array `[U, max_characters_per_token]`: the distinct tokens.
            token_index: int32 array `[B, T]`: each position's row of `token_char_ids`, -1 for
                padding (real tokens first in each row).
            state_h, state_c, output_names: as in `run`.

        Returns:
            What `run` returns.
        """
        if self._input_form != "token_index":
            raise ValueError(
                "`run_tokens` needs a model of the `token_index` input form; this one takes "
                f"`char_ids` (use `run`). model_path={self.model_path!r}"
            )
        token_char_ids = np.asarray(token_char_ids, dtype=np.int32)
        token_index = np.asarray(token_index, dtype=np.int32)
        if token_char_ids.ndim != 2 or token_char_ids.shape[-1] != self._id_width:
            raise ValueError(
                f"`token_char_ids` must have shape [distinct_tokens, {self._id_width}]. "
                f"Received: token_char_ids.shape={token_char_ids.shape}"
            )
        if token_index.ndim != 2:
            raise ValueError(
                "`token_index` must have shape [batch, tokens]. "
                f"Received: token_index.shape={token_index.shape}"
            )
        if token_index.size and (
            token_index.min() < -1 or token_index.max() >= len(token_char_ids)
        ):
            raise ValueError(
                f"`token_index` values must be -1 (padding) or rows of `token_char_ids` "
                f"(0..{len(token_char_ids) - 1}). Received: min={token_index.min()}, "
                f"max={token_index.max()}"
            )
        feeds = self._token_feeds(token_char_ids, token_index)
        return self._run_feeds(feeds, token_index.shape[0], state_h, state_c, output_names)

    def _token_feeds(self, token_char_ids, token_index):
        if not len(token_char_ids):  # padding only: one dummy row keeps every shape non-empty
            token_char_ids = np.zeros((1, self._id_width), np.int32)
        return {"token_char_ids": token_char_ids, "token_index": token_index}

    def _run_feeds(self, feeds, batch, state_h, state_c, output_names):
        if self.stateful:
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
        self._calls += 1
        shrink = self._shrink_options is not None and self._calls % self.shrink_arena_every == 0
        options = self._shrink_options if shrink else None
        return dict(zip(names, self._session.run(names, feeds, options), strict=True))

    def _char_ids(self, sentences):
        """Right-padded ids of token lists: the model's own dictionary's, else bytes."""
        if self._dictionary is not None:
            return self._dictionary.batch_ids(sentences)
        return batch_to_char_ids(sentences, max_characters_per_token=self._max_characters)

    def _token_rows(self, sentences):
        """The distinct tokens' ids and each position's row, as `_char_ids` makes ids."""
        if self._dictionary is not None:
            return self._dictionary.distinct_token_ids(sentences)
        return distinct_token_ids(sentences, self._max_characters)

    def embed_batch(self, sentences):
        """Embeds a list of tokenized sentences in one ONNX Runtime call (none if all are empty).

        Each distinct token of the batch is sent once (`token_index` models).

        Args:
            sentences: list of sentences, each a sequence of `str` tokens (the rules of
                `elmo_keras.batching.as_sentences`).

        Returns:
            A list, in the given order, of float32 arrays `(n_layers + 1, n_tokens,
            2 * projection_dim)`.
        """
        sentences = as_sentences(sentences)
        longest = max((len(s) for s in sentences), default=0)
        if longest == 0:
            return [self._empty() for _ in sentences]
        if self._input_form == "char_ids":
            outputs = self.run(self._char_ids(sentences), output_names=self._layer_outputs)
        else:
            token_char_ids, token_index = self._token_rows(sentences)
            feeds = self._token_feeds(token_char_ids, token_index)
            outputs = self._run_feeds(feeds, len(sentences), None, None, self._layer_outputs)
        word_emb, P = outputs["word_emb"], self._projection_dim
        results = []
        for row, sentence in enumerate(sentences):
            n = len(sentence)
            layers = np.empty((self._n_layers + 1, n, 2 * P), np.float32)
            layers[0, :, :P] = word_emb[row, :n]
            layers[0, :, P:] = word_emb[row, :n]
            for k in range(1, self._n_layers + 1):
                layers[k] = outputs[f"lstm_outputs{k}"][row, :n]
            results.append(layers)
        return results

    def __repr__(self):
        return (
            f"OnnxEmbedder(model_path={self.model_path!r}, batch_size={self.batch_size}, "
            f"max_tokens={self.max_tokens}, input_form={self._input_form!r}, "
            f"n_layers={self._n_layers}, projection_dim={self._projection_dim})"
        )


def _open_session(onnxruntime, model_path, **kwargs):
    """An `InferenceSession`; a path that is not an ONNX model is one clear error, not ONNX
    Runtime's: `FileNotFoundError` for a missing file, `ValueError` for a folder (an export
    folder holds `model.onnx`) or a file ONNX Runtime cannot read (a SavedModel's `.pb`)."""
    import pathlib  # noqa: PLC0415

    path = pathlib.Path(model_path)
    if path.is_dir():
        inside = path / "model.onnx"
        hint = f"; did you mean {inside}?" if inside.is_file() else ""
        raise ValueError(f"`model_path` must be an .onnx file, not a folder: {model_path}{hint}")
    if not path.is_file():
        raise FileNotFoundError(f"ONNX model not found: {model_path}")
    try:
        return onnxruntime.InferenceSession(model_path, **kwargs)
    except Exception as error:  # noqa: BLE001 (ORT raises its own classes, not importable)
        if type(error).__module__.split(".")[0] != "onnxruntime":
            raise
        reason = " ".join(str(error).split())[:300]
        raise ValueError(
            f"{model_path} is not an ONNX model ONNX Runtime can load: {reason}"
        ) from None


def _check_providers(onnxruntime, providers):
    """The providers to ask for. ONNX Runtime silently falls back to the CPU (a log line at
    most) for one it cannot use: here that is an error, or a warning when the list names the
    CPU as its own fallback."""
    if providers is None:
        return ["CPUExecutionProvider"]
    providers = list(providers)
    available = onnxruntime.get_available_providers()
    missing = [p for p in providers if (p[0] if isinstance(p, tuple) else p) not in available]
    if not missing:
        return providers
    message = (
        f"`providers` names {missing}, which this onnxruntime cannot use (available: "
        f"{available}; CUDA needs the onnxruntime-gpu package)"
    )
    if "CPUExecutionProvider" not in providers:
        raise ValueError(message + f". Received: providers={providers!r}")
    import warnings  # noqa: PLC0415

    warnings.warn(message + "; running on CPUExecutionProvider", UserWarning, stacklevel=3)
    return providers
