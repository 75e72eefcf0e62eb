"""`elmo-keras beam-embed`: every biLM layer for each line of many files, on Apache Beam."""

import contextlib
import os
import re
import uuid

from elmo_keras.cli import CommandError
from elmo_keras.cli._common import add_tokenization_argument, check_input_file

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
        "(row-major). Any other flag is a Beam pipeline option, passed on to Beam in either "
        "form, --name=value or --name value, e.g. --direct_num_workers=2 "
        "--direct_running_mode multi_processing (a `--` before them also works).",
    )
    parser.add_argument(
        "--model",
        required=True,
        help="an .onnx file from `elmo-keras export` (of a preset: `elmo-keras export --preset "
        "NAME --format onnx`)",
    )
    parser.add_argument("--input", required=True, help="a glob of text files (local, gs://, ...)")
    parser.add_argument("--output", required=True, help="the path prefix of the TFRecord shards")
    parser.add_argument(
        "--runner", default="DirectRunner", help="the Beam runner (default: DirectRunner)"
    )
    parser.add_argument(
        "--batch-size", type=int, default=64, help="most lines per model call (default: 64)"
    )
    parser.add_argument(
        "--max-batch-tokens",
        type=int,
        default=4096,
        help="most padded token positions per model call (default: 4096)",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="ONNX Runtime threads per worker (default: all)"
    )
    parser.add_argument(
        "--num-shards", type=int, default=0, help="output shards (default 0: the runner decides)"
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace existing PREFIX-SSSSS-of-NNNNN shards (removed once the new ones are "
        "written; other files are kept)",
    )
    add_tokenization_argument(parser, "each line is split into tokens")
    # Beam's options are the flags the parser does not know, in their order (`main` keeps
    # them): a positional argument here would take the value of `--name value` away.
    parser.set_defaults(_takes_unknown_args=True)
    return parser


def _check_arguments(args):
    from elmo_keras.presets import PRESETS

    if args.model.lower() in PRESETS and not os.path.exists(args.model):
        raise CommandError(
            f"--model {args.model}: beam-embed's workers run an ONNX model (ONNX Runtime, no "
            f"Keras); export the preset once with `elmo-keras export --preset {args.model} "
            "--format onnx --output DIR`, then give --model DIR/model.onnx"
        )
    if args.input == "-":
        raise CommandError(
            "--input -: beam-embed reads files by a glob (its workers cannot read this "
            "standard input); write the lines to a file, or use `elmo-keras embed --input -`"
        )
    for flag, value, minimum in (
        ("--batch-size", args.batch_size, 1),
        ("--max-batch-tokens", args.max_batch_tokens, 1),
        ("--num-shards", args.num_shards, 0),
        ("--threads", args.threads if args.threads is not None else 1, 1),
    ):
        if value < minimum:
            raise CommandError(f"{flag} must be an integer >= {minimum}. Received: {value}")
    options = [option for option in getattr(args, "unknown_args", []) if option != "--"]
    # A word is the value of the flag before it (`--name value`), unless that flag has its own.
    stray = [
        option
        for before, option in zip(["", *options], options, strict=False)
        if not option.startswith("-") and not (before.startswith("--") and "=" not in before)
    ]
    if stray:
        raise CommandError(
            "Beam pipeline options are --name=value or --name value flags. Received: "
            + " ".join(stray)
        )
    return options


def _local(path):
    """A local path made absolute (the records name their source by it); a URL as it is."""
    return path if "://" in path else os.path.abspath(path)


def _check_files(args, file_systems):
    if not file_systems.exists(args.model):
        raise CommandError(f"--model not found: {args.model}")
    if "://" not in args.model:
        check_input_file("--model", args.model)  # a FIFO or a device: one line, never opened
    if not file_systems.match([args.input])[0].metadata_list:
        raise CommandError(f"--input matched no files: {args.input}")
    existing = own_shards(file_systems, args.output)
    if existing and not args.overwrite:
        raise CommandError(
            f"{len(existing)} output shard(s) {args.output}-SSSSS-of-NNNNN exist (pass "
            "--overwrite to replace them)"
        )


def own_shards(file_systems, prefix):
    """The shards of `prefix` that exist, by Beam's names (`PREFIX-SSSSS-of-NNNNN`, five or
    more digits each): never another file that merely starts with `PREFIX-`."""
    found = file_systems.match([f"{prefix}-*-of-*"])[0].metadata_list
    return sorted(m.path for m in found if _SHARD.fullmatch(m.path[len(prefix) :]))


_SHARD = re.compile(r"-[0-9]{5,}-of-[0-9]{5,}")


def _staging_prefix(args, held):
    """Where the pipeline writes: a new folder beside the output (a local one is locked,
    removed at the end, by SIGTERM, or by the next run after a SIGKILL)."""
    from elmo_keras.file_io.files import remove_stale, temporary_output
    from elmo_keras.file_io.output_access import output_lock

    name = os.path.basename(args.output)
    if "://" in args.output:  # no lock, no signal clean-up on a remote file system
        return f"{os.path.dirname(args.output)}/.{name}.partial-{uuid.uuid4().hex}/{name}"
    held.enter_context(output_lock(args.output))  # a second run ends with one line, exit 1
    remove_stale(args.output)
    return os.path.join(held.enter_context(temporary_output(args.output, is_folder=True)), name)


def _replace_shards(file_systems, staging, output, old):
    """Renames the new shards into place, then deletes the old ones no new shard replaced."""
    from elmo_keras.file_io.files import deferred_signals

    new = own_shards(file_systems, staging)
    targets = [output + path[len(staging) :] for path in new]
    with deferred_signals():
        file_systems.rename(new, targets)
        stale = sorted(set(old) - set(targets))
        if stale:
            file_systems.delete(stale)


def _counter(result, name):
    from apache_beam.metrics.metric import MetricsFilter

    try:
        counters = result.metrics().query(MetricsFilter().with_name(name))["counters"]
    except (AttributeError, NotImplementedError):  # a runner without metrics
        return None
    return sum(c.committed or c.attempted or 0 for c in counters)


def _last_line(error):
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[-1] if lines else type(error).__name__


def _delete_all(file_systems, folder):
    found = file_systems.match([f"{folder}/**"])[0].metadata_list
    if found:
        file_systems.delete([m.path for m in found])


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
    with contextlib.ExitStack() as held:
        if "://" not in args.output:  # a missing folder is made (removed again on a failure)
            from elmo_keras.file_io.files import check_writable, parent_folders

            check_writable(args.output)
            held.enter_context(parent_folders(args.output))
        staging = _staging_prefix(args, held)
        old = own_shards(FileSystems, args.output)
        if old and not args.overwrite:  # written meanwhile by another run
            raise FileExistsError(f"output shards {args.output}-SSSSS-of-NNNNN exist")
        if "://" in args.output:
            held.callback(_delete_all, FileSystems, os.path.dirname(staging))
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
            | "WriteEmbeddings" >> WriteEmbeddings(staging, args.num_shards)
        )
        try:
            result = pipeline.run()
            result.wait_until_finish()
        except Exception as error:  # a worker's failure: one line, the old shards kept
            raise OSError(
                f"the pipeline failed; {args.output}-*-of-* is left as it was: {_last_line(error)}"
            ) from None
        _replace_shards(FileSystems, staging, args.output, old)
    lines, tokens = _counter(result, "lines"), _counter(result, "tokens")
    counts = f"{lines} lines ({tokens} tokens)" if lines is not None else "the embeddings"
    print(f"wrote {counts} to {args.output}-*-of-*")
    return 0
