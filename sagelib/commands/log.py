"""``sagelib log``: the append-only experiment log.

    sagelib log verify                      # exit 1 when any record is edited, moved, missing or torn
    sagelib log show --last 5
    sagelib log render                      # regenerate EXPERIMENT_LOG.md
    sagelib log append --status running --experiment E --phase 1 --hypothesis H \\
        --action "built the kernel" --measured tops=812:TOPS --artifact outputs/x/results.json
    sagelib log append ... --measured tops=812:TOPS@data/results/a.json --measured share=0.7@data/results/b.json
    sagelib log propose --technique "early K prefetch" --experiment E --phase 2 --hypothesis H \\
        --fingerprint-source kernels/attn_sm90.cu --config blkq=64 \\
        --declare producer_consumer_pipeline_changed --evidence "loads move to a TMA producer warp"
    sagelib log repair                      # move a torn last line aside
    sagelib log import-prior --date 2026-08-26

Exit status: 0 done; 1 refused (propose) or the log does not verify; 2 bad input.
"""

from __future__ import annotations

import json
import sys
from datetime import datetime
from pathlib import Path

from sagelib.commands.args import describe, file_in_folder, input_file
from sagelib.errors import UsageError
from sagelib.records import ledger, log_schema, prior_work, reopening


def _common(parser) -> None:
    parser.add_argument("--log", metavar="FILE", default=str(ledger.DEFAULT_LOG),
                        help="the log (default: data/experiment_log.jsonl)")
    parser.add_argument("--view", metavar="FILE",
                        help="its rendered view (default: EXPERIMENT_LOG.md for the default log, "
                             "else the log's name with .md)")


def _content_flags(parser) -> None:
    parser.add_argument("--date", help="YYYY-MM-DD (default: today, UTC)")
    parser.add_argument("--phase", help="phase label, e.g. 1")
    parser.add_argument("--experiment", help="experiment id")
    parser.add_argument("--hypothesis", help="why this attempt could work")


