"""`elmo-keras embed`: every layer of the biLM for each sentence of a file, into hdf5."""

import pathlib

from elmo_keras.cli import CommandError


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "embed",
        help="write every biLM layer for each line of a text file to hdf5 (like bilm-tf's "
        "dump_bilm_embeddings)",
        description="Reads one whitespace-tokenized sentence per line and writes one float32 "
        "dataset per line, named by its 0-based line number, of shape "
        "(n_layers + 1, n_tokens, 2 * projection_dim). Every sentence starts from zero state; "
        "the output does not depend on --batch-size.",
    )
    parser.add_argument("--options", help="bilm-tf options.json (Keras backend)")
    parser.add_argument("--weights", help="bilm-tf hdf5 weights (Keras backend)")
    parser.add_argument(
        "--model", help="a training output folder (Keras backend) or an .onnx file (ONNX backend)"
    )
    parser.add_argument("--input", required=True, help="text file, one sentence per line")
    parser.add_argument("--output", required=True, help="hdf5 file to write")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--backend", choices=["keras", "onnx"], default="keras")
    parser.add_argument("--overwrite", action="store_true", help="replace an existing output")
    return parser


def resolve_model_files(args):
    """(options, weights) paths from --options/--weights or a training output --model folder."""
    if args.model:
        folder = pathlib.Path(args.model)
        if not folder.is_dir():
            raise CommandError(
                f"--model must be a folder with options.json and weights for "
                f"the keras backend. Received: {folder}"
            )
        options = folder / "options.json"
        candidates = sorted(folder.glob("*.hdf5"))
        if not options.is_file() or not candidates:
            raise CommandError(
                f"--model folder {folder} needs options.json and an .hdf5 weight file"
            )
        return options, candidates[0]
    if not (args.options and args.weights):
        raise CommandError("the keras backend needs --options and --weights (or --model DIR)")
    return pathlib.Path(args.options), pathlib.Path(args.weights)


def make_embedder(args):
    if args.backend == "onnx":
        if not args.model:
            raise CommandError("--backend onnx needs --model M.onnx")
        from elmo_keras.runtime import OnnxEmbedder

        return OnnxEmbedder(args.model, batch_size=args.batch_size)
    from elmo_keras.cli import import_tensorflow

    import_tensorflow()
    from elmo_keras.models.bilm_embedder import BiLMEmbedder
    from elmo_keras.weights import load_bilm

    options, weights = resolve_model_files(args)
    return BiLMEmbedder(load_bilm(options, weights), batch_size=args.batch_size)


def run(args):
    from elmo_keras.cli._common import Progress, read_sentences
    from elmo_keras.files import atomic_file, check_output

    if args.batch_size < 1:
        raise CommandError(f"--batch-size must be a positive integer. Received: {args.batch_size}")
    sentences = read_sentences(args.input)
    output = pathlib.Path(args.output)
    if output.exists() and not args.overwrite:
        raise CommandError(f"output exists: {output} (pass --overwrite to replace it)")
    check_output(output, overwrite=True, kind="file")  # a device or a folder is never replaced
    if not output.parent.is_dir():  # found before the work, not after it
        raise CommandError(f"output folder does not exist: {output.parent}")
    embedder = make_embedder(args)
    vectors = embedder.embed(sentences, progress=Progress(len(sentences)))
    import h5py

    with atomic_file(output, overwrite=args.overwrite, make_parents=False) as tmp:
        with h5py.File(tmp, "w") as handle:
            for i, array in enumerate(vectors):
                handle.create_dataset(str(i), data=array)
    tokens = sum(len(s) for s in sentences)
    print(f"wrote {len(sentences)} sentences ({tokens} tokens) to {output}")
    return 0
