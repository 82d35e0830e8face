"""The append-only experiment log: one JSON record a line, each chained to the one before.

``data/experiment_log.jsonl`` is the record of what was proposed, run, kept and
closed. Each line is the canonical JSON of one record (sorted keys, no spaces).
A record carries:

- ``seq``: its position, 0 for the first record;
- ``sha256``: the sha256 of the record's canonical JSON *without* this field,
  so an edit of any record, the last one included, is caught on its own line;
- ``prev_sha256``: the ``sha256`` of the record before it; the first record
  (genesis) holds :data:`GENESIS_PREV`, sixty-four zeros;
- its content: ``date``, ``phase``, ``status`` (one of :data:`STATUSES`),
  ``experiment``, ``technique``, ``hypothesis``, ``actions``, ``decision``,
  ``measured`` (figures, each backed by artifact hashes or an explicit reason why
  not), ``projections`` (estimates, never shown as results), ``fingerprint`` and
  ``declarations`` (conditions declared true to reopen closed work);
- ``recorded_utc``: when the line was written.

A removed record at the end cannot break a chain, so the rendered view
(``EXPERIMENT_LOG.md``, see :mod:`sagelib.records.log_view`) carries an *anchor*:
the record count and head hash at the time it was rendered. :func:`verify`
compares the log with that anchor to find truncation.

Appends take an exclusive ``fcntl.flock`` on the log file itself (the lock
follows the file, so no lock file is left lying around), verify the existing
chain, write the line, flush and fsync, then re-render the view. A writer that
dies mid-line leaves a line without its newline: :func:`verify` reports it as a
torn last line, :func:`append` refuses to write after it, and :func:`repair`
moves it aside into a ``.torn-<time>`` file next to the log.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
import re
import time
from dataclasses import dataclass, field
from pathlib import Path

from sagelib import paths
from sagelib.errors import InputError, LedgerError
from sagelib.records.datafile import (
    DataFileError,
    canonical_json,
    repo_relative,
    sha256_bytes,
    sha256_file,
)

REPO_ROOT = paths.REPO_ROOT
DEFAULT_LOG = REPO_ROOT / "data" / "experiment_log.jsonl"
DEFAULT_VIEW = REPO_ROOT / "EXPERIMENT_LOG.md"

GENESIS_PREV = "0" * 64

STATUSES = {
    "proposed": "opened; nothing measured yet",
    "running": "being measured",
    "retained": "kept: its result or artifact is part of the work going forward",
    "closed": "finished and not kept; reopening follows its rule",
    "blocked": "cannot proceed until a named blocker is resolved",
    "withdrawn": "abandoned before a result, with the reason in the decision",
}

# Test hook: when set to a number of seconds, append writes the first half of the line,
# flushes and fsyncs it, then sleeps that long before writing the rest (so a test can kill
# the writer mid-line). Never set it outside tests.
PAUSE_MID_APPEND_ENV = "SAGELIB_LEDGER_TEST_PAUSE_MID_APPEND"

_CHAIN_FIELDS = ("seq", "prev_sha256", "sha256", "recorded_utc")
_CONTENT_FIELDS = {
    "date": str, "phase": str, "status": str, "experiment": str, "technique": (str, type(None)),
    "hypothesis": str, "actions": list, "decision": str, "measured": list,
    "projections": list, "fingerprint": (dict, type(None)), "declarations": list,
}
_OPTIONAL_FIELDS = {"prior_work_id": str, "reopen_rule": dict, "notes": str, "environment": dict}
_HEX64 = re.compile(r"[0-9a-f]{64}")
#: A record's date: YYYY-MM-DD (the log command also refuses a --date no calendar has).
DATE_PATTERN = re.compile(r"\d{4}-\d{2}-\d{2}")


# ----------------------------------------------------------------------------- records


def record_hash(record: dict) -> str:
    """sha256 of a record's canonical JSON without its own ``sha256`` field."""
    body = {k: v for k, v in record.items() if k != "sha256"}
    return sha256_bytes(canonical_json(body).encode("utf-8"))


def _type_name(expected) -> str:
    types = expected if isinstance(expected, tuple) else (expected,)
    return " or ".join("null" if t is type(None) else t.__name__ for t in types)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_amount(item: dict, where: str) -> None:
    value, low, high = item.get("value"), item.get("low"), item.get("high")
    if value is not None:
        if not _is_number(value) or low is not None or high is not None:
            raise InputError(f"{where}: 'value' must be a number, without 'low'/'high'; got {item!r}")
    elif not (_is_number(low) and _is_number(high) and low <= high):
        raise InputError(f"{where}: give a number 'value' or numbers 'low' <= 'high'; got {item!r}")


