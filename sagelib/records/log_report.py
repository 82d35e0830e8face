"""What :func:`sagelib.records.ledger.verify` found: the problems (each with its line, kind and fix), the
warnings, and plain notes on what was and was not checked (the committed version of the log)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from sagelib.records.log_schema import GENESIS_PREV


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
    #: what was checked beyond the chain, in words: the commit the log was compared with, or why it was not
    notes: list[str] = field(default_factory=list)
    #: records after the last committed version of the log (0 when none, or when git could not be asked)
    uncommitted: int = 0

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
