"""``sagelib inventory``: the reference inventory of artifacts that results rest on.

    sagelib inventory verify                  # rehash all; exit 1 on any changed, missing or unreadable
                                              # artifact, unlisted data/results file, or entry removed or
                                              # re-recorded since the last commit
    sagelib inventory add NUMERICAL_CONTRACT.md --kind contract --command "written by hand"
    sagelib inventory add outputs/runs/X/00_contract/results.json --kind parity \\
        --command "sagelib run --profile gpu" --environment outputs/runs/X/environment.json
    sagelib inventory block canonical-inputs --subject "canonical input tensors" \\
        --reason "never retained" --unblock "generate and commit them"

Exit status: 0 done (verify: every artifact unchanged, every result file listed, the committed
entries kept); 1 otherwise, each row named with its fix; 2 bad input.
"""

from __future__ import annotations

import json
from pathlib import Path

from sagelib.commands.args import describe, file_in_folder, input_file
from sagelib.errors import UsageError
from sagelib.records import inventory, provenance


def _common(parser) -> None:
    parser.add_argument("--inventory", metavar="FILE", default=str(inventory.DEFAULT_INVENTORY),
                        help="inventory file (default: data/reference_inventory.json)")
    parser.add_argument("--root", metavar="DIR", default=str(provenance.REPO_ROOT),
                        help="repository root the artifact paths are relative to")


def register(subparsers) -> None:
    parser = subparsers.add_parser("inventory", help="the reference inventory: add, verify, block",
                                   description=describe(__doc__))
    sub = parser.add_subparsers(dest="inventory_command", metavar="ACTION")

    verify = sub.add_parser("verify", help="rehash every artifact; table of ok/changed/missing")
    _common(verify)
    verify.set_defaults(func=cmd_verify)

    add = sub.add_parser("add", help="hash an artifact and record it")
    _common(add)
    add.add_argument("artifact", metavar="PATH", help="file inside the repository")
    add.add_argument("--kind", required=True, choices=list(inventory.KINDS))
    add.add_argument("--command", required=True,
                     help="the command that produced it ('written by hand' for documents)")
    env = add.add_mutually_exclusive_group()
    env.add_argument("--environment", metavar="FILE",
                     help="JSON environment it was produced in (e.g. a run's environment.json)")
    env.add_argument("--environment-here", action="store_true",
                     help="it was produced on this machine just now: record environment() here")
    add.add_argument("--note")
    add.add_argument("--replace", action="store_true", help="re-record an artifact already listed")
    add.set_defaults(func=cmd_add)

    block = sub.add_parser("block", help="record a blocker: needed, provenance unknown")
    _common(block)
    block.add_argument("id")
    block.add_argument("--subject", required=True)
    block.add_argument("--reason", required=True)
    block.add_argument("--unblock", required=True, help="what would resolve it")
    block.set_defaults(func=cmd_block)

    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def _inventory(args) -> Path:
    """The --inventory file, checked with --root before anything is hashed or written."""
    if not Path(args.root).is_dir():
        raise UsageError(f"--root {args.root!r}: no such folder; give the repository root the artifact paths "
                         "are relative to, or leave --root out")
    if args.inventory_command == "verify":
        return input_file("--inventory", args.inventory, "an inventory such as data/reference_inventory.json")
    # add and block start a new inventory where none is yet
    return file_in_folder("--inventory", args.inventory, "the inventory file in an existing folder, or leave "
                          "--inventory out for data/reference_inventory.json")


STATUSES = ("ok", "changed", "missing", "unreadable", "unlisted", "removed", "rerecorded")
_DETAILS = {
    "changed": "its bytes differ from the recorded hash; restore it from git, or re-record it on purpose with "
               "`sagelib inventory add PATH --kind KIND --command CMD --replace`",
    "missing": "no such file; restore it from git, or remove its entry on purpose",
}


def cmd_verify(args) -> int:
    path = _inventory(args)
    check = inventory.check_inventory(path, args.root)
    rows = check.rows
    width = max([len(r.path) for r in rows] + [8])
    print(f"{'artifact':<{width}}  {'kind':<15}  {'status':<10}  recorded      current")
    for row in rows:
        current = row.current_sha256[:12] if row.current_sha256 else "-"
        print(f"{row.path:<{width}}  {row.kind:<15}  {row.status:<10}  {row.recorded_sha256[:12] or '-':<12}  {current}")
    bad = [r for r in rows if r.status != "ok"]
    counts = [f"{sum(r.status == s for r in rows)} {s}" for s in STATUSES
              if s in ("ok", "changed", "missing") or any(r.status == s for r in rows)]
    print(f"{len(rows)} artifact(s): {', '.join(counts)}")
    for row in bad:
        print(f"  {row.status}: {row.path}: {row.detail or _DETAILS[row.status]}")
    for note in check.notes:
        print(f"  {note}")
    listed = inventory.blockers(path, args.root)
    print(f"{len(listed)} blocker(s):")
    for blocker in listed:
        print(f"  [{blocker.id}] {blocker.subject}: {blocker.reason} (unblock: {blocker.unblock})")
    return 1 if bad else 0


def cmd_add(args) -> int:
    path = _inventory(args)
    environment = None
    if args.environment_here:
        environment = provenance.environment()
    elif args.environment:
        try:
            environment = json.loads(Path(args.environment).read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise UsageError(f"--environment {args.environment!r}: expected a readable JSON file ({exc})") from None
        if not isinstance(environment, dict):
            raise UsageError(f"--environment {args.environment!r}: expected a JSON object")
        document_keys = sorted(environment)
        environment = provenance.environment_of(environment)
        if environment is None:
            raise UsageError(f"--environment {args.environment!r}: expected an environment record (keys such as "
                             f"gpus, driver, torch, git_commit, as in a run's environment.json) or a document holding "
                             f"one under 'environment' (a bench file); got keys {document_keys[:8]}. Pass the run's "
                             f"environment.json, or --environment-here on the machine that produced the artifact")
    artifact = inventory.inventory_add(args.artifact, args.kind, args.command, environment=environment,
                                        note=args.note, replace=args.replace, path=path,
                                        root=args.root)
    print(f"recorded {artifact.path} ({artifact.kind}) sha256 {artifact.sha256} size {artifact.size}")
    return 0


def cmd_block(args) -> int:
    blocker = inventory.add_blocker(args.id, args.subject, args.reason, args.unblock,
                                     path=_inventory(args), root=args.root)
    print(f"recorded blocker {blocker.id}: {blocker.subject}")
    return 0