def register(subparsers) -> None:
    parser = subparsers.add_parser("log", help="the append-only experiment log: append, verify, "
                                   "show, render, propose", description=describe(__doc__))
    sub = parser.add_subparsers(dest="log_command", metavar="ACTION")

    verify = sub.add_parser("verify", help="check the hash chain; exit 1 on any problem")
    _common(verify)
    verify.add_argument("--strict", action="store_true",
                        help="also exit 1 when records follow the last committed version (a forged append with "
                             "valid hashes cannot be told from a real one until it is committed: review, then commit)")
    verify.set_defaults(func=cmd_verify)

    show = sub.add_parser("show", help="list records (one line each, or JSON)")
    _common(show)
    show.add_argument("--last", type=int, metavar="N", help="only the last N records")
    show.add_argument("--experiment", help="only records of this experiment id")
    show.add_argument("--json", action="store_true", help="print the records as JSON lines")
    show.set_defaults(func=cmd_show)

    render = sub.add_parser("render", help="regenerate the Markdown view from a log that verifies")
    _common(render)
    render.set_defaults(func=cmd_render)

    append = sub.add_parser("append", help="append one record")
    _common(append)
    _new_log_flag(append)
    _content_flags(append)
    append.add_argument("--json", dest="json_file", metavar="FILE",
                        help="record fields as a JSON object; flags given as well override it")
    append.add_argument("--status", choices=list(log_schema.STATUSES))
    append.add_argument("--technique")
    append.add_argument("--action", action="append", help="one action taken; repeatable")
    append.add_argument("--decision")
    append.add_argument("--measured", action="append", metavar="QUANTITY=VALUE[:UNIT][@PATH...]",
                        help="a measured figure; VALUE may be LOW..HIGH; @PATH names a result file backing this "
                             "figure alone (repeatable within the figure), else every --artifact backs it; "
                             "repeatable")
    append.add_argument("--measured-on", help="what the figures were measured on (GPU, shapes)")
    append.add_argument("--artifact", action="append", metavar="PATH",
                        help="artifact backing the --measured figures that name none with @PATH (hashed now); "
                             "repeatable")
    append.add_argument("--unbacked", metavar="REASON",
                        help="why no artifact backs the --measured figures")
    append.add_argument("--projection", action="append", metavar="QUANTITY=VALUE[:UNIT]",
                        help="an estimate (never a result); needs --basis; repeatable")
    append.add_argument("--basis", help="what the --projection figures rest on")
    append.add_argument("--rule", choices=list(prior_work.RULE_KINDS),
                        help="reopening rule of a closed experiment")
    append.add_argument("--rule-condition", action="append", metavar="CONDITION",
                        help=f"condition of --rule; one of {', '.join(prior_work.CONDITIONS)}")
    append.add_argument("--notes")
    append.set_defaults(func=cmd_append)

    propose = sub.add_parser("propose", help="open an experiment, enforcing the closed-work rules")
    _common(propose)
    _new_log_flag(propose)
    _content_flags(propose)
    propose.add_argument("--technique", required=True)
    propose.add_argument("--fingerprint-source", nargs="+", required=True, metavar="FILE",
                         help="every kernel source the attempt compiles (hashed)")
    propose.add_argument("--config", nargs="*", metavar="KEY=VALUE", default=[],
                         help="the attempt's configuration (values read as JSON when they parse)")
    propose.add_argument("--declare", action="append", default=[], metavar="CONDITION",
                         help="a reopening condition declared true; each needs an --evidence")
    propose.add_argument("--evidence", action="append", default=[], metavar="TEXT",
                         help="evidence for the --declare in the same position")
    propose.add_argument("--prior-work", metavar="FILE", help="default: data/prior_work.yaml")
    propose.set_defaults(func=cmd_propose)

    repair = sub.add_parser("repair", help="move a torn last line aside (complete records untouched)")
    _common(repair)
    repair.set_defaults(func=cmd_repair)

    imp = sub.add_parser("import-prior", help="append a closed record for each prior-work entry "
                         "not yet in the log")
    _common(imp)
    imp.add_argument("--date", required=True, help="date of the import, YYYY-MM-DD")
    imp.add_argument("--prior-work", metavar="FILE", help="default: data/prior_work.yaml")
    imp.set_defaults(func=cmd_import_prior)

    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def _paths(args) -> tuple[Path, Path]:
    path = Path(args.log)
    if not args.view:
        return path, ledger.default_view(path)
    # checked now: a record appended before a failed render
    return path, file_in_folder("--view", args.view, "the log's Markdown view in an existing folder, or leave --view "
                                "out for the default")


def _new_log_flag(parser) -> None:
    parser.add_argument("--new-log", action="store_true",
                        help="start a new log where --log names no file yet (without it a missing --log is refused)")


def _log_to_write(args, path: Path) -> Path:
    """The log a command is about to write to: one that exists, or with --new-log a new one, so that a mistyped
    --log is refused instead of starting a second log beside the real one."""
    if args.new_log and not path.exists():
        return path
    return input_file("--log", str(path), "an existing experiment log (check the path), or pass --new-log to start "
                                          "a new log there")


def _existing(path: Path) -> Path:
    return input_file("--log", str(path), "the path of an experiment log")


def _date(flag: str, value: str | None) -> str | None:
    """``value`` when it is a calendar date written YYYY-MM-DD (or None when not given); a UsageError naming
    ``flag`` otherwise, so a malformed date is refused before any work, whatever the command would do."""
    if value is None:
        return None
    try:
        if log_schema.DATE_PATTERN.fullmatch(value) and datetime.strptime(value, "%Y-%m-%d"):
            return value
    except ValueError:  # well formed, but no such day (2026-02-30)
        pass
    raise UsageError(f"{flag}: expected a calendar date as YYYY-MM-DD, e.g. 2026-08-26, got {value!r}; "
                     "give the date in that form")


def _prior_work(args) -> str | None:
    if args.prior_work is not None:
        input_file("--prior-work", args.prior_work, "a prior-work YAML such as data/prior_work.yaml, or leave it out")
    return args.prior_work