def _check_artifacts(item: dict, where: str) -> None:
    artifacts = item.get("artifacts")
    if not isinstance(artifacts, list):
        raise InputError(f"{where}: 'artifacts' must be a list of {{path, sha256}}; got {artifacts!r}")
    for artifact in artifacts:
        if not (isinstance(artifact, dict) and isinstance(artifact.get("path"), str)
                and _HEX64.fullmatch(str(artifact.get("sha256", "")))):
            raise InputError(f"{where}: artifact {artifact!r} needs 'path' and a 64-hex 'sha256'")
    if not artifacts and not (isinstance(item.get("unbacked"), str) and item["unbacked"].strip()):
        raise InputError(f"{where}: no artifact backs this figure; list its artifacts or say why "
                         "in 'unbacked'")


def check_content(record: dict) -> None:
    """Raise ValueError naming the field when a record's content is malformed."""
    for name, expected in _CONTENT_FIELDS.items():
        if name not in record:
            raise InputError(f"missing field {name!r} (every record needs {', '.join(_CONTENT_FIELDS)})")
        types = expected if isinstance(expected, tuple) else (expected,)
        if not isinstance(record[name], types):
            raise InputError(f"field {name!r}: expected {_type_name(expected)}, got {record[name]!r}")
    for name, expected in _OPTIONAL_FIELDS.items():
        if name in record and not isinstance(record[name], expected):
            raise InputError(f"field {name!r}: expected {_type_name(expected)}, got {record[name]!r}")
    unknown = set(record) - set(_CONTENT_FIELDS) - set(_OPTIONAL_FIELDS) - set(_CHAIN_FIELDS)
    if unknown:
        raise InputError(f"unknown field(s) {', '.join(sorted(unknown))}; known: "
                         f"{', '.join([*_CONTENT_FIELDS, *_OPTIONAL_FIELDS])}")
    if record["status"] not in STATUSES:
        raise InputError(f"field 'status': unknown status {record['status']!r}; expected one of "
                         f"{', '.join(STATUSES)}")
    if not DATE_PATTERN.fullmatch(record["date"]):
        raise InputError(f"field 'date': expected YYYY-MM-DD, got {record['date']!r}")
    for name in ("phase", "experiment"):
        if not record[name].strip():
            raise InputError(f"field {name!r}: must not be empty")
    if not all(isinstance(a, str) for a in record["actions"]):
        raise InputError(f"field 'actions': expected a list of strings, got {record['actions']!r}")
    for i, item in enumerate(record["measured"]):
        where = f"field 'measured' item {i + 1}"
        if not isinstance(item, dict) or not isinstance(item.get("quantity"), str) \
                or not isinstance(item.get("unit"), str):
            raise InputError(f"{where}: expected {{quantity, value | low+high, unit, artifacts}}, got {item!r}")
        _check_amount(item, where)
        _check_artifacts(item, where)
    for i, item in enumerate(record["projections"]):
        where = f"field 'projections' item {i + 1}"
        if not isinstance(item, dict) or not isinstance(item.get("quantity"), str) \
                or not isinstance(item.get("unit"), str) or not str(item.get("basis", "")).strip():
            raise InputError(f"{where}: expected {{quantity, value | low+high, unit, basis}}, got {item!r}")
        _check_amount(item, where)
    for i, item in enumerate(record["declarations"]):
        if not (isinstance(item, dict) and isinstance(item.get("condition"), str)
                and isinstance(item.get("evidence"), str) and item["evidence"].strip()):
            raise InputError(f"field 'declarations' item {i + 1}: expected {{condition, evidence}} "
                             f"with non-empty evidence, got {item!r}")
    fingerprint = record["fingerprint"]
    if fingerprint is not None:
        for name in ("technique", "source_sha256", "config_sha256"):
            if not isinstance(fingerprint.get(name), str):
                raise InputError(f"field 'fingerprint': missing {name!r}; got {fingerprint!r}")


