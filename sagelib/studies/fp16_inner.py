"""Phase 1 projections for an fp16 inner P.V accumulator in the Hopper kernel (issue 37).

The built kernel (`cuda-sm90`, two consumer warpgroups of 240 registers at head_dim 128) holds O (fp32),
the inner P.V accumulator (fp32) and one score buffer: 64 + 64 + 64 registers a thread, 192 KB of the
SM's 256 KB, so a second score buffer (the next block's Q.K^T in flight during this block's softmax)
does not fit. The contract's ``fp32+fp16`` mode halves the inner accumulator. :func:`register_budget`
says, per thread and per SM, what each candidate then needs, from the same per-state arithmetic
as :mod:`sagelib.studies.ownership` (including its estimate of row state and addresses); the contract
side of the mode (V at 2.25, fp16 partials of at most 64 keys) is ``NUMERICAL_CONTRACT.md``, stage 6.

One fp16 accumulator serves a 128-key block only if the kernel joins it into O after the block's first
64 keys (a wait between the two halves of P.V); two fp16 partials in flight at once take the registers
of one fp32 accumulator, which is the fp32 rows' budget.

After the build (``cuda-sm90-fp16-inner``): :func:`speed_rows` reads a bench recording with the option beside
the default and the peers, :func:`block_periods` and :func:`warp_instructions` the trace and Nsight Compute
recordings that say where its time goes, and :func:`period_bound` projects from those measurements how fast
the two-score-buffer structure could be at best.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from sagelib.records import documents
from sagelib.studies import ownership

#: The structures compared: (label, ownership candidate, inner accumulator, keys of a second score buffer).
STRUCTURES = (
    ("one score buffer, fp32 inner (the built kernel)", "fa3_pingpong", "fp32", 0),
    ("one score buffer, fp16 inner", "fa3_pingpong", "fp16", 0),
    ("two score buffers, fp32 inner", "fa3_pingpong", "fp32", 128),
    ("two score buffers, fp16 inner", "fa3_pingpong", "fp16", 128),
    ("a 64-key second buffer (next block's first half), fp16 inner", "fa3_pingpong", "fp16", 64),
)
BYTES_PER_REGISTER = 4
GROUPS = ("O", "inner", "scores", "rest")


def _group(part: str) -> str:
    if part.startswith("O "):
        return "O"
    if part.startswith("inner"):
        return "inner"
    if part.startswith("S ") or part == "second score buffer":
        return "scores"
    return "rest"


def register_budget(head_dim: int = 128) -> list[dict]:
    """One row per structure of :data:`STRUCTURES`: registers a consumer thread needs, against its cap.

    Per-SM kilobytes count every consumer thread of the CTA (one CTA per SM); the producer warpgroup's
    128 x 24 registers come on top of the consumers' cap (they are what setmaxnreg leaves).
    """
    rows = []
    for label, key, inner, second_keys in STRUCTURES:
        arch = ownership.candidate(key)
        regs = dict(arch.registers(head_dim, inner))
        regs.pop(ownership.P_ALIASES_S)  # P is written over S as S is consumed
        per_row_thread = arch.rows / arch.group_threads
        regs["second score buffer"] = per_row_thread * second_keys
        needed = sum(regs.values())
        cap = arch.consumer_reg_cap
        threads = arch.groups * arch.group_threads
        kib = {g: 0.0 for g in GROUPS}
        for part, count in regs.items():
            kib[_group(part)] += count * threads * BYTES_PER_REGISTER / 1024
        producer_kib = arch.producer_threads * arch.producer_reg_cap * BYTES_PER_REGISTER / 1024
        rows.append({
            "structure": label, "head_dim": head_dim, "inner accumulator": inner,
            "registers needed": needed, "consumer cap": cap, "fits": needed <= cap,
            "spare (+) or short (-)": cap - needed,
            **{f"{g} (KB per SM)": kib[g] for g in GROUPS},
            "producer (KB per SM)": producer_kib,
            "total (KB per SM)": sum(kib.values()) + producer_kib,
        })
    return rows


# ---- after the build: the measured level and the bound it sets ------------------------------------------------

OPTION, DEFAULT = "cuda-sm90-fp16-inner", "cuda-sm90"
#: issue 37's targets, B2 H32 N16384 TOPS: (head_dim, causal, mode) -> TOPS
TARGETS = {(128, False, "end_to_end"): 1000.0, (128, False, "kernel_only"): 1050.0, (128, True, "end_to_end"): 900.0,
           (64, False, "end_to_end"): 700.0}
#: two consumers' softmax steps side by side beside back-to-back D128 wgmma batches: cycles for the pair
#: (experiment log seq 95, sm90-two-softmaxes-beside-tensor-work), the period a two-score-buffer structure
#: would have before its fold and joins
SIDE_BY_SIDE_SOFTMAX_PAIR_CYCLES = 1794
#: the trace sections of the two builds in a ``sagelib profile sm90 --trace`` recording of both
TRACE_SECTIONS = {"fp32+fp32": "## default build", "fp32+fp16": "## --define SM90_PV_F16=1"}


@dataclass
class Recordings:
    """The newest recordings of the built level in a results folder (None where there is none)."""

    bench: dict | None = None  #: a sagelib.bench/1 document with rows of the option
    bench_path: Path | None = None
    accuracy: dict | None = None  #: a sagelib.fp8-anchor/1 document with the option's error against float64
    accuracy_path: Path | None = None
    trace_text: str | None = None  #: ``sagelib profile sm90 --trace`` of both builds (:data:`TRACE_SECTIONS`)
    trace_path: Path | None = None
    ncu: dict[str, dict] | None = None  #: inner level -> ``sagelib profile ncu`` document
    ncu_paths: dict[str, Path] | None = None


def find_recordings(directory: str | Path = documents.RESULTS_DIR) -> Recordings:
    """The newest bench and accuracy recordings that hold the option, and the newest trace and ncu recordings of the
    level (``*-fp16-inner-traces-*.txt``, ``*-fp16-inner-ncu-{default,f16}-*.json``)."""
    found = Recordings()
    found.bench, found.bench_path = _newest_with_option(directory, documents.BENCH.id, "records")
    found.accuracy, found.accuracy_path = _newest_with_option(directory, documents.FP8_ANCHOR.id, "rows")
    directory = Path(directory)
    traces = sorted(directory.glob("*-fp16-inner-traces-*.txt"))
    if traces:
        found.trace_path, found.trace_text = traces[-1], traces[-1].read_text()
    ncu = {mode: sorted(directory.glob(f"*-fp16-inner-ncu-{name}-*.json"))
           for mode, name in (("fp32+fp32", "default"), ("fp32+fp16", "f16"))}
    if all(ncu.values()):
        found.ncu_paths = {mode: paths[-1] for mode, paths in ncu.items()}
        found.ncu = {mode: json.loads(path.read_text()) for mode, path in found.ncu_paths.items()}
    return found


def _newest_with_option(directory, schema: str, rows_key: str) -> tuple[dict | None, Path | None]:
    """The newest ``schema`` recording one of whose ``rows_key`` rows is the option's, or (None, None)."""
    for document, path in reversed(documents.load_all(directory, schema)):
        if any(r.get("backend") == OPTION for r in document.get(rows_key, [])):
            return document, path
    return None, None


