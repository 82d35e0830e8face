"""The log anchored beyond itself: its last committed version must still be its beginning.

The hash chain and the view's anchor catch an edit made by hand, but not a rewrite that recomputes every later
hash and re-renders the view, nor a last record removed together with a re-render: both leave a log that is
consistent with itself. What git has committed cannot be rewritten that way without rewriting history, so
:func:`check_committed` compares the log with the version of the last commit that touched it: every committed
line must still stand, unchanged and in place, at the start of the log.

What this cannot catch: records appended after that commit. A forged record with valid hashes is
indistinguishable from a real one until it is committed; the note names those records so that they are
reviewed (``git diff``) before they are committed.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from sagelib.records.log_report import Problem, VerifyReport


def _git(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(folder), *args], capture_output=True, timeout=60)


def committed_version(path: Path) -> tuple[str, str, bytes] | str:
    """(commit, path in the repository, bytes) of ``path`` at the last commit that touched it and kept it;
    or, when there is none, the reason in words."""
    path = path.resolve()
    try:
        top = _git(path.parent, "rev-parse", "--show-toplevel")
    except FileNotFoundError:
        return "git is not installed here"
    except (OSError, subprocess.SubprocessError) as exc:
        return f"git could not be run ({exc})"
    if top.returncode != 0:
        why = top.stderr.decode(errors="replace").strip().splitlines()
        return f"{path.parent} is not inside a git checkout ({why[0] if why else 'git rev-parse failed'})"
    root = Path(top.stdout.decode().strip()).resolve()
    relative = path.relative_to(root).as_posix()
    last = _git(root, "log", "-1", "--format=%H", "--diff-filter=ACMRT", "--", relative)
    commit = last.stdout.decode().strip()
    if last.returncode != 0 or not commit:
        return f"{relative} has never been committed in {root}"
    shown = _git(root, "show", f"{commit}:{relative}")
    if shown.returncode != 0:
        return f"git show {commit[:12]}:{relative} failed ({shown.stderr.decode(errors='replace').strip()})"
    return commit, relative, shown.stdout


def _seq(line: bytes) -> int | None:
    try:
        seq = json.loads(line).get("seq")
    except (ValueError, AttributeError):
        return None
    return seq if isinstance(seq, int) else None


def check_committed(data: bytes, report: VerifyReport) -> None:
    """Add a problem when a committed line of the log changed or vanished; a note says which commit was used."""
    found = committed_version(report.path)
    if isinstance(found, str):
        report.notes.append(f"committed version: not checked ({found}); only the chain and the view's anchor "
                            "vouch for the records, so a re-chained log with a re-rendered view would pass")
        return
    commit, relative, committed = found
    short = commit[:12]
    old = committed.replace(b"\r\n", b"\n").split(b"\n")[:-1]  # complete lines only; CRLF is reported elsewhere
    new = data.replace(b"\r\n", b"\n").split(b"\n")[:-1]
    restore = (f"restore it from git (`git show {short}:{relative} > {relative}`, then append again any newer "
               "record); a record is corrected by appending a new one, never by editing")
    for index, line in enumerate(old):
        if index >= len(new):
            seqs = [s for s in map(_seq, old[index:]) if s is not None]
            span = f"seq {seqs[0]}..{seqs[-1]}" if seqs else f"line(s) {index + 1}..{len(old)}"
            report.problems.append(Problem(
                index + 1, seqs[0] if seqs else None, "uncommitted_removal",
                f"{len(old) - index} committed record(s) ({span}, committed in {short}) are missing from the log: "
                "removed after they were committed", restore))
            break
        if new[index] != line:
            later = sum(1 for a, b in zip(old[index + 1:], new[index + 1:]) if a != b)
            seq = _seq(line)
            report.problems.append(Problem(
                index + 1, seq, "uncommitted_change",
                f"record seq {seq} is not the one committed in {short} at this line"
                + (f" ({later} later committed line(s) differ too)" if later else "")
                + ": a committed record was changed, replaced or removed (perhaps with every later hash "
                "recomputed and the view re-rendered)", restore))
            break
    else:
        extra = len(new) - len(old)
        note = (f"committed version: the log begins with its {len(old)} record(s) committed in {short} "
                f"({relative}), unchanged")
        if extra > 0:
            report.uncommitted = extra
            seqs = [s for s in map(_seq, new[len(old):]) if s is not None]
            span = f"seq {seqs[0]}..{seqs[-1]}" if seqs else f"{extra} line(s)"
            note += (f"; {extra} record(s) after it ({span}) are not committed yet: only their chain vouches "
                     f"for them (a forged append with valid hashes looks the same), so review them with "
                     f"`git diff -- {relative}` before committing")
        report.notes.append(note)
        return
    report.notes.append(f"committed version: compared with {relative} as committed in {short}")
