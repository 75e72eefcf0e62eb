"""`elmo-keras presets`: the named biLMs that `--preset` takes, or one of them fetched."""

from elmo_keras.cli import CommandError

COLUMNS = ("name", "cell", "proj", "layers", "highway", "params", "cached", "trained on")


def add_parser(subparsers):
    parser = subparsers.add_parser(
        "presets",
        help="list the named biLMs that --preset takes (AllenNLP's four published ELMo models, "
        "the packaged mini_en and tiny, and ELMoForManyLangs' 44 languages, efml_<language>)",
        description="Lists the presets: their sizes, what they were trained on, whether they are "
        "in the cache already, and where they come from. With NAME, downloads that preset into "
        "the cache if needed ($ELMO_KERAS_CACHE, else ~/.cache/elmo-keras) and prints the local "
        "options and weights paths. $ELMO_KERAS_MIRROR replaces AllenNLP's base URL.",
    )
    parser.add_argument(
        "name",
        nargs="?",
        help="a preset to fetch (or a model folder to check); prints its two local paths",
    )
    return parser


def _cached(options, weights):
    from elmo_keras.file_io.download import cache_location, is_url

    if not (is_url(options) and is_url(weights)):
        return "local"
    found = all(cache_location(url).is_file() for url in (options, weights))
    return "yes" if found else "no"


def table():
    """The presets as text lines: one row per preset, then where each one's weights come from."""
    from elmo_keras.presets import MIRROR_VARIABLE, PRESETS, base_url, preset_sources

    rows, sources = [COLUMNS], []
    for name, entry in PRESETS.items():
        options, weights = preset_sources(name)
        rows.append(
            (
                name,
                str(entry["lstm_units"]),
                str(entry["projection_dim"]),
                str(entry["n_layers"]),
                str(entry["n_highway"]),
                entry["parameters"],
                _cached(options, weights),
                entry["trained_on"],
            )
        )
        sources.append(f"{name:<14} {weights}")
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS) - 1)]
    lines = [
        "  ".join(
            [*(cell.ljust(width) for cell, width in zip(row[:-1], widths, strict=True)), row[-1]]
        )
        for row in rows
    ]
    return [
        *lines,
        "",
        f"Weight files ({MIRROR_VARIABLE} replaces the base URL {base_url()}; the options "
        "file sits beside each: *_options.json, options.json for tiny):",
        *sources,
    ]


def run(args):
    from elmo_keras.presets import efml_preset, resolve_efml_preset, resolve_preset

    if args.name and efml_preset(args.name):  # ELMoForManyLangs: one folder
        print(resolve_efml_preset(args.name))
        return 0
    if args.name:
        try:
            options, weights = resolve_preset(args.name)
        except ValueError as error:
            raise CommandError(str(error)) from None
        print(options)
        print(weights)
        return 0
    print("\n".join(table()))
    return 0
