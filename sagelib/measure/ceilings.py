"""The card's measured ceilings: what an attention kernel's TOPS are a fraction of.

Datasheet rates are leads, not ceilings: the harness measures, on the card it runs on,

* ``int8_gemm``: ``torch._int_mm`` (cuBLASLt int8 x int8 -> int32), the rate Q.K^T could reach;
* ``fp8_gemm``: ``torch._scaled_mm`` with e4m3 operands, the rate P.V could reach;
* ``bf16_gemm``: a bf16 matmul, the rate the fp16/bf16 peers (SDPA) could reach;
* ``copy``: a device-to-device copy, counting bytes read plus bytes written, the bound of the
  quantizers and of any memory-bound pass.

Each is timed like an attention case (:func:`sagelib.measure.bench.time_calls`: events, warm-up,
median of many repetitions) on fresh random operands rotated across two sets so a repetition
does not find its inputs in L2. A ceiling that cannot be measured here (no GPU, an op the build
lacks) is recorded with ``value`` None and the ``reason``, never guessed.
"""

from __future__ import annotations

import dataclasses
from typing import Callable

import torch

from sagelib.measure.timing import TimingConfig, summarize, time_calls, timer_name

CEILING_TIMING = TimingConfig(warmup=3, reps=20, min_reps=5, budget_s=1.0)


@dataclasses.dataclass
class Ceiling:
    name: str
    value: float | None
    unit: str
    what: str
    timer: str
    stats: dict | None = None
    reason: str | None = None


def _rand(shape, dtype, device, generator):
    if dtype == torch.int8:
        return torch.randint(-127, 128, shape, generator=generator, device=device, dtype=torch.int8)
    return torch.randn(shape, generator=generator, device=device, dtype=torch.float32).to(dtype)


def _measure(name, unit, what, device, timing, make_calls: Callable[[], tuple[list, float]]) -> Ceiling:
    """``make_calls`` returns (closures, work per call); value = work / median seconds."""
    try:
        calls, work = make_calls()
        for call in calls:  # the op must run here at all before it is timed
            call()
        stats = summarize(time_calls(calls, device, timing))
        value = work / (stats.median_ms * 1e-3)
        return Ceiling(name, value, unit, what, timer_name(device), dataclasses.asdict(stats))
    except Exception as exc:  # a missing op or kernel is a finding, not a crash
        return Ceiling(name, None, unit, what, timer_name(device), reason=f"{type(exc).__name__}: {exc}")
    finally:
        if device.type == "cuda":
            torch.cuda.empty_cache()


def measure_ceilings(device: torch.device, *, gemm_size: int = 8192, copy_bytes: int = 2 << 30,
                     timing: TimingConfig = CEILING_TIMING, seed: int = 0) -> dict[str, dict]:
    """Measure every ceiling on ``device``; name -> :class:`Ceiling` as a dict (JSON-ready)."""
    g = torch.Generator(device=device)
    g.manual_seed(seed)
    m = n = k = gemm_size
    gemm_ops = 2 * m * n * k / 1e12  # tera-operations per call

    def int8_gemm():
        # B column-major ("TN"), the layout cuBLASLt's fast int8 kernels take; a row-major B ran
        # at 128 TOPS instead on an H200 (971 column-major, 2026-11-29), a layout penalty, not the card.
        sets = [(_rand((m, k), torch.int8, device, g), _rand((n, k), torch.int8, device, g).t()) for _ in range(2)]
        return [lambda a=a, b=b: torch._int_mm(a, b) for a, b in sets], gemm_ops

    def fp8_gemm():
        one = torch.ones((), device=device, dtype=torch.float32)
        sets = []
        for _ in range(2):
            a = _rand((m, k), torch.float8_e4m3fn, device, g)
            b = _rand((n, k), torch.float8_e4m3fn, device, g).t()  # column-major, as cuBLASLt wants
            sets.append((a, b))
        return [lambda a=a, b=b: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
                for a, b in sets], gemm_ops

    def bf16_gemm():
        sets = [(_rand((m, k), torch.bfloat16, device, g), _rand((k, n), torch.bfloat16, device, g)) for _ in range(2)]
        return [lambda a=a, b=b: a @ b for a, b in sets], gemm_ops

    def copy():
        elements = copy_bytes // 2
        src = [_rand((elements,), torch.float16, device, g) for _ in range(2)]
        dst = torch.empty_like(src[0])
        return [lambda s=s: dst.copy_(s) for s in src], 2 * copy_bytes / 1e12  # TB read + written

    shape = f"{m}x{n}x{k}"
    results = [
        _measure("int8_gemm", "TOPS", f"torch._int_mm int8 {shape} (B column-major) -> int32",
                 device, timing, int8_gemm),
        _measure("fp8_gemm", "TOPS", f"torch._scaled_mm e4m3 {shape} -> bf16", device, timing, fp8_gemm),
        _measure("bf16_gemm", "TOPS", f"bf16 matmul {shape}", device, timing, bf16_gemm),
        _measure("copy", "TB/s", f"device copy of {copy_bytes / 2**30:.2g} GiB, bytes read + written",
                 device, timing, copy),
    ]
    return {c.name: dataclasses.asdict(c) for c in results}


def format_ceilings(ceilings: dict[str, dict]) -> str:
    lines = []
    for name, c in ceilings.items():
        if c.get("value") is None:
            lines.append(f"{name:10s} not measured: {c.get('reason')}")
        else:
            stats = c.get("stats") or {}
            spread = (f"; IQR {stats['iqr_ms'] / stats['median_ms'] * 100:.1f}% of median"
                      if stats.get("median_ms") else "")
            lines.append(f"{name:10s} {c['value']:8.1f} {c.get('unit', ''):5s} "
                         f"({c.get('what', '?')}{spread}, {c.get('timer', '?')})")
    return "\n".join(lines)


def int8_row_major_b(device: torch.device, size: int = 8192) -> dict:
    """torch._int_mm with a row-major B (cuBLAS's int8 GEMM prefers B column-major, as measure_ceilings times it):
    the TOPS and timing statistics of one ``size``-cubed GEMM, for comparison with the int8 ceiling."""
    g = torch.Generator(device=device)
    g.manual_seed(1)
    a, b = _rand((size, size), torch.int8, device, g), _rand((size, size), torch.int8, device, g)
    stats = summarize(time_calls([lambda: torch._int_mm(a, b)], device,
                                 TimingConfig(warmup=3, reps=20, min_reps=5, budget_s=1)))
    return {"tops": 2 * size**3 / (stats.median_ms * 1e-3) / 1e12, "stats": stats.__dict__}
