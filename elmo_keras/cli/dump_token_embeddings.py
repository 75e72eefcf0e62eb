"""`elmo-keras dump-token-embeddings`: bilm-tf's `dump_token_embeddings`, a vocabulary file ->
the context-free vector of each token (the char CNN's output) in hdf5."""

import contextlib

from elmo_keras.cli._common import check_input_file, select_keras_backend
from elmo_keras.cli.embed import check_output_location, load_model, resolve_model


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "dump-token-embeddings",
        help="write the context-free vector of every token of a vocabulary file to hdf5 "
        "(like bilm-tf's dump_token_embeddings)",
        description="Reads a vocabulary file (bilm-tf's format: one token per line, with <S> "
        "and </S>) and writes one float32 dataset `embedding` of shape (n_tokens, "
        "projection_dim): row k is the char CNN's output (after the highway and projection "
        "layers) for the token of line k; <S> and </S> get the sentence-boundary vectors (an "
        "ELMoForManyLangs model's <bos>, <eos>; its tokens become ids through its own "
        "dictionaries). "
        "bilm-tf's `BidirectionalLanguageModel(use_character_inputs=False, "
        "embedding_weight_file=...)` reads it, and so does "
        "`ElmoEmbedding.from_token_embeddings` (token ids instead of characters).",
    )
    parser.add_argument("--vocab", required=True, help="vocabulary file, one token per line")
    parser.add_argument("--output", required=True, help="hdf5 file to write")
    parser.add_argument("--options", help="bilm-tf options.json, a path or URL")
    parser.add_argument("--weights", help="bilm-tf hdf5 weights, a path or URL")
    parser.add_argument(
        "--model",
        help="a preset name (see `elmo-keras presets`), a model folder (options.json and "
        "weights), a save_to_preset folder or an ELMoForManyLangs model folder",
    )
    parser.add_argument(
        "--preset",
        metavar="NAME",
        help="a named biLM (an ELMoForManyLangs language: efml_<language>) or a model folder; "
        "see `elmo-keras presets`",
    )
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output")
    return parser


def run(args):
    from elmo_keras.file_io.hdf5_writer import write_datasets
    from elmo_keras.text.vocabulary import Vocabulary

    check_input_file("--vocab", args.vocab)  # missing or a folder: a usage mistake, exit 2
    try:
        vocab = Vocabulary.load(args.vocab)  # a bad file: one line before any model work
    except (UnicodeDecodeError, ValueError) as error:
        raise ValueError(f"--vocab {args.vocab}: {error}") from None
    with contextlib.ExitStack() as held:  # the output's lock, for the rest of the run
        output = check_output_location(args, held)
        source = resolve_model(args)
        select_keras_backend("keras")  # TensorFlow only when Keras will run on it
        from elmo_keras.models.elmo_inputs import cached_word_vectors

        bilm = load_model(source)
        tokens = list(vocab.tokens)
        if bilm.token_dictionary is not None:  # the file's <S>, </S>: the model's boundaries
            tokens = [{"<S>": "<bos>", "</S>": "<eos>"}.get(token, token) for token in tokens]
        vectors = cached_word_vectors(bilm.char_cnn, tokens, bilm)
        write_datasets(output, [("embedding", vectors)], overwrite=args.overwrite)
    print(f"wrote {vectors.shape[0]} token vectors of {vectors.shape[1]} values to {output}")
    return 0