def _check_chain_fields(record: dict) -> None:
    if not (isinstance(record.get("seq"), int) and not isinstance(record["seq"], bool) and record["seq"] >= 0):
        raise InputError(f"field 'seq': expected an integer >= 0, got {record.get('seq')!r}")
    for name in ("prev_sha256", "sha256"):
        if not _HEX64.fullmatch(str(record.get(name, ""))):
            raise InputError(f"field {name!r}: expected 64 lowercase hex digits, got {record.get(name)!r}")
    if not isinstance(record.get("recorded_utc"), str):
        raise InputError(f"field 'recorded_utc': expected a UTC timestamp, got {record.get('recorded_utc')!r}")


def figure(quantity: str, value=None, unit: str = "", *, low=None, high=None, artifacts=(),
           unbacked: str | None = None, scope: str | None = None, measured_on: str | None = None,
           root: Path | str | None = None) -> dict:
    """Build a measured figure, hashing each artifact file now (paths must lie in the repo)."""
    root = Path(root) if root is not None else REPO_ROOT
    item = {"quantity": quantity, "unit": unit, "artifacts": []}
    for name, given in (("value", value), ("low", low), ("high", high), ("unbacked", unbacked),
                        ("scope", scope), ("measured_on", measured_on)):
        if given is not None:
            item[name] = given
    for path in artifacts:
        relative = repo_relative(path, root)
        item["artifacts"].append({"path": relative, "sha256": sha256_file(root / relative)})
    _check_amount(item, f"figure {quantity!r}")
    _check_artifacts(item, f"figure {quantity!r}")
    return item


def projection(quantity: str, value=None, unit: str = "", *, low=None, high=None, basis: str) -> dict:
    """Build a projection: an estimate with the basis it rests on. Never a result."""
    item = {"quantity": quantity, "unit": unit, "basis": basis}
    for name, given in (("value", value), ("low", low), ("high", high)):
        if given is not None:
            item[name] = given
    _check_amount(item, f"projection {quantity!r}")
    return item


# ----------------------------------------------------------------------------- verify


@dataclass(frozen=True)
class Problem:
    """One thing wrong with the log: where, what kind, what happened and the fix."""

    line: int | None
    seq: int | None
    kind: str
    message: str
    fix: str

    def text(self) -> str:
        where = f"line {self.line}" if self.line is not None else "log"
        return f"{where}: {self.message}. Fix: {self.fix}"


@dataclass
class VerifyReport:
    path: Path
    records: int = 0
    head_sha256: str = GENESIS_PREV
    problems: list[Problem] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.problems

    def summary(self) -> str:
        state = "chain intact" if self.ok else f"{len(self.problems)} problem(s)"
        return f"{self.path}: {self.records} record(s), head {self.head_sha256[:12]}, {state}"

    def rows(self) -> list[dict]:
        """Problems and warnings as plain dicts, for a notebook table."""
        rows = [{"line": p.line, "seq": p.seq, "kind": p.kind, "message": p.message, "fix": p.fix}
                for p in self.problems]
        rows += [{"line": None, "seq": None, "kind": "warning", "message": w, "fix": ""}
                 for w in self.warnings]
        return rows


_ANCHOR = re.compile(r"<!-- ledger-anchor: records=(\d+) head_sha256=([0-9a-f]{64}) -->")


def read_anchor(view: Path) -> tuple[int, str] | None:
    """The (record count, head hash) a rendered view was made from, or None."""
    try:
        text = view.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    match = _ANCHOR.search(text)
    return (int(match.group(1)), match.group(2)) if match else None


def _parse_lines(data: bytes, report: VerifyReport) -> list[tuple[int, dict | None]]:
    """Split the log into (line number, record or None when unreadable)."""
    lines = data.split(b"\n")
    complete, tail = lines[:-1], lines[-1]
    parsed: list[tuple[int, dict | None]] = []
    for number, raw in enumerate(complete, start=1):
        try:
            text = raw.decode("utf-8")
            record = json.loads(text)
            if not isinstance(record, dict):
                raise InputError("not a JSON object")
        except (UnicodeDecodeError, ValueError) as exc:
            report.problems.append(Problem(number, None, "malformed", f"not a JSON record ({exc})",
                                           "restore this line from version control; records are "
                                           "written only by `sagelib log append`"))
            parsed.append((number, None))
            continue
        if text != canonical_json(record):
            report.problems.append(Problem(number, record.get("seq"), "not_canonical",
                                           "line is not in canonical form (edited by hand)",
                                           "restore this line from version control"))
        parsed.append((number, record))
    if tail:
        report.problems.append(Problem(
            len(complete) + 1, None, "torn",
            f"last line is incomplete ({len(tail)} bytes, no newline): a writer stopped mid-append",
            "run `sagelib log repair` to move the torn bytes aside, then append again"))
    return parsed


