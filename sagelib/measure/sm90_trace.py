"""The Hopper kernel on one prepared problem, for profilers and for its phase trace (``sagelib profile sm90``).

:func:`launch` runs ``kernels/attn_sm90.cu`` on prepared (already quantized) inputs a number of times, or
back to back for some seconds (a steady load for nvidia-smi clock readings, or a program for ncu to
profile with ``--launch-skip``). :func:`record_trace` runs an ``SM90_TRACE`` build, whose consumer and
producer warps stamp clock64 at each phase (``kernels/include/attn_sm90/trace.cuh``); :func:`format_trace`
turns the stamps into the per-block phase timeline of each consumer warpgroup's warp 0 and CTA 0's tile
walk. :mod:`sagelib.studies.block_phases` and :mod:`sagelib.studies.role_split` read printed traces.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

#: The phase points trace.cuh stamps per key block, in order.
POINTS = ("start", "softmax done", "turn", "issued", "complete", "folded")


@dataclass(frozen=True)
class Problem:
    """One profiled problem: shape, causal, and the build (extra -D options, geometry, ring depth)."""

    b: int
    h: int
    n: int
    d: int
    causal: bool = False
    options: tuple[str, ...] = ()
    cta_k: int | None = None
    consumers: int | None = None
    stages: int | None = None

    @property
    def ops(self) -> float:
        return 4 * self.b * self.h * self.n * self.n * self.d / (2 if self.causal else 1)


def prepare(problem: Problem):
    """The prepared inputs and the run options of ``problem`` (on the current CUDA device)."""
    import torch

    from sagelib.backends.kernels import sm90

    q, k, v = (torch.randn(problem.b, problem.h, problem.n, problem.d, device="cuda", dtype=torch.float16)
               for _ in range(3))
    p = sm90.prepare(q, k, v, causal=problem.causal, check_finite=False)
    geometry = sm90.Geometry(problem.consumers, problem.cta_k or 128) if problem.consumers else None
    return p, dict(cta_k=problem.cta_k, geometry=geometry, stages=problem.stages)


def launch(problem: Problem, launches: int = 2, seconds: float = 0.0) -> str | None:
    """Launch the kernel ``launches`` times, then, with ``seconds``, back to back that long; the rate line then."""
    import torch

    from sagelib.backends.kernels import sm90

    p, run_options = prepare(problem)

    def run():
        return sm90.run_attention(p, build_options=problem.options, **run_options)

    for _ in range(launches):
        run()
    torch.cuda.synchronize()
    if not seconds:
        return None
    start = time.time()
    end, count = start + seconds, 0
    while time.time() < end:
        for _ in range(10):
            run()
        torch.cuda.synchronize()
        count += 10
    elapsed = time.time() - start
    return f"{count} launches in {elapsed:.2f} s: {problem.ops * count / elapsed / 1e12:.1f} TOPS"


def record_trace(problem: Problem):
    """The trace (int64, sm90.TRACE_SHAPE, on the CPU) of a warm launch of ``problem``'s SM90_TRACE build."""
    import torch

    from sagelib.backends.kernels import sm90

    p, run_options = prepare(problem)
    trace = torch.zeros(sm90.TRACE_SHAPE, dtype=torch.int64, device="cuda")
    for _ in range(2):  # the second launch is warm
        trace.zero_()
        sm90.run_attention(p, build_options=problem.options + ("-DSM90_TRACE=1",), trace=trace, **run_options)
    torch.cuda.synchronize()
    return trace.cpu()


def format_trace(t) -> str:
    """Per block of warp 0 of each consumer warpgroup: cycles spent in each phase; the median block period; then
    CTA 0's tile walk (:func:`tile_walk_lines`)."""
    t0 = int(t[t > 0].min())
    lines = ["cycles from the first stamp; per block: softmax | wait turn | issue | wgmma wait | fold"]
    for warp in (0, 4):
        lines.append(f"consumer warpgroup {warp // 4}, warp 0:")
        for j in range(2, 12):
            s = [int(x) - t0 for x in t[warp, j]]
            if s[0] < 0:
                break
            lines.append(f"  block {j:2d} start {s[0]:8d}  softmax {s[1] - s[0]:5d} | turn {s[2] - s[1]:5d} | "
                         f"issue {s[3] - s[2]:4d} | wait {s[4] - s[3]:5d} | fold {s[5] - s[4]:4d}")
    steady = t[0, 8:40]
    period = float((steady[1:, 0] - steady[:-1, 0]).float().median())
    lines.append(f"median block period, warp 0: {period:.0f} cycles")
    return "\n".join(lines + tile_walk_lines(t, t0))


def tile_walk_lines(t, t0: int) -> list[str]:
    """CTA 0's first tiles: where a tile's cycles go beside its key blocks (trace.cuh, tile rows).

    A tile is taken (its Q slot waited for, its index decoded) before the previous tile's
    epilogue when the kernel has a second Q slot, so "start" counts from the later of the
    take and the previous tile's end, and "epilogue" includes the next tile's take."""
    from sagelib.backends.kernels import sm90

    rows = t[:, sm90.TRACE_BLOCKS:]
    lines = ["tile walk, cycles; consumer: take | start to first scores | blocks | epilogue | tile end to tile end"]
    for warp in (0, 4):
        lines.append(f"consumer warpgroup {warp // 4}, warp 0:")
        stored = None
        for i in range(rows.shape[1]):
            s = [int(x) for x in rows[warp, i, :5]]
            if s[0] == 0 or s[4] == 0:
                break
            begin = max(s[1], stored) if stored is not None else s[1]
            period = s[4] - stored if stored is not None else s[4] - s[0]
            if not s[2] and not s[3]:  # nothing computed: the tile has no key block, or no row of this warpgroup
                lines.append(f"  tile {i:2d} at {s[0] - t0:9d}  take {s[1] - s[0]:6d} | computed nothing (no key "
                             f"block, or no row in range: its blocks passed) until stored {s[4] - begin:7d} | "
                             f"period {period:7d}")
            else:
                first = s[2] if s[2] else s[3]
                lines.append(f"  tile {i:2d} at {s[0] - t0:9d}  take {s[1] - s[0]:6d} | start {first - begin:5d} | "
                             f"blocks {s[3] - first:7d} | epilogue {s[4] - s[3]:5d} | period {period:7d}")
            stored = s[4]
    producer = rows[sm90.TRACE_PRODUCER]
    lines.append("producer: slot freed | Q issued | first K/V issued | last K/V issued (from the slot's release)")
    for i in range(producer.shape[0]):
        s = [int(x) for x in producer[i, :4]]
        if s[0] == 0:
            break
        lines.append(f"  tile {i:2d} at {s[0] - t0:9d}  Q {s[1] - s[0]:6d} | first K/V {s[2] - s[0]:7d} | "
                     f"last K/V {s[3] - s[0]:7d}")
    return lines
