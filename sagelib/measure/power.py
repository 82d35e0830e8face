"""The SM clock and the board power while one call runs back to back: what a figure was measured at.

The H200 runs its SMs at up to 1,980 MHz until the board meets its software power cap (~700 W,
throttle reason 0x4). Under back-to-back N=16384 attention calls the cap binds ~0.2 s in
(EXPERIMENT_LOG seq 105), so every long-sequence benchmark figure is a power-capped one, and a
kernel that spends less energy per operation gets a higher clock for the same cycles.

:func:`sustain` runs one call back to back for a while from idle while ``nvidia-smi`` samples the
SM clock, the power and the throttle reasons every 100 ms, and summarises the part after the
ramp (:class:`LoadSummary`): the median clock, the median power, the share of samples at the
cap, and the time per call over the same window. ``sagelib sweep --sustain S`` uses it
per build variant (leave-one-out builds included), as the since deleted ``scripts/after_load_probe.py
--clock-trace`` did per backend (EXPERIMENT_LOG seq 105); :func:`sustained_rows` reads such a sweep back for notebook 01. Parsing and
summarising are plain functions, tested on the CPU.
"""

from __future__ import annotations

import statistics
import subprocess
import time
from dataclasses import dataclass
from typing import Callable, Sequence

from sagelib.errors import InputError

#: nvidia-smi's fields, in the order :func:`parse_sample` reads them. The power field is
#: power.draw.instant where the driver has it (:func:`power_field`): power.draw is a one-second
#: average there, which trails a load that starts from idle.
QUERY = ("timestamp", "clocks.sm", "power.draw.instant", "clocks_throttle_reasons.active")
POWER_CAP = 0x4  #: the throttle-reason bit of the software power cap
SAMPLE_MS = 100


@dataclass(frozen=True)
class Sample:
    """One nvidia-smi line: seconds since midnight (from its timestamp), SM MHz, W, throttle bits."""

    t_s: float
    sm_mhz: float
    power_w: float
    reasons: int

    @property
    def capped(self) -> bool:
        return bool(self.reasons & POWER_CAP)


def parse_sample(line: str) -> Sample | None:
    """``2026/11/30 07:56:23.777, 1875, 693.36, 0x0000000000000004`` (csv,noheader,nounits) as a
    :class:`Sample`; None for a line that is not one (a field nvidia-smi reports as N/A)."""
    parts = [p.strip() for p in line.split(",")]
    if len(parts) != len(QUERY):
        return None
    stamp, mhz, watts, reasons = parts
    try:
        clock = stamp.split()[-1]
        hours, minutes, seconds = clock.split(":")
        return Sample(int(hours) * 3600 + int(minutes) * 60 + float(seconds), float(mhz), float(watts),
                      int(reasons, 16))
    except ValueError:
        return None


@dataclass(frozen=True)
class LoadSummary:
    """One call run back to back, summarised after ``settle_s`` (the clock's ramp from idle)."""

    calls: int          #: calls in the steady window
    ms_per_call: float  #: wall time per call in the steady window (the host syncs every few calls)
    sm_mhz: float       #: median SM clock of the steady window's samples
    sm_mhz_low: float
    sm_mhz_high: float
    power_w: float      #: median instantaneous board power
    capped_share: float  #: share of the samples with the power-cap throttle reason
    samples: int

    def row(self, ops: float | None = None) -> str:
        """One table row: ms per call, TOPS when ``ops`` is given, clock, power, share capped."""
        tops = f"{ops / self.ms_per_call / 1e9:8.1f}" if ops else f"{'':>8}"
        return (f"{self.ms_per_call:9.3f} {tops} {self.sm_mhz:7.0f} ({self.sm_mhz_low:.0f}-{self.sm_mhz_high:.0f})"
                f" {self.power_w:7.1f} {100 * self.capped_share:6.0f}%")


