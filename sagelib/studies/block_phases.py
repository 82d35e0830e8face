"""Where a key block's cycles go in the Hopper kernel, from recorded phase traces.

``sagelib profile sm90 --trace`` prints, for warp 0 of each consumer warpgroup of CTA 0, one
line per key block::

    consumer warpgroup 0, warp 0:
      block  2 start    10554  softmax  1172 | turn   143 | issue  266 | wait   341 | fold  171

(clock64 cycles: the softmax, the wait for the warpgroup's turn, issuing the wgmma batch, waiting
for it, and the fold of P.V into O). Recorded files put several such printouts one after another
under headings (``## name`` or ``== trace B:H:N:D``). This module reads them for notebook 02 and
splits a block's period into its phases; what the five phases leave of the start-to-start
period (the loop's own instructions and the trace stamps) is ``rest``.
"""

from __future__ import annotations

import re
import statistics
from dataclasses import dataclass
from pathlib import Path

from sagelib.errors import InputError
from sagelib.records.documents import RESULTS_DIR, newest_file

PHASES = ("softmax", "turn", "issue", "wait", "fold")

_HEADING = re.compile(r"^(?:## |== trace )(.+)$")
_WARPGROUP = re.compile(r"^consumer warpgroup (\d+), warp 0:$")
_BLOCK = re.compile(r"^\s+block\s+(\d+) start\s+(\d+)\s+softmax\s+(\d+) \| turn\s+(\d+) \| issue\s+(\d+) \| "
                    r"wait\s+(\d+) \| fold\s+(\d+)$")


@dataclass(frozen=True)
class BlockTrace:
    """One traced key block of one consumer warpgroup (cycles)."""

    section: str   #: the heading it was printed under ('' before any)
    warpgroup: int
    block: int
    start: int     #: from the trace's first stamp
    softmax: int
    turn: int
    issue: int
    wait: int
    fold: int


def parse(text: str) -> list[BlockTrace]:
    """Every block line of a recorded trace file, under its heading and warpgroup.

    Other lines (the tile walk, the producer, comments) are skipped; a line that starts like a
    block line but does not parse is refused, so a changed print format cannot pass unnoticed."""
    section, warpgroup, rows = "", None, []
    for number, line in enumerate(text.splitlines(), 1):
        if heading := _HEADING.match(line):
            section, warpgroup = heading.group(1).strip(), None
        elif group := _WARPGROUP.match(line):
            warpgroup = int(group.group(1))
        elif line.lstrip().startswith("block "):
            block = _BLOCK.match(line)
            if block is None or warpgroup is None:
                raise InputError(f"line {number}: expected '  block J start T  softmax S | turn . | issue . | wait . | "
                                 f"fold .' after a 'consumer warpgroup N, warp 0:' line, got {line!r}")
            rows.append(BlockTrace(section, warpgroup, *(int(x) for x in block.groups())))
        elif not line.startswith(" "):
            warpgroup = None  # any other unindented line ends the table a warpgroup line opened
    return rows


def sections(rows: list[BlockTrace]) -> list[str]:
    """The headings that have block lines, in file order."""
    return list(dict.fromkeys(r.section for r in rows))


def period_parts(rows: list[BlockTrace], section: str, warpgroup: int, parity: int | None = None) -> dict[str, float]:
    """Median cycles of each phase, of ``rest`` and of the whole ``period`` (start to next start) for one
    warpgroup's blocks under ``section``; ``parity`` 0 or 1 keeps even or odd blocks only (a loop unrolled
    by two runs different code in its halves). Only blocks followed by a traced block count."""
    mine = sorted((r for r in rows if r.section == section and r.warpgroup == warpgroup), key=lambda r: r.block)
    pairs = [(a, b) for a, b in zip(mine, mine[1:]) if b.block == a.block + 1
             and (parity is None or a.block % 2 == parity)]
    if not pairs:
        raise InputError(f"no consecutive blocks of warpgroup {warpgroup} under {section!r}"
                         f"{'' if parity is None else f' with block % 2 == {parity}'}; sections with blocks: "
                         f"{sections(rows)}")
    parts = {phase: statistics.median(getattr(a, phase) for a, _ in pairs) for phase in PHASES}
    period = statistics.median(b.start - a.start for a, b in pairs)
    parts["rest"] = period - sum(parts[p] for p in PHASES)
    parts["period"] = period
    return parts


def load(stem: str, directory: str | Path = RESULTS_DIR) -> tuple[list[BlockTrace], Path | None]:
    """The newest recorded ``*-{stem}.txt``'s block lines (and its path), or ([], None)."""
    path = newest_file(stem, ".txt", directory)
    return (parse(path.read_text()), path) if path else ([], None)
