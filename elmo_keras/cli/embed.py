"""`elmo-keras embed`: every layer of the biLM for each sentence of a file, into hdf5."""

import contextlib
import itertools
import pathlib

from elmo_keras.cli import CommandError
from elmo_keras.cli._common import (
    add_tokenization_argument,
    check_input_file,
    select_keras_backend,
)


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "embed",
        help="write every biLM layer for each line of a text file to hdf5 (like bilm-tf's "
        "dump_bilm_embeddings)",
        description="Reads one sentence per line (split as --tokenization-mode says) and "
        "writes one float32 "
        "dataset per line, named by its 0-based line number, of shape "
        "(n_layers + 1, n_tokens, 2 * projection_dim) (--layers all; top or average: "
        "(n_tokens, 2 * projection_dim)). Every sentence starts from zero state; "
        "the output does not depend on --batch-size or --max-tokens. The input is read and "
        "the output written as a stream: memory does not grow with their length (a line "
        "holds at most 16 MiB).",
    )
    parser.add_argument("--options", help="bilm-tf options.json, a path or URL (Keras backend)")
    parser.add_argument("--weights", help="bilm-tf hdf5 weights, a path or URL (Keras backend)")
    parser.add_argument(
        "--model",
        help="a preset name (see `elmo-keras presets`), a training output folder, a "
        "save_to_preset folder or an ELMoForManyLangs model folder (Keras backend), or an .onnx "
        "file (ONNX backend; a path ending in .onnx selects it without --backend onnx)",
    )
    parser.add_argument(
        "--preset",
        metavar="NAME",
        help="a named biLM (Keras backend): small, medium, original, original_5.5b (downloaded "
        "once into the cache), mini_en and tiny (packaged), or a model folder; see "
        "`elmo-keras presets`",
    )
    parser.add_argument(
        "--input",
        required=True,
        help="text file, one sentence per line; - reads standard input. A file is read "
        "twice (sizes first: progress and free space are known before the work); standard "
        "input or a pipe once, as it comes (no progress bar, no free-space check first)",
    )
    parser.add_argument("--output", required=True, help="hdf5 file to write")
    parser.add_argument(
        "--batch-size", type=int, default=64, help="most sentences per batch (default: 64)"
    )
    parser.add_argument(
        "--max-tokens",
        type=int,
        default=4096,
        metavar="N",
        help="most padded tokens per batch (sentences x the longest); a longer sentence is a "
        "batch of its own (default: 4096)",
    )
    parser.add_argument(
        "--backend",
        choices=["keras", "tensorflow", "jax", "torch", "onnx"],
        default="keras",
        help="keras: Keras on its configured backend (KERAS_BACKEND, else TensorFlow); "
        "tensorflow, jax or torch: Keras on that backend (the same vectors within 1e-5; what "
        "runs where: `python -m pydoc elmo_keras.backend`); onnx: ONNX Runtime on an exported "
        "--model M.onnx "
        "(default: keras)",
    )
    parser.add_argument(
        "--layers",
        choices=LAYER_CHOICES,
        default="all",
        help="what each dataset holds, as AllenNLP's `elmo --all/--top/--average`: every layer "
        "(n_layers + 1, n_tokens, 2 * projection_dim), the top layer, or the mean of the layers "
        "(n_tokens, 2 * projection_dim) (default: all)",
    )
    parser.add_argument(
        "--sentence-index",
        action="store_true",
        help="also write AllenNLP's `sentence_to_index` dataset: one JSON string mapping each "
        "sentence (its tokens joined by one space) to its dataset name (a repeated sentence "
        "maps to its last line); off by default, so that every dataset name is a line number",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output")
    add_tokenization_argument(parser, "each line is split into tokens")
    return parser


LAYER_CHOICES = ("all", "top", "average")


def select_layers(pairs, layers):
    """`(name, array)` pairs of every layer -> what `--layers` keeps: all of it, the top layer,
    or the float32 mean over the layers (AllenNLP's `numpy.average(embeddings, axis=0)`)."""
    for name, array in pairs:
        if layers == "top":
            array = array[-1]
        elif layers == "average":
            array = array.mean(axis=0, dtype="float32")
        yield name, array


class SentenceIndex:
    """Records `sentence text -> line number` while the sentences stream past, for AllenNLP's
    `sentence_to_index` dataset (`dataset()` once every sentence has been read)."""

    def __init__(self):
        self.index = {}

    def recorded(self, sentences):
        for i, sentence in enumerate(sentences):
            self.index[" ".join(sentence)] = str(i)
            yield sentence

    def dataset(self):
        import json

        import h5py
        import numpy as np

        return "sentence_to_index", np.array([json.dumps(self.index)], h5py.string_dtype())


def resolve_model(args):
    """The biLM that --preset, --model or --options/--weights name, any download done (before
    Keras loads): the preset name or folder as given (a published, packaged or
    ELMoForManyLangs name, a model folder, a `save_to_preset` folder, an ELMoForManyLangs
    folder), else the local `(options, weights)` paths (URLs downloaded once into the cache).
    `load_model` loads it, a folder's own config (an ELMoForManyLangs model's dictionaries)
    with it. What every command that reads a biLM runs (`embed`, `dump-token-embeddings`,
    `export`)."""
    from elmo_keras.efml import is_efml_folder
    from elmo_keras.file_io.download import cached_path
    from elmo_keras.presets import PRESETS, efml_preset, resolve_efml_preset, resolve_preset

    sources = [args.preset, args.model, args.options or args.weights]
    if sum(bool(source) for source in sources) > 1:
        raise CommandError("give one of --preset NAME, --model DIR, or --options and --weights")
    is_name = str(args.model or "").lower() in PRESETS  # `--model mini_en` is `--preset mini_en`
    if args.model and not (is_name or pathlib.Path(args.model).is_dir()):
        raise CommandError(
            f"--model must be a preset name (see `elmo-keras presets`) or a folder with "
            f"options.json and weights for the keras backend. Received: {args.model}"
        )
    if not (args.preset or args.model or (args.options and args.weights)):
        raise CommandError(
            "the keras backend needs --options and --weights (or --model DIR or --preset NAME)"
        )
    check_input_file("--options", args.options)
    check_input_file("--weights", args.weights)
    given = args.preset or args.model
    try:
        if given and efml_preset(given):  # an ELMoForManyLangs language: downloaded once
            resolve_efml_preset(given)
        elif given and not is_efml_folder(given):  # a name, or a folder (`find_model_files`)
            resolve_preset(given)
        return given or (cached_path(args.options), cached_path(args.weights))
    except ValueError as error:
        flag = "--preset" if args.preset else "--model" if args.model else "--options/--weights"
        onnx = pathlib.Path(args.model or "", "model.onnx")
        hint = f" (for its ONNX model: --model {onnx})" if args.model and onnx.is_file() else ""
        raise CommandError(f"{flag}: {error}{hint}") from None


def load_model(source):
    """The `BiLM` of a `resolve_model` result (Keras loaded on the chosen backend by then)."""
    from elmo_keras.models import BiLM

    if isinstance(source, tuple):
        return BiLM.from_bilm_tf(*source)
    return BiLM.from_preset(source)


def make_embedder(args):
    if args.backend == "keras" and str(args.model or "").lower().endswith(".onnx"):
        args.backend = "onnx"  # an .onnx file names its runtime
    if args.backend == "onnx":
        if not args.model:
            raise CommandError("--backend onnx needs --model M.onnx")
        from elmo_keras.runtime import OnnxEmbedder

        model = pathlib.Path(args.model)
        if model.exists() and not model.is_dir():
            check_input_file("--model", model)  # a FIFO or a device: one line, never opened
        named_a_file = model.is_file()
        try:
            return OnnxEmbedder(args.model, batch_size=args.batch_size, max_tokens=args.max_tokens)
        except (FileNotFoundError, ValueError) as error:
            if named_a_file:  # a file ONNX Runtime cannot read: a failure (exit code 1)
                raise
            from elmo_keras.presets import PRESETS

            hint = ""
            if args.model.lower() in PRESETS:
                hint = (
                    f" (the preset {args.model} runs without --backend onnx; its ONNX model: "
                    f"`elmo-keras export --preset {args.model} --format onnx`)"
                )
            raise CommandError(f"--model: {error}{hint}") from None  # missing, or a folder
    source = resolve_model(args)  # any download before Keras loads
    select_keras_backend(args.backend)
    from elmo_keras.backend import keras_backend
    from elmo_keras.models.bilm_embedder import BiLMEmbedder

    if keras_backend() == "jax":  # before the model loads: its small programs are kept too
        from elmo_keras import compilation_cache

        compilation_cache.enable()

    bilm = load_model(source)
    return BiLMEmbedder(bilm, batch_size=args.batch_size, max_tokens=args.max_tokens)


def check_output_location(args, held):
    """The output's problems, found before any work: an existing output without --overwrite,
    a device or folder in its place, an unwritable folder. A missing folder is made (removed
    again if the command fails: `files.parent_folders`). Then the output's lock is taken for
    the rest of the run (`held`, an `ExitStack`): a second run writing the same output, with
    or without --overwrite, ends with one line. Returns the path."""
    from elmo_keras.file_io.files import check_output, check_writable, parent_folders, remove_stale
    from elmo_keras.file_io.output_access import output_lock

    output = pathlib.Path(args.output)
    if output.exists() and not args.overwrite:
        raise CommandError(f"output exists: {output} (pass --overwrite to replace it)")
    check_output(output, overwrite=True, kind="file")  # a device or a folder is never replaced
    check_writable(output)
    held.enter_context(parent_folders(output))
    held.enter_context(output_lock(output))
    if not args.overwrite and (output.exists() or output.is_symlink()):
        raise FileExistsError(f"output exists: {output} (another run has just written it)")
    remove_stale(output)  # what killed runs left, before the free space is counted
    return output


def check_free_space(output, tokens, embedder, layers="all"):
    """Refuses, before the work, an output that cannot fit: its float32 data alone (the hdf5
    file is a little larger) for `tokens` tokens must fit in the free space of its folder."""
    import shutil

    kept = embedder.n_layers + 1 if layers == "all" else 1
    needed = 4 * kept * embedder.output_dim * tokens
    free = shutil.disk_usage(output.parent).free
    if needed > free:
        raise OSError(
            f"not enough free space for {output}: the embeddings need {_size(needed)}, "
            f"{_size(free)} are free"
        )


def _size(n_bytes):
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n_bytes >= scale:
            return f"{n_bytes / scale:.1f} {unit}"
    return f"{n_bytes} bytes"


def finite_datasets(pairs, output):
    """`(name, array)` pairs for the hdf5 file from `(line index, array)` pairs; a NaN or
    infinity (a damaged weight file whose numbers are finite but wrong can cause one) stops
    the writing with one line."""
    import numpy as np

    for i, array in pairs:
        if not np.isfinite(array).all():
            raise ValueError(
                f"the model gave NaN or infinite values for line {i + 1} (are the weights "
                f"damaged?); nothing was written to {output}"
            )
        yield str(i), array


def check_arguments(args):
    for flag, value in (("--batch-size", args.batch_size), ("--max-tokens", args.max_tokens)):
        if value < 1:
            raise CommandError(f"{flag} must be a positive integer. Received: {value}")


class _Counted:
    """Passes sentences through, counting the lines and tokens (of a stream, read once)."""

    def __init__(self, sentences):
        self.sentences = sentences
        self.lines = self.tokens = 0

    def __iter__(self):
        for sentence in self.sentences:
            self.lines += 1
            self.tokens += len(sentence)
            yield sentence


def run(args):
    from elmo_keras.cli._common import Progress, input_sentences, input_source
    from elmo_keras.file_io.hdf5_writer import write_datasets

    check_arguments(args)
    input_source(args.input)  # missing, a folder or a device: one line, nothing read
    with contextlib.ExitStack() as held:
        output = check_output_location(args, held)  # before any input is read
        # The sizes, without the model (a file's first pass; a stream has none).
        lines, tokens, sentences = input_sentences(args.input, args.tokenization_mode)
        embedder = make_embedder(args)
        if tokens is not None:
            check_free_space(output, tokens, embedder, args.layers)
        counted = _Counted(sentences)
        index = SentenceIndex() if args.sentence_index else None
        sentences = index.recorded(counted) if index else counted
        # A second pass streams: one chunk of sentences and one batch of arrays in memory at a
        # time, each batch written as it finishes (in length order; datasets named by line).
        pairs = embedder.iter_embed(sentences, progress=Progress(lines or 0))
        datasets = select_layers(finite_datasets(pairs, output), args.layers)
        if index:  # after the last sentence's dataset: by then every sentence has been read
            datasets = itertools.chain(datasets, (index.dataset() for _ in range(1)))
        try:
            write_datasets(output, datasets, overwrite=args.overwrite)
        except RuntimeError as error:  # an hdf5 failure that is not an OSError: one line too
            reason = " ".join(str(error).split())
            raise OSError(f"could not write {output}: {reason}; nothing was written") from None
    print(f"wrote {counted.lines} sentences ({counted.tokens} tokens) to {output}")
    return 0
