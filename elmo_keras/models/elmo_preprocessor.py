import json
import pathlib

import keras

from elmo_keras.download import cached_path
from elmo_keras.files import write_text
from elmo_keras.models import preset_folder
from elmo_keras.models.elmo_inputs import strings_to_char_ids, strings_to_char_ids_numpy
from elmo_keras.options import options_to_bilm_kwargs, read_options
from elmo_keras.presets import preset_sources, resolve_preset
from elmo_keras.text.char_ids import MAX_CHARACTERS_PER_TOKEN
from elmo_keras.text.pretokenize import DEFAULT_TOKENIZATION_MODE, TOKENIZATION_MODES
from elmo_keras.validation import check_choice, check_int

PREPROCESSOR_INPUT_TYPES = ("sentences", "tokens")


@keras.saving.register_keras_serializable(package="elmo_keras")
class ElmoPreprocessor(keras.layers.Layer):
    """Strings -> the character ids that `BiLM` and `ElmoEmbedding(input_type="char_ids")` take.

    keras-hub splits a model into a preprocessor (strings -> model inputs, run in the input
    pipeline) and a backbone that only computes. This is ELMo's preprocessor: it tokenizes
    sentences (`elmo_keras.text.tokenizer.tokenize`) and turns each token into
    `max_characters_per_token` character ids (`elmo_keras.text.tf_char_ids`). On TensorFlow
    it uses TensorFlow's string ops, so that it runs in a `tf.data` pipeline
    (`dataset.map(preprocessor)`) and the model after it needs no string op; on another
    backend (JAX) it gives the same ids from Python and NumPy, without importing TensorFlow.
    ELMo's split differs from keras-hub's in one way: there is no separate padding mask,
    because the ids carry it (a token whose ids are all 0 is padding; the mask is
    `char_ids[:, :, 0] > 0`), and `BiLM` and `ElmoEmbedding` read it from there.

    `ElmoEmbedding(input_type="sentences")` does the same work inside the layer: this
    preprocessor followed by `ElmoEmbedding(input_type="char_ids")` gives the same vectors.

    Args:
        input_type: str. `"sentences"` (a string tensor `[batch]` of untokenized sentences) or
            `"tokens"` (a string tensor `[batch, tokens]` right-padded with `""`). Defaults to
            `"sentences"`.
        tokenization_mode: str. How sentences are split: `"punctuation"` or `"whitespace"`.
            Defaults to `"punctuation"`.
        max_characters_per_token: int. Character ids per token, as the biLM's options say.
            Defaults to `50`.
        **kwargs: other keyword arguments of `keras.layers.Layer`.

    Call arguments:
        inputs: strings: a `tf.Tensor`, a NumPy array or a (nested) Python list.

    Returns:
        An int32 tensor `[batch, tokens, max_characters_per_token]`, right-padded with zeros.

    Example:
    >>> preprocessor = ElmoPreprocessor()
    >>> tuple(preprocessor(["The bank closed.", "Hi"]).shape)
    (2, 4, 50)
    """

    def __init__(
        self,
        input_type="sentences",
        tokenization_mode=DEFAULT_TOKENIZATION_MODE,
        max_characters_per_token=MAX_CHARACTERS_PER_TOKEN,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.input_type = check_choice("input_type", input_type, PREPROCESSOR_INPUT_TYPES)
        self.tokenization_mode = check_choice(
            "tokenization_mode", tokenization_mode, TOKENIZATION_MODES
        )
        self.max_characters_per_token = check_int(
            "max_characters_per_token", max_characters_per_token, minimum=3
        )
        # Strings stay as given: Keras would refuse a NumPy string array (keras-hub does this).
        self._convert_input_args = False
        self._allow_non_tensor_positional_args = True

    def call(self, inputs):
        width = self.max_characters_per_token
        if keras.config.backend() == "tensorflow" or _is_tf_tensor(inputs):
            return strings_to_char_ids(
                inputs, self.input_type, self.tokenization_mode, width, "ElmoPreprocessor"
            )
        # Another backend has no string tensors: the same ids from Python and NumPy.
        return strings_to_char_ids_numpy(inputs, self.input_type, self.tokenization_mode, width)

    def compute_output_spec(self, inputs):
        steps = None if self.input_type == "sentences" else inputs.shape[1]
        return keras.KerasTensor((inputs.shape[0], steps, self.max_characters_per_token), "int32")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "input_type": self.input_type,
                "tokenization_mode": self.tokenization_mode,
                "max_characters_per_token": self.max_characters_per_token,
            }
        )
        return config

    presets = preset_folder.presets_property()  # {name: description}, as keras-hub's classes

    @classmethod
    def from_preset(cls, preset, cache_dir=None, progress=True, **kwargs):
        """The preprocessor for a preset: its saved one, else one that matches its biLM.

        A folder's `preprocessor.json` (written by `save_to_preset`) gives that preprocessor;
        otherwise `max_characters_per_token` comes from the biLM's options (for a published
        preset only `options.json` is downloaded) and, from a saved `ElmoEmbedding` folder
        that takes strings, `input_type` and `tokenization_mode`. `kwargs` override them.

        Example:
        >>> ElmoPreprocessor.from_preset("tiny").max_characters_per_token
        50
        """
        saved = preset_folder.read_json(
            preset, preset_folder.PREPROCESSOR_FILE, ("elmo_keras>ElmoPreprocessor",)
        )
        if saved is not None:
            return cls.from_config({**saved["config"], **kwargs})
        embedding = preset_folder.read_config(preset) or {"config": {}}
        found = {
            key: embedding["config"][key]
            for key in ("input_type", "tokenization_mode")
            if embedding["config"].get(key) in PREPROCESSOR_INPUT_TYPES + TOKENIZATION_MODES
        }
        if preset_folder.is_preset_name(preset):
            options = cached_path(preset_sources(preset)[0], cache_dir=cache_dir, progress=progress)
        else:
            options = resolve_preset(preset)[0]  # a model folder (else: the known names)
        width = options_to_bilm_kwargs(read_options(options))["max_characters_per_token"]
        return cls(**{"max_characters_per_token": width, **found, **kwargs})

    def save_to_preset(self, folder):
        """Writes `preprocessor.json` into a preset folder (made if missing), atomically, for
        `ElmoPreprocessor.from_preset(folder)`; keras-hub saves a preprocessor the same way,
        beside the backbone's files. Returns the file's path."""
        path = pathlib.Path(folder) / preset_folder.PREPROCESSOR_FILE
        config = keras.saving.serialize_keras_object(self)
        write_text(path, json.dumps(config, indent=2) + "\n")
        return path


def _is_tf_tensor(inputs):
    """A TensorFlow tensor, whatever the backend (TensorFlow is imported already then)."""
    import sys  # noqa: PLC0415

    tf = sys.modules.get("tensorflow")
    return tf is not None and isinstance(inputs, tf.Tensor | tf.RaggedTensor)