def cmd_verify(args) -> int:
    path, view = _paths(args)
    report = ledger.verify(_existing(path), view)
    print(report.summary())
    for problem in report.problems:
        print(f"  {problem.kind:<13} {problem.text()}")
    for warning in report.warnings:
        print(f"  warning       {warning}")
    for note in report.notes:
        print(f"  {note}")
    if args.strict and report.uncommitted:
        print(f"  strict        {report.uncommitted} record(s) are not committed; review them "
              "(`git diff -- data/experiment_log.jsonl`) and commit, or remove them with git")
        return 1
    return 0 if report.ok else 1


def cmd_show(args) -> int:
    path, _ = _paths(args)
    try:
        records = ledger.read(_existing(path))
    except ledger.LedgerError as exc:
        print(exc, file=sys.stderr)
        return 1
    if args.experiment:
        records = [r for r in records if r["experiment"] == args.experiment]
    if args.last is not None:
        records = records[-args.last:] if args.last > 0 else []
    for record in records:
        if args.json:
            print(json.dumps(record, ensure_ascii=False))
        else:
            technique = record["technique"] or "-"
            print(f"{record['seq']:>4}  {record['date']}  {record['status']:<9}  "
                  f"{record['experiment']:<28} {technique:<24} {record['decision'][:60]}")
    return 0


def cmd_render(args) -> int:
    path, view = _paths(args)
    try:
        written = ledger.render_file(_existing(path), view)
    except ledger.LedgerError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"wrote {written}")
    return 0


def _split_figure(text: str, flag: str, backed: bool = True) -> dict:
    """``QUANTITY=VALUE[:UNIT][@ARTIFACT...]`` as the fields of a figure, its own artifacts under "artifacts"
    (a projection, not ``backed``, takes none)."""
    figure_text, *own_artifacts = text.split("@") if backed else (text,)
    quantity, sep, rest = figure_text.partition("=")
    amount, _, unit = rest.partition(":")
    low, dots, high = amount.partition("..")
    try:
        numbers = {"low": float(low), "high": float(high)} if dots else {"value": float(amount)}
    except ValueError:
        numbers = None
    if not sep or not quantity.strip() or numbers is None or any(not a.strip() for a in own_artifacts):
        at_path = (", optionally followed by @PATH for each result file backing that figure alone, e.g. "
                   "tops=812.5:TOPS or tops=812.5:TOPS@data/results/run.json") if backed else ", e.g. tops=812.5:TOPS"
        raise UsageError(f"{flag} {text!r}: expected QUANTITY=VALUE[:UNIT] or QUANTITY=LOW..HIGH[:UNIT] "
                         f"with numbers{at_path}")
    figure = {"quantity": quantity.strip(), "unit": unit.strip(), **numbers}
    return {**figure, "artifacts": [a.strip() for a in own_artifacts]} if backed else figure


def _check_artifact(artifact: str, flag: str) -> None:
    if not (ledger.REPO_ROOT / artifact).is_file():  # relative paths are read from the repository root
        raise UsageError(f"{flag} {artifact!r}: no such file in the repository {ledger.REPO_ROOT}; "
                         "give a result file backing the --measured figures, relative to the repository")