def _check_records(parsed: list[tuple[int, dict | None]], report: VerifyReport) -> None:
    """Check each record's own hash, its place in seq order, and its link to seq - 1.

    Order is judged against the highest seq seen so far, so one moved record is
    reported where it stands and the records after it are not blamed too.
    """
    where_seq = {rec.get("seq"): n for n, rec in parsed if rec is not None}
    sha_of_seq: dict[int, str] = {}
    highest = -1
    for number, record in parsed:
        if record is None:
            continue
        try:
            _check_chain_fields(record)
            check_content(record)
        except ValueError as exc:
            report.problems.append(Problem(number, record.get("seq"), "schema", str(exc),
                                           "restore this line from version control"))
            continue
        seq = record["seq"]
        if record_hash(record) != record["sha256"]:
            report.problems.append(Problem(
                number, seq, "edited",
                f"record seq {seq} does not match its own sha256: it was changed after it was written",
                "restore the record from version control; to correct a record, append a new one "
                "that says so"))
        if seq in sha_of_seq:
            report.problems.append(Problem(number, seq, "duplicated", f"record seq {seq} appears twice",
                                           "remove the copy, restoring the log from version control"))
        elif seq <= highest:
            report.problems.append(Problem(number, seq, "reordered",
                                           f"record seq {seq} stands after seq {highest} (moved)",
                                           "put the records back in seq order from version control"))
        elif seq > highest + 1:
            gap = range(highest + 1, seq)
            deleted = [s for s in gap if s not in where_seq]
            if deleted:
                report.problems.append(Problem(
                    number, seq, "deleted",
                    f"record(s) seq {', '.join(map(str, deleted))} missing before this line (deleted)",
                    "restore the deleted record(s) from version control"))
            else:
                report.problems.append(Problem(
                    number, seq, "reordered",
                    f"record seq {seq} stands before seq {', '.join(map(str, gap))} (moved)",
                    "put the records back in seq order from version control"))
        expected_prev = GENESIS_PREV if seq == 0 else sha_of_seq.get(seq - 1)
        if expected_prev is not None and record["prev_sha256"] != expected_prev:
            earlier = "genesis" if seq == 0 else f"record seq {seq - 1} (line {where_seq[seq - 1]})"
            report.problems.append(Problem(
                number, seq, "chain",
                f"prev_sha256 of record seq {seq} does not match {earlier}: that record was replaced "
                "or edited with its hash recomputed",
                "restore both records from version control"))
        sha_of_seq[seq] = record["sha256"]
        highest = max(highest, seq)
        report.records += 1
        report.head_sha256 = record["sha256"]


def _check_anchor(report: VerifyReport, parsed: list[tuple[int, dict | None]], view: Path | None) -> None:
    if view is None:
        return
    anchor = read_anchor(view)
    if anchor is None:
        report.warnings.append(f"no anchor found in {view}: removal of trailing records cannot be "
                               "detected; run `sagelib log render`")
        return
    count, head = anchor
    records = [rec for _, rec in parsed if isinstance(rec, dict)]
    by_seq = {rec.get("seq"): (number, rec) for number, rec in parsed if isinstance(rec, dict)}
    seqs = [s for s in by_seq if isinstance(s, int)]
    highest = max(seqs, default=-1)
    if count and not any(rec.get("sha256") == head for rec in records):
        if highest < count - 1:
            report.problems.append(Problem(
                len(parsed) or None, None, "truncated",
                f"{view.name} was rendered from {count} record(s) (head {head[:12]}) but the log "
                f"ends at seq {highest}: record(s) seq {highest + 1}..{count - 1} were removed",
                "restore the removed records from version control"))
        else:
            number, _ = by_seq.get(count - 1, (None, None))
            report.problems.append(Problem(
                number, count - 1, "anchor",
                f"record seq {count - 1} is not the one {view.name} was rendered from "
                f"(head {head[:12]}): it was replaced after rendering",
                "restore the log from version control"))
    if highest + 1 > count:
        report.warnings.append(f"{view.name} is {highest + 1 - count} record(s) behind the log; "
                               "run `sagelib log render`")


def default_view(path: Path) -> Path:
    return DEFAULT_VIEW if path.resolve() == DEFAULT_LOG.resolve() else path.with_suffix(".md")


