"""``sagelib ab``: is one version of some source files faster than another? Each timed in rotated order on one GPU.

    sagelib ab snapshot build/ab/base --rev HEAD kernels/quant_kv.cu sagelib/backends/kernels/quantizers.py
    sagelib ab snapshot build/ab/new kernels/quant_kv.cu sagelib/backends/kernels/quantizers.py
    sagelib ab run --version base=build/ab/base --version new=build/ab/new --rounds 2 --out /tmp/ab \\
        -- sagelib bench --suite quant --out {out}/bench_quant.json

For versions that differ in code, not in a macro (for a macro, `sagelib sweep --schedule` is simpler).
`snapshot` makes a version folder mirroring repository paths, from the working tree or a git revision.
`run` (on the GPU host, from the repository root) copies each version's files over the working tree
and runs the command once per version and round; round r starts at version r, because whatever runs
first in a call tends to read slow. `{out}` in the command becomes that run's folder under --out,
which also gets runs.json. The working tree's own files are put back at the end, also after a
failure or Ctrl-C. Exit status: 0 when every run exited 0, 1 when one did not, 2 for bad input.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from sagelib.commands.args import describe
from sagelib.errors import InputError, UsageError


def register(subparsers) -> None:
    parser = subparsers.add_parser("ab", help="time versions of source files against each other in rotated order; "
                                              "the working tree is put back",
                                   description=describe(__doc__))
    verbs = parser.add_subparsers(dest="ab_verb", metavar="ACTION")
    snap = verbs.add_parser("snapshot", help="make a version folder from the working tree or --rev")
    snap.add_argument("dest", help="the version folder to fill, e.g. build/ab/base")
    snap.add_argument("files", nargs="+", help="repository-relative files")
    snap.add_argument("--rev", default=None, help="a git revision (default: the working tree)")
    snap.set_defaults(func=cmd_snapshot)
    go = verbs.add_parser("run", help="run a command once per version and round, rotated")
    go.add_argument("--version", action="append", required=True, metavar="NAME=FOLDER",
                    help="a version folder made by `sagelib ab snapshot` (repeat for each version)")
    go.add_argument("--rounds", type=int, default=2, help="default 2")
    go.add_argument("--out", required=True, metavar="DIR", help="runs.json and one folder per run go here")
    go.add_argument("command", nargs=argparse.REMAINDER, help="after --: the command; {out} is the run's folder")
    go.set_defaults(func=cmd_run)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def cmd_snapshot(args) -> int:
    from sagelib.measure import ab_sources

    try:
        print("\n".join(ab_sources.snapshot(Path(args.dest), args.files, args.rev)))
    except InputError as exc:
        raise UsageError(str(exc)) from None
    return 0


def parse_versions(items: list[str]) -> dict[str, Path]:
    """``NAME=FOLDER`` arguments as name -> folder; UsageError naming --version for a malformed or missing one."""
    versions = {}
    for item in items:
        name, sep, folder = item.partition("=")
        if not sep or not name or not Path(folder).is_dir():
            raise UsageError(f"--version {item!r}: expected NAME=FOLDER with an existing folder "
                             "(make it with `sagelib ab snapshot`)")
        if name in versions:
            raise UsageError(f"--version {item!r}: {name!r} is given twice; give each version its own name")
        versions[name] = Path(folder)
    return versions


def cmd_run(args) -> int:
    from sagelib.commands.args import output_file
    from sagelib.measure import ab_sources

    versions = parse_versions(args.version)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        raise UsageError("the command is missing: put it after --, e.g. -- sagelib bench --suite quant "
                         "--out {out}/bench_quant.json")
    if args.rounds < 1:
        raise UsageError(f"--rounds: expected at least 1, got {args.rounds}")
    output_file("--out", str(Path(args.out) / "runs.json"))
    try:
        records = ab_sources.run(versions, command, args.rounds, Path(args.out))
    except InputError as exc:
        raise UsageError(str(exc)) from None
    return 0 if all(r["exit"] == 0 for r in records) else 1
