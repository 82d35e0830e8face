"""Shared pieces of the committed records: errors that point at a line, hashing, paths, timestamps.

The prior-work table, the experiment log and the reference inventory are files a
person may open and edit. When one of them is wrong, the error says which file,
which line, what was expected and how to fix it: :class:`DataFileError`.
Artifacts are named by repository-relative paths; :func:`repo_relative`
refuses anything that resolves outside the repository. Recorded documents stamp
their time (``created_utc`` and the like) with :func:`utc_stamp`.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from pathlib import Path

from sagelib.errors import InputError, SchemaError

_CHUNK = 1 << 20

#: The UTC timestamp of recorded documents (``created_utc``, ``started_utc``, ...), e.g. 2026-08-26T16:30:00Z.
UTC_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


class DataFileError(SchemaError):
    """A record file is malformed; the message names file, line, problem and fix."""

    def __init__(self, file: Path | str, line: int | None, problem: str, fix: str):
        self.file = str(file)
        self.line = line
        self.problem = problem
        self.fix = fix
        where = f"{self.file} line {line}" if line is not None else self.file
        super().__init__(f"{where}: {problem}. Fix: {fix}")


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path | str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(_CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def amount_text(figure: dict) -> str:
    """``"812.5"``, ``"about 0.06"`` or ``"20.9 to 23.4"`` for a figure with value or low/high."""
    about = "about " if figure.get("approximate") else ""
    if figure.get("value") is not None:
        return f"{about}{figure['value']:g}"
    return f"{about}{figure['low']:g} to {figure['high']:g}"


def utc_stamp(when: datetime | None = None) -> str:
    """``when`` (default: now) in UTC as :data:`UTC_FORMAT`; ``when`` must carry its time zone."""
    if when is None:
        when = datetime.now(timezone.utc)
    elif when.tzinfo is None:
        raise InputError(f"when: expected a datetime with a time zone, e.g. datetime.now(timezone.utc), "
                         f"got the naive {when.isoformat()!r}; attach its zone with .replace(tzinfo=...)")
    return when.astimezone(timezone.utc).strftime(UTC_FORMAT)


def canonical_json(value) -> str:
    """One stable text for a JSON value: sorted keys, no spaces, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def repo_relative(path: Path | str, root: Path | str) -> str:
    """Return ``path`` relative to ``root`` (POSIX form), refusing paths outside it.

    Relative paths are taken relative to ``root``. Symlinks are resolved first,
    so a link that points out of the repository is refused too.
    """
    root = Path(root).resolve()
    candidate = Path(path)
    if not candidate.is_absolute():
        candidate = root / candidate
    resolved = candidate.resolve()
    try:
        relative = resolved.relative_to(root)
    except ValueError:
        raise InputError(
            f"path {str(path)!r} resolves to {resolved}, outside the repository {root}; "
            "only artifacts inside the repository can be recorded. "
            "Fix: copy or commit the artifact into the repository and record that path"
        ) from None
    if str(relative) == ".":
        raise InputError(
            f"path {str(path)!r} is the repository root itself; expected a file inside it"
        )
    return relative.as_posix()
