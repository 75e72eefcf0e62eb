"""A trained language model on disk: the published biLM files plus its vocabulary and softmax.

A model folder holds `options.json` and `lm_weights.hdf5` (bilm-tf's layout, ready for
`elmo-keras embed`, AllenNLP and bilm-tf), `vocab.txt` (bilm-tf's vocabulary format) and
`softmax.hdf5` (the training head, for `elmo-keras evaluate`). Every file is written
atomically. TensorFlow is imported by the functions that need it, not by this module.
"""

import pathlib

from elmo_keras.file_io.file_switch import finish_switch, folder_lock, settle_folder, switch_files
from elmo_keras.file_io.files import atomic_file, remove_stale, temporary_output
from elmo_keras.options import write_options
from elmo_keras.text.vocabulary import Vocabulary

OPTIONS_FILE = "options.json"
WEIGHTS_FILE = "lm_weights.hdf5"
VOCAB_FILE = "vocab.txt"
SOFTMAX_FILE = "softmax.hdf5"
MODEL_FILES = (OPTIONS_FILE, WEIGHTS_FILE, VOCAB_FILE, SOFTMAX_FILE)


def save_vocabulary(vocabulary, path):
    """`Vocabulary.save`, atomically."""
    with atomic_file(path) as tmp:
        vocabulary.save(tmp)


def save_language_model(model, vocabulary, output_dir):
    """Writes a trained `LanguageModel`: options.json, lm_weights.hdf5, vocab.txt, softmax.hdf5.

    The four files are written in a temporary folder inside `output_dir` first and switched
    into place together once all are complete (`file_switch.switch_files`: signals wait for the
    renames, and a SIGKILL between two of them is finished by the next writer or reader): a
    failure or an interruption leaves the files already there as they were, never a mix of old
    and new. The folder's lock is held meanwhile (`file_switch.folder_lock`); a training
    run's folder is the caller's to lock (`run_folder.lock_run`: the run itself, or
    `pipeline.export_checkpoint`).
    Weights that are NaN or infinite (a diverged run) are refused first
    (`finite.NonFiniteError`): nothing is written.

    Args:
        model: `LanguageModel`. Its biLM and softmax are written (float32 whatever the compute
            dtype).
        vocabulary: `Vocabulary`. The softmax's words.
        output_dir: path. Created if missing.
    """
    import keras

    from elmo_keras.training.common.finite import check_weights
    from elmo_keras.weights import save_softmax, save_weights

    output_dir = pathlib.Path(output_dir)
    check_weights(model, "the model's weights", f"nothing was written to {output_dir}")
    output_dir.mkdir(parents=True, exist_ok=True)
    with folder_lock(output_dir):
        finish_switch(output_dir)  # a killed write's files first
        remove_stale(output_dir / WEIGHTS_FILE)  # a staging folder of a killed write
        with temporary_output(output_dir / WEIGHTS_FILE, is_folder=True) as staging:
            write_options(model.bilm.to_options(), staging / OPTIONS_FILE)
            save_weights(model.bilm, staging / WEIGHTS_FILE)
            save_vocabulary(vocabulary, staging / VOCAB_FILE)
            save_softmax(
                staging / SOFTMAX_FILE,
                keras.ops.convert_to_numpy(model.softmax_kernel),
                keras.ops.convert_to_numpy(model.softmax_bias),
            )
            switch_files(staging, output_dir)


def load_language_model(model_dir):
    """Loads what `save_language_model` wrote: returns `(LanguageModel, Vocabulary)`."""
    from elmo_keras.models import BiLM
    from elmo_keras.models.language_model import LanguageModel
    from elmo_keras.weights import load_softmax

    model_dir = pathlib.Path(model_dir)
    settle_folder(model_dir)  # a write cut short between its renames is finished first
    for name in MODEL_FILES:
        if not (model_dir / name).is_file():
            raise FileNotFoundError(
                f"{model_dir} is not a trained model folder: {name} is missing "
                "(`elmo-keras train` writes options.json, lm_weights.hdf5, vocab.txt, softmax.hdf5)"
            )
    vocabulary = Vocabulary.load(model_dir / VOCAB_FILE)
    bilm = BiLM.from_bilm_tf(model_dir / OPTIONS_FILE, model_dir / WEIGHTS_FILE)
    shape = (len(vocabulary), bilm.projection_dim)
    kernel, bias = load_softmax(
        model_dir / SOFTMAX_FILE, shape=shape, need=f"{VOCAB_FILE} and {OPTIONS_FILE} need"
    )
    model = LanguageModel(bilm, len(vocabulary), 0)
    model.build()
    model.softmax_kernel.assign(kernel)
    model.softmax_bias.assign(bias)
    return model, vocabulary


def export_model(model, vocabulary, output_dir):
    """Deprecated alias of `save_language_model` (its name before 0.4; `elmo_keras.export.
    export_model` is the SavedModel and ONNX export)."""
    import warnings  # noqa: PLC0415

    warnings.warn(
        "elmo_keras.training.export_model was renamed save_language_model",
        DeprecationWarning,
        stacklevel=2,
    )
    return save_language_model(model, vocabulary, output_dir)
