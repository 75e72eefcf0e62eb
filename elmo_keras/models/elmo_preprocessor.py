import json
import pathlib

import keras

from elmo_keras import efml
from elmo_keras.file_io.download import cached_path
from elmo_keras.file_io.files import write_text
from elmo_keras.models import preset_folder
from elmo_keras.models.elmo_inputs import strings_to_char_ids, strings_to_char_ids_numpy
from elmo_keras.options import options_to_bilm_kwargs, read_options
from elmo_keras.presets import efml_preset, preset_sources, resolve_efml_preset, resolve_preset
from elmo_keras.text.char_ids import MAX_CHARACTERS_PER_TOKEN
from elmo_keras.text.token_dictionary import TokenDictionary
from elmo_keras.text.tokenization import DEFAULT_TOKENIZATION_MODE, TOKENIZATION_MODES
from elmo_keras.validation import check_choice, check_int

PREPROCESSOR_INPUT_TYPES = ("sentences", "tokens")


@keras.saving.register_keras_serializable(package="elmo_keras")
class ElmoPreprocessor(keras.layers.Layer):
    """Strings -> the character ids that `BiLM` and `ElmoEmbedding(input_type="char_ids")` take.

    keras-hub splits a model into a preprocessor (strings -> model inputs, run in the input
    pipeline) and a backbone that only computes. This is ELMo's preprocessor: it tokenizes
    sentences (`elmo_keras.text.tf_tokenization.tokenize`) and turns each token into
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
        char_vocabulary, word_vocabulary: lists of str or `None`. A biLM's own dictionaries
            (ELMoForManyLangs' models, as `BiLM` takes them): ids through them
            (`elmo_keras.text.token_dictionary`), one more id per token with words. Defaults
            to `None` (bytes).
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
        char_vocabulary=None,
        word_vocabulary=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.char_vocabulary, self.word_vocabulary = char_vocabulary, word_vocabulary
        self.dictionary = None
        if char_vocabulary is not None:
            self.dictionary = TokenDictionary(
                char_vocabulary, word_vocabulary, max_characters_per_token
            )
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
        width, dictionary = self.max_characters_per_token, self.dictionary
        if keras.config.backend() == "tensorflow" or _is_tf_tensor(inputs):
            return strings_to_char_ids(
                inputs, self.input_type, self.tokenization_mode, width, "ElmoPreprocessor",
                dictionary,
            )  # fmt: skip
        # Another backend has no string tensors: the same ids from Python and NumPy.
        return strings_to_char_ids_numpy(
            inputs, self.input_type, self.tokenization_mode, width, dictionary
        )

    def compute_output_spec(self, inputs):
        steps = None if self.input_type == "sentences" else inputs.shape[1]
        width = self.max_characters_per_token if self.dictionary is None else self.dictionary.width
        return keras.KerasTensor((inputs.shape[0], steps, width), "int32")

    def get_config(self):
        config = super().get_config()
        config.update(
            {
                "input_type": self.input_type,
                "tokenization_mode": self.tokenization_mode,
                "max_characters_per_token": self.max_characters_per_token,
                "char_vocabulary": self.char_vocabulary,
                "word_vocabulary": self.word_vocabulary,
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
        that takes strings, `input_type` and `tokenization_mode`. A model with its own
        dictionaries (an ELMoForManyLangs folder or language, or its converted preset) gives
        them too. `kwargs` override them.

        Example:
        >>> ElmoPreprocessor.from_preset("tiny").max_characters_per_token
        50
        """
        saved = preset_folder.read_json(
            preset, preset_folder.PREPROCESSOR_FILE, ("elmo_keras>ElmoPreprocessor",)
        )
        if saved is not None:
            return cls.from_config({**saved["config"], **kwargs})
        entry = efml_preset(preset)
        if entry or efml.is_efml_folder(preset):  # an EFML model: its own dictionaries
            if entry:
                preset = resolve_efml_preset(preset, cache_dir=cache_dir, progress=progress)
            network = entry["network"] if entry else None
            return cls(**{**efml.text_settings(preset, network), **kwargs})
        embedding = preset_folder.read_config(preset) or {"config": {}}
        found = {
            key: embedding["config"][key]
            for key in ("input_type", "tokenization_mode")
            if embedding["config"].get(key) in PREPROCESSOR_INPUT_TYPES + TOKENIZATION_MODES
        }
        bilm_config = embedding["config"].get("bilm", embedding)["config"]  # the saved biLM's
        if bilm_config.get("char_vocabulary") is not None:  # a converted EFML model
            names = ("max_characters_per_token", "char_vocabulary", "word_vocabulary")
            return cls(**{**{k: bilm_config[k] for k in names}, **found, **kwargs})
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
