"""Timing GPU work so the numbers can be trusted: CUDA events (or a CPU clock) around calls on rotated
buffers, CUDA-graph replays, robust statistics, and the operation counts that turn a time into TOPS.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass
from typing import Any, Callable, Sequence

import torch

from sagelib.errors import InputError
from sagelib.inputs import Shape


def attention_ops(shape: Shape, causal: bool) -> int:
    """Operations of one attention forward: 4*B*H*N_q*N_kv*D (two GEMMs), half when causal.

    The halving is the convention the peers publish with (FlashAttention, SageAttention); it is
    exact only in the limit of long sequences, and is used as a convention, not a count of MACs.
    """
    ops = 4 * shape.batch * shape.heads * shape.seq_q * shape.seq_kv * shape.head_dim
    return ops // 2 if causal else ops


def tops(ops: int, ms: float) -> float:
    """Tera-operations per second for ``ops`` done in ``ms`` milliseconds."""
    if not ms > 0:
        raise InputError(f"tops: ms must be positive, got {ms!r}")
    return ops / (ms * 1e-3) / 1e12


@dataclass(frozen=True)
class TimingStats:
    """Per-repetition times in milliseconds, summarised."""

    median_ms: float
    q1_ms: float
    q3_ms: float
    iqr_ms: float
    min_ms: float
    max_ms: float
    mean_ms: float
    reps: int


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) of an already sorted sequence."""
    position = (len(sorted_values) - 1) * q
    lo = math.floor(position)
    hi = math.ceil(position)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (position - lo)


def summarize(times_ms: Sequence[float]) -> TimingStats:
    """Median, quartiles and IQR of repetition times; a ValueError for none or non-positive ones."""
    values = sorted(float(t) for t in times_ms)
    if not values:
        raise InputError("summarize: times_ms is empty; time at least one repetition")
    if not all(math.isfinite(t) and t >= 0 for t in values):
        raise InputError(f"summarize: times must be finite and non-negative, got {values[:5]}...")
    q1, median, q3 = (_quantile(values, q) for q in (0.25, 0.5, 0.75))
    return TimingStats(
        median_ms=median, q1_ms=q1, q3_ms=q3, iqr_ms=q3 - q1, min_ms=values[0],
        max_ms=values[-1], mean_ms=sum(values) / len(values), reps=len(values),
    )


@dataclass(frozen=True)
class TimingConfig:
    """How hard to time one case. ``budget_s`` caps repetitions for slow cases."""

    warmup: int = 5
    reps: int = 30
    min_reps: int = 5
    budget_s: float = 2.0
    #: The rotated input sets together hold at least this many times the L2 size.
    l2_multiple: float = 2.0
    max_buffers: int = 8
    #: Idle seconds before each timed set of calls. Under sustained load the H200 holds its power cap by lowering
    #: the SM clock (1,500-1,600 MHz after 20 s, against 1,980), and a case timed right after heavy ones inherits
    #: that: the N=1024 call measured 18% slower after 20 s of cuDNN at N=16384 than cold (EXPERIMENT_LOG seq 104).
    cooldown_s: float = 0.0

    def __post_init__(self):
        for name in ("warmup", "reps", "min_reps", "max_buffers"):
            if getattr(self, name) < (0 if name == "warmup" else 1):
                raise InputError(f"TimingConfig: {name} must be positive, got {getattr(self, name)}")
        if not self.cooldown_s >= 0:
            raise InputError(f"TimingConfig: cooldown_s must be 0 or more seconds, got {self.cooldown_s!r}")
        if self.min_reps > self.reps:
            raise InputError(f"TimingConfig: min_reps ({self.min_reps}) exceeds reps ({self.reps})")


def timer_name(device: torch.device) -> str:
    return "cuda-events" if device.type == "cuda" else "cpu-wall-clock"


def replay_of(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` captured once in a CUDA graph: the graph's replay, which runs the same launches without the host
    (time it for a short call's GPU time alone). ``fn`` runs once first, outside the capture.

    The replay holds ``fn``, and so the tensors it closes over: the graph reads their memory by
    address, and a replay after they were freed read whatever took their place (seq 133's first
    driver kept only ``graph.replay`` and its K/V replays faulted).
    """
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()

    def replay(graph=graph, fn=fn):  # fn: held for its inputs, never called again
        graph.replay()
    return replay


def time_calls(calls: Sequence[Callable[[], Any]], device: torch.device, config: TimingConfig) -> list[float]:
    """Time ``calls[i % len(calls)]`` for i in range(reps) after ``config.cooldown_s`` idle and a warm-up;
    milliseconds each.

    The number of repetitions is ``config.reps``, reduced (not below ``min_reps``) when the
    warm-up shows they would take longer than ``config.budget_s``.
    """
    if not calls:
        raise InputError("time_calls: calls is empty; pass one closure per input buffer")
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if config.cooldown_s > 0:
        sync()
        time.sleep(config.cooldown_s)
    start = time.perf_counter()
    for i in range(max(config.warmup, 1)):
        calls[i % len(calls)]()
    sync()
    per_call_s = (time.perf_counter() - start) / max(config.warmup, 1)
    reps = config.reps
    if per_call_s > 0:
        reps = max(config.min_reps, min(config.reps, int(config.budget_s / per_call_s)))

    if device.type == "cuda":
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for i in range(reps):
            starts[i].record()
            calls[i % len(calls)]()
            ends[i].record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]

    times = []
    for i in range(reps):
        t0 = time.perf_counter()
        calls[i % len(calls)]()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def time_ms(fn: Callable[[], Any], reps: int = 20, warmup: int = 3) -> float:
    """GPU time of one call of ``fn`` in milliseconds: the median of exactly ``reps`` CUDA-event timings after
    ``warmup`` calls, through :func:`time_calls` (``min_reps = reps``, so the budget never cuts them).

    For quick A/B scripts that time one ready closure on the current CUDA device: no L2 rotation, no
    cooldown, no output check (:func:`bench_case` does those). The median is :func:`summarize`'s, the mean of
    the two middle timings when ``reps`` is even. Time ``replay_of(fn)`` for GPU time without host overhead.
    """
    config = TimingConfig(warmup=warmup, reps=reps, min_reps=reps)
    return summarize(time_calls([fn], torch.device("cuda"), config)).median_ms


def l2_bytes(device: torch.device) -> int:
    """The L2 size of a CUDA device (0 on CPU, where rotation still uses two buffers)."""
    if device.type != "cuda":
        return 0
    return int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0))


def buffer_count(bytes_per_set: int, device: torch.device, config: TimingConfig) -> int:
    """How many input sets to rotate: at least 2, enough to exceed ``l2_multiple`` x L2."""
    target = config.l2_multiple * l2_bytes(device)
    needed = math.ceil(target / max(bytes_per_set, 1)) if target else 2
    return max(2, min(config.max_buffers, needed))
