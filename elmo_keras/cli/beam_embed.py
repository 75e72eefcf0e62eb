"""`elmo-keras beam-embed`: every biLM layer for each line of many files, on Apache Beam."""

import os

from elmo_keras.cli import CommandError
from elmo_keras.cli._common import add_tokenization_argument

INSTALL_HINT = 'apache-beam is not installed: pip install "elmo-keras[beam]"'


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "beam-embed",
        help="embed the lines of many text files with an ONNX model on Apache Beam, into "
        "TFRecord shards",
        description="Reads every file the --input glob matches (one sentence per line, "
        "numbered and split as `elmo-keras embed` numbers and splits them) and writes one "
        "tf.train.Example per line to TFRecord shards PREFIX-SSSSS-of-NNNNN: source, line "
        "(0-based), tokens, shape [n_layers + 1, n_tokens, 2 * projection_dim] and embeddings "
        "(row-major). Any other --name=value flag is a Beam pipeline option, e.g. "
        "--direct_num_workers=2 --direct_running_mode=multi_processing (a `--` before them "
        "also works). See docs/beam.md.",
    )
    parser.add_argument("--model", required=True, help="an .onnx file from `elmo-keras export`")
    parser.add_argument("--input", required=True, help="a glob of text files (local, gs://, ...)")
    parser.add_argument("--output", required=True, help="the path prefix of the TFRecord shards")
    parser.add_argument("--runner", default="DirectRunner", help="the Beam runner")
    parser.add_argument("--batch-size", type=int, default=64, help="lines per model call")
    parser.add_argument(
        "--max-batch-tokens", type=int, default=4096, help="padded tokens per model call"
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="ONNX Runtime threads per worker (default: all)"
    )
    parser.add_argument(
        "--num-shards", type=int, default=0, help="output shards (default 0: the runner decides)"
    )
    parser.add_argument(
        "--overwrite", action="store_true", help="delete existing PREFIX-*-of-* shards first"
    )
    add_tokenization_argument(parser, "each line is split into tokens")
    parser.add_argument(
        "pipeline_args",
        nargs="*",
        metavar="BEAM_OPTION",
        help="Beam pipeline options (--name=value)",
    )
    parser.set_defaults(_takes_unknown_args=True)
    return parser


def _check_arguments(args):
    for flag, value, minimum in (
        ("--batch-size", args.batch_size, 1),
        ("--max-batch-tokens", args.max_batch_tokens, 1),
        ("--num-shards", args.num_shards, 0),
        ("--threads", args.threads if args.threads is not None else 1, 1),
    ):
        if value < minimum:
            raise CommandError(f"{flag} must be an integer >= {minimum}. Received: {value}")
    options = [*args.pipeline_args, *getattr(args, "unknown_args", [])]
    stray = [option for option in options if not option.startswith("--")]
    if stray:
        raise CommandError(
            f"Beam pipeline options are --name=value flags. Received: {' '.join(stray)}"
        )
    return options


def _local(path):
    """A local path made absolute (the records name their source by it); a URL as it is."""
    return path if "://" in path else os.path.abspath(path)


def _check_files(args, file_systems):
    if not file_systems.exists(args.model):
        raise CommandError(f"--model not found: {args.model}")
    if not file_systems.match([args.input])[0].metadata_list:
        raise CommandError(f"--input matched no files: {args.input}")
    shards = f"{args.output}-*-of-*"
    existing = [m.path for m in file_systems.match([shards])[0].metadata_list]
    if existing and not args.overwrite:
        raise CommandError(
            f"{len(existing)} output shard(s) {shards} exist (pass --overwrite to replace them)"
        )
    if existing:  # stale shards of an earlier run with another shard count would stay
        file_systems.delete(existing)
    parent = os.path.dirname(args.output)
    if "://" not in args.output and parent and not os.path.isdir(parent):
        raise CommandError(f"output folder does not exist: {parent}")


def _counter(result, name):
    from apache_beam.metrics.metric import MetricsFilter

    try:
        counters = result.metrics().query(MetricsFilter().with_name(name))["counters"]
    except (AttributeError, NotImplementedError):  # a runner without metrics
        return None
    return sum(c.committed or c.attempted or 0 for c in counters)


def run(args):
    options = _check_arguments(args)
    try:
        import apache_beam as beam
        from apache_beam.io.filesystems import FileSystems
        from apache_beam.options.pipeline_options import PipelineOptions
    except ImportError:
        raise CommandError(INSTALL_HINT) from None
    from elmo_keras.beam.transforms import EmbedLines, ReadLines, WriteEmbeddings

    args.model, args.input, args.output = map(_local, (args.model, args.input, args.output))
    _check_files(args, FileSystems)
    pipeline = beam.Pipeline(options=PipelineOptions([f"--runner={args.runner}", *options]))
    _ = (
        pipeline
        | "ReadLines" >> ReadLines(args.input)
        | "EmbedLines"
        >> EmbedLines(
            args.model,
            args.batch_size,
            args.max_batch_tokens,
            None,
            args.threads,
            tokenization_mode=args.tokenization_mode,
        )
        | "WriteEmbeddings" >> WriteEmbeddings(args.output, args.num_shards)
    )
    result = pipeline.run()
    result.wait_until_finish()
    lines, tokens = _counter(result, "lines"), _counter(result, "tokens")
    counts = f"{lines} lines ({tokens} tokens)" if lines is not None else "the embeddings"
    print(f"wrote {counts} to {args.output}-*-of-*")
    return 0
