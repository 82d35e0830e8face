"""Where a kernel's warps wait, instruction by instruction: Nsight Compute's source page.

``ncu --section SourceCounters --page source --csv --print-source sass`` prints, per kernel, a line
``"Kernel Name","<name>"``, a header that starts with ``"Address"``, and one row per SASS instruction:
its address and text, how many warp samples landed on it (``Warp Stall Sampling (All Samples)``),
how often it executed, and the samples split by stall reason (``stall_wait``, ``stall_barrier``, ...).
This module reads that CSV and sums it three ways: by stall reason, by opcode, and the instructions
that drew the most samples, with offsets from the kernel's first instruction so they can be found in
``cuobjdump -sass``. :func:`source_argv` is the ncu command line (clocks left as found).
"""

from __future__ import annotations

import csv
import re
from collections import Counter
from dataclasses import dataclass, field

from sagelib.errors import InputError

SAMPLES = "Warp Stall Sampling (All Samples)"
EXECUTED = "Instructions Executed"
_PREDICATE = re.compile(r"^@!?U?P[0-9T]+\s+")


@dataclass(frozen=True)
class SourceLine:
    """One SASS instruction of a profiled kernel."""

    offset: int                 #: bytes from the kernel's first instruction
    source: str                 #: the SASS text
    samples: int                #: warp samples on it, all reasons
    executed: int               #: warp-level executions
    stalls: dict[str, int] = field(default_factory=dict)  #: samples by reason ('wait', 'barrier', ...)

    @property
    def opcode(self) -> str:
        """The mnemonic without its predicate and modifiers: ``@!P0 BRA 0x..`` -> ``BRA``."""
        text = _PREDICATE.sub("", self.source.strip())
        return text.split()[0].split(".")[0] if text else ""


@dataclass(frozen=True)
class StallSummary:
    """A kernel's samples summed by reason and by opcode, and its most-sampled instructions."""

    kernel: str
    total: int
    by_reason: list[tuple[str, int]]
    by_opcode: list[tuple[str, int]]
    top: list[SourceLine]


def _number(text: str) -> int:
    text = (text or "").replace(",", "").strip()
    return int(float(text)) if text and text != "-" else 0


def parse_source_csv(text: str) -> dict[str, list[SourceLine]]:
    """Kernel name -> its instructions, from ncu's source-page CSV (ncu's own messages may surround it)."""
    kernels: dict[str, list[SourceLine]] = {}
    lines = [line for line in text.splitlines() if line.startswith('"')]
    i = 0
    while i < len(lines):
        if not lines[i].startswith('"Kernel Name"'):
            i += 1
            continue
        name = next(csv.reader([lines[i]]))[1]
        end = next((j for j in range(i + 1, len(lines)) if lines[j].startswith('"Kernel Name"')), len(lines))
        block = lines[i + 1:end]
        if not block or not block[0].startswith('"Address"'):
            raise InputError(f"kernel {name[:60]!r}: expected a header line starting with \"Address\" after its name; "
                             "was the CSV written with --page source --csv --print-source sass?")
        rows = list(csv.DictReader(block))
        for column in (SAMPLES, EXECUTED):
            if rows and column not in rows[0]:
                raise InputError(f"kernel {name[:60]!r}: no column {column!r}; collect --section SourceCounters")
        base = int(rows[0]["Address"], 16) if rows else 0
        kernels[name] = [SourceLine(int(r["Address"], 16) - base, r["Source"].strip(), _number(r[SAMPLES]),
                                    _number(r[EXECUTED]),
                                    {c[len("stall_"):]: _number(v) for c, v in r.items()
                                     if c.startswith("stall_") and "Not Issued" not in c and _number(v)})
                         for r in rows]
        i = end
    if not kernels:
        raise InputError("no kernel in the CSV: expected a line starting with \"Kernel Name\" "
                         "(ncu --page source --csv --print-source sass)")
    return kernels


def summarize(kernel: str, lines: list[SourceLine], top: int = 25) -> StallSummary:
    """Samples by reason and by opcode (largest first) and the ``top`` most-sampled instructions."""
    reasons, opcodes = Counter(), Counter()
    for line in lines:
        reasons.update(line.stalls)
        opcodes[line.opcode] += line.samples
    ranked = sorted((line for line in lines if line.samples), key=lambda line: -line.samples)[:top]
    return StallSummary(kernel, sum(line.samples for line in lines), reasons.most_common(), opcodes.most_common(),
                        ranked)


def format_summary(summary: StallSummary, reasons: int = 12, opcodes: int = 15) -> str:
    """The summary as text: shares of all samples, the busiest instructions with their top three reasons."""
    total = max(summary.total, 1)
    out = [f"{summary.kernel[:110]}", f"  warp samples: {summary.total}", "  by stall reason:"]
    out += [f"    {reason:24s} {n:9d} {100 * n / total:5.1f}%" for reason, n in summary.by_reason[:reasons]]
    out.append("  by opcode: " + ", ".join(f"{op} {100 * n / total:.1f}%" for op, n in summary.by_opcode[:opcodes]))
    out.append("  most-sampled instructions (offset, share, executions, SASS, top reasons):")
    for line in summary.top:
        why = ", ".join(f"{r} {n}" for r, n in sorted(line.stalls.items(), key=lambda item: -item[1])[:3])
        out.append(f"    {line.offset:6x} {100 * line.samples / total:5.2f}% {line.executed:>10d}  "
                   f"{line.source[:60]:60s} {why}")
    return "\n".join(out)


def source_argv(ncu: str, program: list[str], *, kernel_regex: str | None, launch_count: int = 1) -> list[str]:
    """ncu on ``program``'s profiler region: the source page with stall sampling, as CSV on stdout."""
    argv = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--launch-count", str(launch_count),
            "--section", "SourceCounters", "--section", "WarpStateStats", "--page", "source", "--csv",
            "--print-source", "sass"]
    if kernel_regex:
        argv += ["--kernel-name", f"regex:{kernel_regex}"]
    return argv + list(program)
