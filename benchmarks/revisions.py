#!/usr/bin/env python
"""One benchmark on two revisions of the package, alternately, in one run: before/after ratios.

    python benchmarks/revisions.py --base d17e74b --rounds 3 --json OUT.json -- \\
        inference.py --config full --modes keras --timing interleaved --memory none

    python benchmarks/revisions.py --base d17e74b --rounds 3 -- training.py --configs tiny small

    python benchmarks/revisions.py --base 2cad059 --rounds 1 -- training_backends.py \
        --configs tiny --backends tensorflow jax --rounds 1

The base revision is checked out with `git worktree` into `--workdir` (reused); the working tree
is "after" (`WORKDIR/shared` links to `../shared`, so both find the same data). Each round runs
the benchmark script once from each tree (the order alternating, so that neither always runs on
a warmer or cooler machine), each in a fresh process that imports its own tree's `elmo_keras`
(its `benchmarks/common.py` puts its checkout first on `sys.path`). The table has, per row of
the benchmark's JSON (`inference.py`: mode and workload, tokens/s; `training.py`: configuration,
softmax and XLA, tokens/s; `training_backends.py`: configuration and backend, tokens/s), the
median over rounds of each revision and their ratio. The CPU and its flags come first: compare
ratios, not figures, across machines.
"""

import argparse
import json
import pathlib
import statistics
import subprocess
import sys

import common

KEYS = {  # the benchmark's JSON rows: what names a row, and its speed
    "inference.py": (("mode", "workload"), "tokens_per_s"),
    "training.py": (("config", "softmax", "xla"), "tokens_per_second"),
    "training_backends.py": (("config", "backend"), "tokens_per_second"),
}


def _worktree(base, workdir):
    tree = workdir / f"base-{base}"
    if not tree.is_dir():
        workdir.mkdir(parents=True, exist_ok=True)
        shared = workdir / "shared"  # the data the benchmarks find at ../shared
        if not shared.exists() and (common.REPO.parent / "shared").is_dir():
            shared.symlink_to(common.REPO.parent / "shared")
        subprocess.run(
            ["git", "-C", str(common.REPO), "worktree", "add", "--detach", str(tree), base],
            check=True,
            capture_output=True,
        )
    return tree


def _run(tree, script, arguments, out):
    command = [sys.executable, str(tree / "benchmarks" / script), *arguments, "--json", str(out)]
    subprocess.run(command, check=True, cwd=tree)
    return json.loads(out.read_text())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--base", required=True, help="the revision to compare against")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each revision (default 3)")
    parser.add_argument("--workdir", type=pathlib.Path, default=pathlib.Path("/tmp/elmo-revisions"))
    parser.add_argument("--json", type=pathlib.Path, help="write the table's numbers here")
    parser.add_argument("benchmark", nargs=argparse.REMAINDER, help="-- SCRIPT ARGS...")
    args = parser.parse_args()
    benchmark = [a for a in args.benchmark if a != "--"]
    if not benchmark or benchmark[0] not in KEYS:
        parser.error(f"the benchmark must be one of {sorted(KEYS)}. Received: {benchmark[:1]}")
    script, arguments = benchmark[0], benchmark[1:]
    trees = {"before": _worktree(args.base, args.workdir), "after": common.REPO}
    speeds = {}  # (revision, row key) -> [tokens/s per round]
    for round_index in range(args.rounds):
        order = ["before", "after"] if round_index % 2 == 0 else ["after", "before"]
        for revision in order:
            out = args.workdir / f"{script}.{revision}.{round_index}.json"
            print(f"round {round_index + 1}/{args.rounds}: {revision}", file=sys.stderr)
            result = _run(trees[revision], script, arguments, out)
            names, speed = KEYS[script]
            for row in result["rows"]:
                key = " / ".join(str(row[name]) for name in names)
                speeds.setdefault((revision, key), []).append(row[speed])
    rows = []
    for key in dict.fromkeys(k for _, k in speeds):
        before = statistics.median(speeds.get(("before", key), [float("nan")]))
        after = statistics.median(speeds.get(("after", key), [float("nan")]))
        rows.append({"row": key, "before": before, "after": after, "ratio": after / before})
    env = common.environment(with_tensorflow=False)
    print(common.machine_line(env))
    print(f"\n`{script} {' '.join(arguments)}`, {args.rounds} rounds; base {args.base}\n")
    print("| row | before, tokens/s | after, tokens/s | after / before |")
    print("|---|---|---|---|")
    for row in rows:
        print(f"| {row['row']} | {row['before']:,.0f} | {row['after']:,.0f} | {row['ratio']:.3f} |")
    if args.json:
        payload = {"environment": env, "base": args.base, "benchmark": benchmark, "rows": rows}
        payload["samples"] = {f"{r} | {k}": v for (r, k), v in speeds.items()}
        args.json.write_text(json.dumps(payload, indent=1) + "\n")


if __name__ == "__main__":
    main()
