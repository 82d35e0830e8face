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
moves it aside into a new ``.torn-<time>`` file next to the log (never over an
earlier one). Beyond itself, :func:`verify` holds the log to its last committed
version in git (:mod:`sagelib.records.log_git`): a committed record never changes."""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
import re
import time
from pathlib import Path

from sagelib import paths
from sagelib.errors import InputError, LedgerError
from sagelib.records import log_git, log_view
from sagelib.records.datafile import (
    canonical_json,
)
from sagelib.records.log_report import Problem, VerifyReport
from sagelib.records.log_schema import (
    _CHAIN_FIELDS,
    GENESIS_PREV,
    _check_chain_fields,
    check_content,
    record_hash,
)

REPO_ROOT = paths.REPO_ROOT


DEFAULT_LOG = REPO_ROOT / "data" / "experiment_log.jsonl"


DEFAULT_VIEW = REPO_ROOT / "EXPERIMENT_LOG.md"


# Test hook: when set to a number of seconds, append writes the first half of the line,
# flushes and fsyncs it, then sleeps that long before writing the rest (so a test can kill
# the writer mid-line). Never set it outside tests.
PAUSE_MID_APPEND_ENV = "SAGELIB_LEDGER_TEST_PAUSE_MID_APPEND"


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
    crlf = [number for number, raw in enumerate(complete, start=1) if raw.endswith(b"\r")]
    if crlf:  # one problem for the whole file, then read the lines as they were written
        report.problems.append(Problem(
            crlf[0], None, "crlf",
            f"{len(crlf)} of {len(complete)} line(s) end in CRLF (Windows line endings, written by an editor or "
            "by git's core.autocrlf), not the LF that append writes",
            "convert the file back to LF (`sed -i 's/\\r$//' FILE`, or check it out again with "
            "core.autocrlf=false); the records themselves are then checked as usual"))
        complete = [raw[:-1] if raw.endswith(b"\r") else raw for raw in complete]
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


def _check_anchor(report: VerifyReport, parsed: list[tuple[int, dict | None]], view: Path | None,
                  require_view: bool = True) -> None:
    if view is None or (not require_view and not view.exists()):
        return
    if not view.exists():
        report.problems.append(Problem(
            None, None, "view_missing",
            f"the rendered view {view} does not exist, so its anchor (record count and head hash) cannot show "
            "whether records were removed from the end",
            "run `sagelib log render` to write it from a log that verifies, or restore it from git"))
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


def verify_bytes(data: bytes, path: Path, view: Path | None, require_view: bool = True) -> VerifyReport:
    """The chain and the view's anchor of ``data`` (the log's bytes); ``require_view=False`` lets a view that
    does not exist yet pass (append and render are about to write it)."""
    report = VerifyReport(path=path)
    parsed = _parse_lines(data, report)
    _check_records(parsed, report)
    _check_anchor(report, parsed, view, require_view)
    report.problems.sort(key=lambda p: (p.line or 0))
    return report


def verify(path: Path | str | None = None, view: Path | str | None = "default",
           committed: bool = True) -> VerifyReport:
    """Check the whole chain; name every edited, deleted, reordered, truncated or torn record.

    ``view`` is the rendered ``EXPERIMENT_LOG.md`` whose anchor detects removed
    trailing records; by default the view that belongs to ``path``; None skips it.
    ``committed`` also compares the log with its last committed version in git
    (:mod:`sagelib.records.log_git`); the report's notes say which commit, or why not.
    """
    path = Path(path) if path is not None else DEFAULT_LOG
    view_path = default_view(path) if view == "default" else (Path(view) if view else None)
    data = path.read_bytes()
    report = verify_bytes(data, path, view_path)
    if committed:
        log_git.check_committed(data, report)
        report.problems.sort(key=lambda p: (p.line or 0))
    return report


def read(path: Path | str | None = None) -> list[dict]:
    """All records, after checking the chain; raises LedgerError naming the first problem."""
    path = Path(path) if path is not None else DEFAULT_LOG
    report = verify(path, view=None)
    if not report.ok:
        raise LedgerError(f"{path}: {report.problems[0].text()}")
    return [json.loads(line) for line in path.read_bytes().splitlines() if line]


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

    path = Path(path) if path is not None else DEFAULT_LOG
    view_path = default_view(path) if view == "default" else (Path(view) if view else None)
    stray = set(fields) & set(_CHAIN_FIELDS)
    if stray:
        raise InputError(f"fields {sorted(stray)} are filled in by append; leave them out")
    content = json.loads(json.dumps(fields))  # a private copy; the caller's dict is untouched
    check_content(content)
    with locked(path) as fd:
        report = verify_bytes(read_fd(fd), path, view_path, require_view=False)
        if not report.ok:
            raise LedgerError(f"{path}: refusing to append to a log that does not verify: "
                              f"{report.problems[0].text()}")
        record = {**content, "seq": report.records, "prev_sha256": report.head_sha256,
                  "recorded_utc": utc_now()}
        record["sha256"] = record_hash(record)
        _write_line(fd, canonical_json(record).encode("utf-8") + b"\n")
        if view_path is not None:
            log_view.write_view(read_fd(fd), path, view_path)
    return record


def render_file(path: Path | str | None = None, view: Path | str | None = None) -> Path:
    """Regenerate the view of a log that verifies; raise LedgerError otherwise.

    A log that fails verification is never rendered: a fresh anchor would hide
    the damage.
    """
    path = Path(path) if path is not None else DEFAULT_LOG
    view_path = Path(view) if view is not None else default_view(path)
    with locked(path) as fd:
        data = read_fd(fd)
        report = verify_bytes(data, path, view_path, require_view=False)
        if not report.ok:
            raise LedgerError(f"{path}: refusing to render a log that does not verify: "
                              f"{report.problems[0].text()}")
        log_view.write_view(data, path, view_path)
    return view_path


def _new_aside(path: Path, torn: bytes) -> Path:
    """Write ``torn`` to a new ``<log>.torn-<utc>`` (``-2``, ``-3``, ... when taken): never over an earlier one."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    for n in range(1, 10_000):
        aside = path.with_name(f"{path.name}.torn-{stamp}" + (f"-{n}" if n > 1 else ""))
        try:
            fd = os.open(aside, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        try:
            _write_all(fd, torn)
            os.fsync(fd)
        finally:
            os.close(fd)
        return aside
    raise LedgerError(f"{path}: 9999 torn files of {stamp} already lie beside the log; move them away first")


def repair(path: Path | str | None = None) -> Path | None:
    """Move a torn last line (no newline) into a new ``<log>.torn-<utc>[-n]``; return that file or None.

    Complete records are never touched; a log with other problems is left as is.
    """
    path = Path(path) if path is not None else DEFAULT_LOG
    with locked(path) as fd:
        data = read_fd(fd)
        cut = data.rfind(b"\n") + 1
        if cut == len(data):
            return None
        aside = _new_aside(path, data[cut:])
        os.ftruncate(fd, cut)
        os.fsync(fd)
    return aside