def _fields_from_flags(args) -> dict:
    fields = {}
    if args.json_file:
        fields = log_schema.load_fields_json(input_file("--json", args.json_file, "a JSON file of record fields"))
    for name in ("date", "phase", "experiment", "hypothesis", "status", "technique", "decision", "notes"):
        if getattr(args, name) is not None:
            fields[name] = getattr(args, name)
    fields.setdefault("date", ledger.utc_now()[:10])
    fields.setdefault("technique", None)
    fields.setdefault("decision", "")
    if args.action:
        fields["actions"] = list(args.action)
    fields.setdefault("actions", [])
    measured = [_split_figure(m, "--measured") for m in args.measured or []]
    for artifact in args.artifact or []:
        _check_artifact(artifact, "--artifact")
    for m in measured:
        for artifact in m["artifacts"]:
            _check_artifact(artifact, f"--measured {m['quantity']}=...@")
        m["artifacts"] = m["artifacts"] or list(args.artifact or [])  # its own files, else every --artifact
    if any(not m["artifacts"] for m in measured) and not args.unbacked:
        raise UsageError("--measured needs --artifact PATH (the result files backing every figure), @PATH after "
                         "the figure (the files backing it alone) or --unbacked REASON")
    figures = [log_schema.figure(m.pop("quantity"), m.pop("value", None), m.pop("unit"), **m,
                             unbacked=args.unbacked, measured_on=args.measured_on) for m in measured]
    fields["measured"] = fields.get("measured", []) + figures
    projections = [_split_figure(p, "--projection", backed=False) for p in args.projection or []]
    if projections and not args.basis:
        raise UsageError("--projection needs --basis TEXT saying what the estimate rests on")
    fields["projections"] = fields.get("projections", []) + [
        log_schema.projection(p.pop("quantity"), p.pop("value", None), p.pop("unit"), **p, basis=args.basis)
        for p in projections]
    fields.setdefault("fingerprint", None)
    fields.setdefault("declarations", [])
    if args.rule:
        conditions = args.rule_condition or (["implementation_changed"] if args.rule == "never_unchanged" else [])
        unknown = [c for c in conditions if c not in prior_work.CONDITIONS]
        if not conditions or unknown:
            raise UsageError(f"--rule-condition: expected one or more of {', '.join(prior_work.CONDITIONS)}; "
                             f"got {conditions or 'none'}")
        fields["reopen_rule"] = {"kind": args.rule, "conditions": conditions}
    return fields


def cmd_append(args) -> int:
    _date("--date", args.date)
    path, view = _paths(args)
    fields = _fields_from_flags(args)
    _log_to_write(args, path)
    try:
        record = ledger.append(fields, path, view)
    except ledger.LedgerError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(f"appended seq {record['seq']} ({record['experiment']}, {record['status']}) sha256 {record['sha256']}")
    return 0


def cmd_propose(args) -> int:
    _date("--date", args.date)
    path, view = _paths(args)
    if len(args.declare) != len(args.evidence):
        raise UsageError(f"--declare given {len(args.declare)} time(s) but --evidence {len(args.evidence)}: "
                         "give one --evidence TEXT right after each --declare CONDITION")
    for name in ("phase", "hypothesis"):
        if not getattr(args, name):
            raise UsageError(f"--{name} is required for a proposal")
    declarations = [reopening.Declaration(c, e) for c, e in zip(args.declare, args.evidence)]
    date = args.date or ledger.utc_now()[:10]
    prior_path = _prior_work(args)
    _log_to_write(args, path)
    experiment = (args.experiment
                  or f"{date}-{reopening.technique_key(args.technique, prior_work.load(prior_path))}")
    try:
        decision = reopening.propose(
            args.technique, args.fingerprint_source, reopening.parse_config(args.config), declarations,
            experiment=experiment, hypothesis=args.hypothesis, phase=args.phase, date=date,
            path=path, view=view, prior_path=prior_path)
    except ledger.LedgerError as exc:
        print(exc, file=sys.stderr)
        return 1
    print(decision.report())
    return 0 if decision.permitted else 1


def cmd_repair(args) -> int:
    path, _ = _paths(args)
    aside = ledger.repair(_existing(path))
    print(f"moved the torn last line to {aside}" if aside else "no torn last line; nothing to do")
    return 0


def cmd_import_prior(args) -> int:
    _date("--date", args.date)
    path, view = _paths(args)
    try:
        records = reopening.import_prior_work(args.date, path, view, _prior_work(args))
    except ledger.LedgerError as exc:
        print(exc, file=sys.stderr)
        return 1
    for record in records:
        print(f"appended seq {record['seq']} ({record['experiment']}, closed)")
    print(f"{len(records)} prior-work record(s) appended")
    return 0