def speed_rows(document: dict) -> list[dict]:
    """Per (head_dim, causal) of a ``sagelib.bench/1`` recording holding the option: its TOPS end to end and kernel
    only beside the default's, the ratio, SageAttention2 sm90's and cuDNN FP8's end-to-end TOPS, and issue 37's
    target where it set one. Empty when the recording has no row of the option."""
    tops: dict[tuple, float] = {}
    for r in document.get("records", []):
        if r.get("error") is None and r.get("tops"):
            tops[(r["backend"], r["mode"], r["shape"]["head_dim"], r["causal"])] = r["tops"]
    cases = sorted({(d, c) for (b, _, d, c) in tops if b == OPTION}, key=lambda dc: (-dc[0], dc[1]))
    rows = []
    for d, causal in cases:
        row = {"case": f"D{d}" + (" causal" if causal else "")}
        for backend, label in ((OPTION, "fp32+fp16"), (DEFAULT, "fp32+fp32")):
            for mode in ("end_to_end", "kernel_only"):
                row[f"{label} {mode.replace('_', ' ')}"] = _rounded(tops.get((backend, mode, d, causal)))
        option, default = tops.get((OPTION, "end_to_end", d, causal)), tops.get((DEFAULT, "end_to_end", d, causal))
        row["fp32+fp16 / fp32+fp32"] = round(option / default, 3) if option and default else None
        row["sage2-sm90"] = _rounded(tops.get(("sage2-sm90", "end_to_end", d, causal)))
        row["cudnn-fp8"] = _rounded(tops.get(("cudnn-fp8", "end_to_end", d, causal)))
        row["target (end to end)"] = TARGETS.get((d, causal, "end_to_end"))
        rows.append(row)
    return rows


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 1)


def block_periods(trace_text: str) -> dict[str, int]:
    """The median block period (cycles, warp 0) of each build in a trace recording of both (:data:`TRACE_SECTIONS`)."""
    periods = {}
    for mode, heading in TRACE_SECTIONS.items():
        start = trace_text.find(heading)
        if start < 0:
            continue
        found = re.search(r"median block period, warp 0: (\d+) cycles", trace_text[start:])
        if found:
            periods[mode] = int(found.group(1))
    return periods


def warp_instructions(ncu_document: dict) -> int | None:
    """Warp-level instructions executed by the first kernel of a ``sagelib profile ncu`` recording."""
    kernels = ncu_document.get("kernels") or [{}]
    value = kernels[0].get("metrics", {}).get("inst_executed", {}).get("value")
    return int(value) if value is not None else None


def period_bound(default_tops: float, periods: dict[str, int], target_tops: float = 1050.0,
                 side_by_side: int = SIDE_BY_SIDE_SOFTMAX_PAIR_CYCLES) -> list[dict]:
    """Kernel-only TOPS from block periods, scaled from the default's measured TOPS at its measured period.

    Rows: the two built levels (their measured periods); the two-score-buffer structure with the fp16 level at
    best, a projection: the side-by-side softmax pair plus the fp16 joins' measured cost (the option's period
    less the default's), with no cost for the fold or for P.V's round trip (optimistic); and the period the target
    needs."""
    default, option = periods["fp32+fp32"], periods["fp32+fp16"]
    best = side_by_side + (option - default)
    needed = default_tops * default / target_tops
    rows = [("one score buffer, fp32 inner (built)", default, "measured"),
            ("one score buffer, fp16 inner (built)", option, "measured"),
            ("two score buffers, fp16 inner, at best", best, "projection"),
            (f"what {target_tops:.0f} TOPS kernel only needs", needed, "target")]
    return [{"structure": name, "block period (cycles)": round(period), "kernel-only TOPS": round(
        default_tops * default / period, 1), "period from": kind} for name, period, kind in rows]