def verify_bytes(data: bytes, path: Path, view: Path | None) -> VerifyReport:
    report = VerifyReport(path=path)
    parsed = _parse_lines(data, report)
    _check_records(parsed, report)
    _check_anchor(report, parsed, view)
    report.problems.sort(key=lambda p: (p.line or 0))
    return report


def verify(path: Path | str | None = None, view: Path | str | None = "default") -> VerifyReport:
    """Check the whole chain; name every edited, deleted, reordered, truncated or torn record.

    ``view`` is the rendered ``EXPERIMENT_LOG.md`` whose anchor detects removed
    trailing records; by default the view that belongs to ``path``; None skips it.
    """
    path = Path(path) if path is not None else DEFAULT_LOG
    view_path = default_view(path) if view == "default" else (Path(view) if view else None)
    return verify_bytes(path.read_bytes(), path, view_path)


def read(path: Path | str | None = None) -> list[dict]:
    """All records, after checking the chain; raises LedgerError naming the first problem."""
    path = Path(path) if path is not None else DEFAULT_LOG
    report = verify(path, view=None)
    if not report.ok:
        raise LedgerError(f"{path}: {report.problems[0].text()}")
    return [json.loads(line) for line in path.read_bytes().splitlines() if line]


# ----------------------------------------------------------------------------- append


@contextlib.contextmanager
def locked(path: Path):
    """Open the log for appending under an exclusive flock; yields the file descriptor."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield fd
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def read_fd(fd: int) -> bytes:
    os.lseek(fd, 0, os.SEEK_SET)
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    return b"".join(chunks)


def _write_all(fd: int, data: bytes) -> None:
    while data:
        written = os.write(fd, data)
        data = data[written:]


def _write_line(fd: int, line: bytes) -> None:
    pause = os.environ.get(PAUSE_MID_APPEND_ENV)
    if pause:
        half = len(line) // 2
        _write_all(fd, line[:half])
        os.fsync(fd)
        time.sleep(float(pause))
        line = line[half:]
    _write_all(fd, line)
    os.fsync(fd)


def utc_now() -> str:
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def append(fields: dict, path: Path | str | None = None, view: Path | str | None = "default") -> dict:
    """Append one record and return it as written (with seq, hashes and time filled in).

    ``fields`` holds the content fields (see the module docstring); the chain
    fields are added here under the lock. The existing log must verify first:
    nothing is written on top of a broken or torn chain. The view is re-rendered
    afterwards (``view=None`` skips that).
    """
    from sagelib.records import log_view as ledger_render

    path = Path(path) if path is not None else DEFAULT_LOG
    view_path = default_view(path) if view == "default" else (Path(view) if view else None)
    stray = set(fields) & set(_CHAIN_FIELDS)
    if stray:
        raise InputError(f"fields {sorted(stray)} are filled in by append; leave them out")
    content = json.loads(json.dumps(fields))  # a private copy; the caller's dict is untouched
    check_content(content)
    with locked(path) as fd:
        report = verify_bytes(read_fd(fd), path, view_path)
        if not report.ok:
            raise LedgerError(f"{path}: refusing to append to a log that does not verify: "
                              f"{report.problems[0].text()}")
        record = {**content, "seq": report.records, "prev_sha256": report.head_sha256,
                  "recorded_utc": utc_now()}
        record["sha256"] = record_hash(record)
        _write_line(fd, canonical_json(record).encode("utf-8") + b"\n")
        if view_path is not None:
            ledger_render.write_view(read_fd(fd), path, view_path)
    return record


def repair(path: Path | str | None = None) -> Path | None:
    """Move a torn last line (no newline) into ``<log>.torn-<utc>``; return that file or None.

    Complete records are never touched; a log with other problems is left as is.
    """
    path = Path(path) if path is not None else DEFAULT_LOG
    with locked(path) as fd:
        data = read_fd(fd)
        cut = data.rfind(b"\n") + 1
        if cut == len(data):
            return None
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
        aside = path.with_name(f"{path.name}.torn-{stamp}")
        aside.write_bytes(data[cut:])
        os.ftruncate(fd, cut)
        os.fsync(fd)
    return aside


def load_fields_json(path: Path | str) -> dict:
    """Record content from a JSON file (for ``sagelib log append --json``)."""
    path = Path(path)
    try:
        fields = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFileError(path, exc.lineno, f"not valid JSON ({exc.msg})",
                            "correct the JSON syntax at that line") from None
    if not isinstance(fields, dict):
        raise DataFileError(path, 1, "expected a JSON object of record fields",
                            "write the fields as one object {\"status\": ..., ...}")
    return fields