def median_run(runs: Sequence[LoadSummary]) -> LoadSummary:
    """The run with the median time per call (the upper middle one of an even count)."""
    if not runs:
        raise InputError("median_run: expected at least one LoadSummary, got none")
    return sorted(runs, key=lambda run: run.ms_per_call)[len(runs) // 2]


HEADER = f"{'ms/call':>9} {'TOPS':>8} {'SM MHz':>7} {'(range)':>11} {'W':>7} {'capped':>7}"


def summarize(samples: Sequence[Sample], marks: Sequence[tuple[float, int]], settle_s: float) -> LoadSummary:
    """The steady part of a sustained load. ``marks`` are (seconds since midnight, calls done so far)
    taken by the host at its syncs, the first at the start; samples and marks before
    ``start + settle_s`` are left out."""
    if len(marks) < 2:
        raise InputError(f"summarize: expected at least two (time, calls) marks, got {len(marks)}")
    t0 = marks[0][0] + settle_s
    steady_marks = [m for m in marks if m[0] >= t0]
    steady = [s for s in samples if t0 <= s.t_s <= marks[-1][0]]
    if len(steady_marks) < 2 or not steady:
        raise InputError(f"summarize: nothing left after settle_s={settle_s} s of a "
                         f"{marks[-1][0] - marks[0][0]:.2f} s load; run longer or settle less")
    (ta, ca), (tb, cb) = steady_marks[0], steady_marks[-1]
    if cb <= ca:
        raise InputError(f"summarize: no call completed in the steady window ({ca} -> {cb} calls)")
    clocks = [s.sm_mhz for s in steady]
    return LoadSummary(calls=cb - ca, ms_per_call=1e3 * (tb - ta) / (cb - ca), sm_mhz=statistics.median(clocks),
                       sm_mhz_low=min(clocks), sm_mhz_high=max(clocks),
                       power_w=statistics.median(s.power_w for s in steady),
                       capped_share=sum(s.capped for s in steady) / len(steady), samples=len(steady))


def seconds_since_midnight(t: float) -> float:
    """``time.time()`` on nvidia-smi's clock: local seconds since midnight."""
    local = time.localtime(t)
    return local.tm_hour * 3600 + local.tm_min * 60 + local.tm_sec + (t % 1.0)


def power_field() -> str:
    """power.draw.instant when this host's nvidia-smi knows it, else power.draw (older drivers)."""
    probe = subprocess.run(["nvidia-smi", "--query-gpu=power.draw.instant", "--format=csv,noheader"],
                           capture_output=True, text=True)
    return "power.draw.instant" if probe.returncode == 0 else "power.draw"


def sustain(fn: Callable[[], object], seconds: float, *, idle_s: float = 3.0, settle_s: float = 1.0,
            sync_every: int = 5) -> tuple[LoadSummary, list[Sample]]:
    """Run ``fn`` back to back for ``seconds`` after ``idle_s`` idle, sampling nvidia-smi (GPU host)."""
    import torch

    if seconds <= settle_s:
        raise InputError(f"sustain: seconds must exceed settle_s ({settle_s}), got {seconds}")
    fn()
    torch.cuda.synchronize()
    time.sleep(idle_s)
    query = ",".join((*QUERY[:2], power_field(), *QUERY[3:]))
    sampler = subprocess.Popen(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits",
                                "-lms", str(SAMPLE_MS)], stdout=subprocess.PIPE, text=True)
    try:
        start = time.time()
        marks, calls = [(seconds_since_midnight(start), 0)], 0
        while time.time() - start < seconds:
            fn()
            calls += 1
            if calls % sync_every == 0:
                torch.cuda.synchronize()
                marks.append((seconds_since_midnight(time.time()), calls))
    finally:
        sampler.terminate()
    samples = [s for s in map(parse_sample, sampler.communicate()[0].splitlines()) if s]
    marks, samples = past_midnight(marks, samples)
    return summarize(samples, marks, settle_s), samples


def past_midnight(marks: Sequence[tuple[float, int]], samples: Sequence[Sample]):
    """Marks and samples of a load that ran past midnight, on one clock: a reading more than 12 h
    before the first mark belongs to the next day."""
    start = marks[0][0]

    def later(t: float) -> float:
        return t + 86400 if t < start - 43200 else t

    return ([(later(t), calls) for t, calls in marks],
            [Sample(later(s.t_s), s.sm_mhz, s.power_w, s.reasons) for s in samples])


#: the recording of the leave-one-out builds run back to back (EXPERIMENT_LOG seq 107)
ABLATIONS_STEM = "sm90-ablations-sustained"


def sustained_rows(document: dict) -> list[dict]:
    """One row per (shape, variant) of a ``sweep_sm90.py --sustain`` recording: sustained TOPS, its
    ratio to the same shape's default build, and the median clock, power and capped share it ran at."""
    rows = [r for r in document.get("rows", []) if r.get("sustained")]
    default = {r["shape"]: r["tops"] for r in rows if r["variant"] == "default"}
    out = []
    for r in rows:
        run = median_run([LoadSummary(**summary) for summary in r["sustained"]])
        out.append({"shape": r["shape"], "variant": r["variant"], "sustained TOPS": r["tops"],
                    "x default": r["tops"] / default[r["shape"]] if r["shape"] in default else float("nan"),
                    "SM MHz (median)": run.sm_mhz, "W (median)": run.power_w,
                    "samples at the power cap": run.capped_share})
    return out
