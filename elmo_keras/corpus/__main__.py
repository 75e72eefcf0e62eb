"""`python -m elmo_keras.corpus build --output DIR`: builds the pretraining corpus into DIR.

Exit status 0 on success, 1 when a download, a sha256 check or the output fails (one line on
stderr), 2 for a usage error.
"""

import argparse
import sys

from elmo_keras.corpus import ORDERS, build_corpus


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="python -m elmo_keras.corpus",
        description="Build the pretraining corpus (train.txt, valid.txt, sources.json).",
    )
    commands = parser.add_subparsers(dest="command", required=True)
    build = commands.add_parser("build", help="fetch, clean, dedupe and filter the sources")
    build.add_argument("--output", required=True, help="the folder to create")
    build.add_argument("--cache-dir", default=None, help="where archives are downloaded")
    build.add_argument("--overwrite", action="store_true", help="replace an existing output")
    build.add_argument(
        "--order",
        choices=tuple(ORDERS),
        default="mixed",
        help="train.txt's line order: mixed (default; every stretch mixes the sources) or "
        "sources (one source after another, the build mini_en v2 was trained on)",
    )
    args = parser.parse_args(argv)
    try:
        report = build_corpus(
            args.output,
            cache_dir=args.cache_dir,
            overwrite=args.overwrite,
            log=print,
            order=args.order,
        )
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    total = report["total"]
    print(
        f"wrote {args.output}: train {total.get('train_lines', 0):,} lines, "
        f"{total.get('train_tokens', 0):,} tokens; valid {total.get('valid_tokens', 0):,} tokens"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
