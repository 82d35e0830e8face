"""``sagelib targets``: where the open issues' speed targets stand in a recorded bench document.

    sagelib targets                      # the newest recording in data/results that measured the targets' cases
    sagelib targets --from bench.json    # a document of `sagelib bench --out` or scripts/bench_cuda.py
    sagelib targets --strict             # exit 1 unless every target is measured and met
    sagelib targets --history            # every recording in data/results, oldest first: how the targets moved

One line per target of issues 4 and 6 (sagelib.targets.TARGETS): the measured figure, the goal
(a peer's figure from the same document where the target names one), met or how far short.
"""

from __future__ import annotations

import json


def register(subparsers) -> None:
    parser = subparsers.add_parser("targets", help="the issues' speed targets against a recorded bench document",
                                   description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="source", metavar="FILE", default=None,
                        help="a sagelib.bench JSON document (default: the newest suitable one in data/results)")
    parser.add_argument("--strict", action="store_true", help="exit 1 unless every target is measured and met")
    parser.add_argument("--history", action="store_true",
                        help="one row per recorded bench document in data/results that measured a target's case, "
                             "oldest first: each target as a share of its goal")
    parser.set_defaults(func=run)


def run(args) -> int:
    from sagelib import bench, targets
    from sagelib.cli import UsageError, input_file

    if args.history:
        if args.source is not None or args.strict:
            raise UsageError("--history reads every recording in data/results; it takes neither --from (one "
                             "document) nor --strict (a verdict on one document): run those without --history")
        recordings = targets.history()
        if not recordings:
            raise UsageError("no recorded bench document in data/results measured any target's case; run "
                             "`python3 scripts/bench_cuda.py --out DIR` on an H200 and keep DIR/bench.json there")
        print(targets.format_history(recordings))
        return 0
    if args.source is not None:
        path = input_file("--from", args.source, "a bench document written by `sagelib bench --out` or "
                          "scripts/bench_cuda.py (recorded ones are under data/results/)")
        try:
            document = json.loads(path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise UsageError(f"--from: {path} is not JSON ({exc}); pass a file written by `sagelib bench --out`")
        if not isinstance(document, dict) or document.get("schema") != bench.SCHEMA:
            got = f"schema {document.get('schema')!r}" if isinstance(document, dict) else \
                f"a JSON {type(document).__name__}"
            raise UsageError(f"--from: expected a {bench.SCHEMA} document (`sagelib bench --out` or "
                             f"scripts/bench_cuda.py), got {got} in {path}")
    else:
        document, path = targets.latest_document()
        if document is None:
            raise UsageError("no recorded bench document in data/results measured any target's case; run "
                             "`python3 scripts/bench_cuda.py --out DIR` on an H200 and pass DIR/bench.json with --from")
    device = (document.get("device") or {}).get("name", "unknown device")
    tree = targets.source_tree(document) or "unknown"
    print(f"{path} ({device}, {document.get('created_utc', 'undated')}, tree {tree})")
    statuses = targets.evaluate(document)
    print(targets.format_table(statuses))
    return 1 if args.strict and not all(s.met for s in statuses) else 0
