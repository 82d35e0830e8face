"""``sagelib targets``: how close the kernels come to their speed goals (TOPS per shape, a peer's figure, a share of
the copy bandwidth), read from a recorded bench document.

    sagelib targets                      # the newest recording in data/results that measured the targets' cases
    sagelib targets --from bench.json    # a document of `sagelib bench --out`, e.g. --suite default
    sagelib targets --from bench.json --with rerun.json   # a case of it re-measured (repeatable)
    sagelib targets --strict             # exit 1 unless every target is measured and met
    sagelib targets --history            # every recording in data/results, oldest first: how the targets moved

One line per speed target (sagelib.measure.targets.TARGETS): the measured figure, the goal
(a peer's figure from the same document where the target names one), met or how far short.

A case the bench read with a wide timing spread (an outlier) can be re-measured at the same tree.
Without --from, the recordings in data/results at the bench's tree and card are such re-measures;
with --from, the files given with --with are. A target is read from the re-measure whose records
have the narrowest spread (IQR over median), if narrower than the bench's own, and its line names it.
"""

from __future__ import annotations

import json

from sagelib.commands.args import describe


def register(subparsers) -> None:
    parser = subparsers.add_parser("targets", help="the kernels' speed goals (TOPS per shape, against cuDNN, quantizer bandwidth) "
                                   "against a recorded bench",
                                   description=describe(__doc__))
    parser.add_argument("--from", dest="source", metavar="FILE", default=None,
                        help="a sagelib.measure.bench JSON document (default: the newest suitable one in data/results)")
    parser.add_argument("--with", dest="remeasures", metavar="FILE", action="append", default=[],
                        help="a bench document that re-measured some of --from's cases at the same tree "
                             "(repeatable); without --from, data/results' recordings at the bench's tree are used")
    parser.add_argument("--strict", action="store_true", help="exit 1 unless every target is measured and met")
    parser.add_argument("--history", action="store_true",
                        help="one row per recorded bench document in data/results that measured a target's case, "
                             "oldest first: each target as a share of its goal")
    parser.set_defaults(func=run)


def run(args) -> int:
    from sagelib.errors import UsageError
    from sagelib.measure import targets

    if args.history:
        if args.source is not None or args.strict:
            raise UsageError("--history reads every recording in data/results; it takes neither --from (one "
                             "document) nor --strict (a verdict on one document): run those without --history")
        recordings = targets.history()
        if not recordings:
            raise UsageError("no recorded bench document in data/results measured any target's case; run "
                             "`sagelib bench --suite default --out FILE.json` on an H200 and keep FILE.json there")
        print(targets.format_history(recordings))
        return 0
    if args.source is not None:
        document, path = _bench_document("--from", args.source)
        remeasures = tuple(_bench_document("--with", given) for given in args.remeasures)
    else:
        if args.remeasures:
            raise UsageError("--with adds re-measures to the document given with --from; without --from the "
                             "recordings in data/results at the bench's tree are used: add --from BENCH.json")
        document, path = targets.latest_document()
        if document is None:
            raise UsageError("no recorded bench document in data/results measured any target's case; run "
                             "`sagelib bench --suite default --out FILE.json` on an H200 and pass it with --from")
        remeasures = targets.remeasures_of(document, path)
    device = (document.get("device") or {}).get("name", "unknown device")
    tree = targets.source_tree(document) or "unknown"
    print(f"{path} ({device}, {document.get('created_utc', 'undated')}, tree {tree})")
    if remeasures:
        print("re-measures considered: " + ", ".join(str(p.name) for _, p in remeasures))
    statuses = targets.evaluate(document, remeasures=remeasures)
    print(targets.format_table(statuses))
    ratios = targets.sage2_ratios(document, statuses)
    if ratios:
        print("\nagainst the real SageAttention2 in the same run (ours / theirs, end to end):")
        print("\n".join(ratios))
    return 1 if args.strict and not all(s.met for s in statuses) else 0


def _bench_document(option: str, given: str):
    """The sagelib.measure.bench document at ``given`` and its path; a UsageError naming ``option`` otherwise."""
    from sagelib.commands.args import input_file
    from sagelib.errors import UsageError
    from sagelib.measure import bench

    path = input_file(option, given, "a bench document written by `sagelib bench --out` or "
                      "`sagelib bench --suite default --out` (recorded ones are under data/results/)")
    try:
        document = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"{option}: {path} is not JSON ({exc}); pass a file written by `sagelib bench --out`")
    if not isinstance(document, dict) or document.get("schema") != bench.SCHEMA:
        got = f"schema {document.get('schema')!r}" if isinstance(document, dict) else \
            f"a JSON {type(document).__name__}"
        raise UsageError(f"{option}: expected a {bench.SCHEMA} document (`sagelib bench --out`, "
                         f"e.g. with --suite default), got {got} in {path}")
    return document, path
