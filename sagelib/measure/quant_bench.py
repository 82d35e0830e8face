"""How fast the quantizers run, held to the card's copy bandwidth.

The quantizers are pure memory traffic, so each is measured in TB/s of the bytes it must read
plus write, against a device-to-device copy timed in the same run (issue 4's target: all of
quantization together at 70% of copy or better). Each call is timed twice: as called from
Python (CUDA events around the call) and as GPU work alone (the same call captured in a CUDA
graph and replayed). Used by `sagelib bench --suite` and notebook 04.
"""

from __future__ import annotations

import torch

from sagelib.backends.kernels import mma, operands, quantizers
from sagelib.contract.quantize import n_k_groups, n_q_groups
from sagelib.measure import bench, timing
from sagelib.measure import recordings as bench_records
from sagelib.records import provenance
from sagelib.records.datafile import utc_stamp

#: The timer, re-exported: A/B scripts import it from here (``from sagelib.measure.quant_bench import time_ms``).
time_ms = timing.time_ms

#: A recording of :func:`measure` (data/results/*.json; notebook 04 shows the newest).
SCHEMA = bench_records.QUANT_SCHEMA
#: The shapes of issue 4's report: B:H:N:D.
SHAPES = ((2, 32, 16384, 128), (32, 32, 1024, 128))


def graph_ms(fn, reps: int = 20) -> float | None:
    """GPU time of ``fn`` alone: captured once in a CUDA graph, replayed (no host overhead)."""
    try:
        return time_ms(timing.replay_of(fn), reps=reps)
    except Exception as exc:  # a capture failure is reported, not fatal
        print(f"  (graph capture failed: {type(exc).__name__}: {exc})")
        return None


def copy_bandwidth() -> float:
    """Device copy of 1 GiB, bytes read + written, in TB/s."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    ms = time_ms(lambda: dst.copy_(src))
    return 2 * src.numel() / (ms * 1e-3) / 1e12


def quantizer_rows(shape: tuple[int, int, int, int]) -> list[dict]:
    """Q alone, K/V alone and all of quantization for fp16 [B, H, N, D] (sm89 preset, per_thread)."""
    b, h, n, d = shape
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
    k += 4 * torch.randn(1, 1, 1, d, device="cuda", dtype=torch.float16)
    elems = b * h * n * d
    g = "per_thread"
    n_pad = -(-n // 64) * 64
    q_scales = 4 * n_q_groups(n, "sm89", g) * b * h
    k_scales = 4 * n_k_groups(n, "sm89", g) * b * h
    rows = []

    def add(name, fn, read, write):
        ms = time_ms(fn)
        gpu = graph_ms(fn)
        rows.append({"shape": f"{b}:{h}:{n}:{d}", "what": name, "ms": ms, "bytes": read + write,
                     "tb_s": (read + write) / (ms * 1e-3) / 1e12, "gpu_ms": gpu,
                     "gpu_tb_s": (read + write) / (gpu * 1e-3) / 1e12 if gpu else None})

    qh = operands.kernel_operand(q, d)
    add("Q -> int8 (quant_qk)", lambda: quantizers.quantize_int8(qh, operands.q_geometry("sm89", g),
                                                             n_q_groups(n, "sm89", g), "triton", "HND"),
        2 * elems, elems + q_scales)
    add("K smooth+int8, V e4m3 (quant_kv)",
        lambda: quantizers.quantize_kv(k, v, preset="sm89", granularity=g, flavour="triton", pv_accum="fp32+fp32",
                                 layout="HND", do_k=True, do_v=True),
        4 * elems, elems + k_scales + b * h * d * n_pad + 2 * b * h * d + 4 * b * h * d)
    add("all quantization (prepare)", lambda: mma.prepare(q, k, v, check_finite=False), 6 * elems,
        2 * elems + q_scales + k_scales + b * h * d * n_pad + 6 * b * h * d)
    return rows


def measure(shapes=SHAPES, *, command: str) -> dict:
    """The copy bandwidth and :func:`quantizer_rows` of every shape, as a :data:`SCHEMA` document."""
    device = torch.device("cuda")
    return {"schema": SCHEMA, "created_utc": utc_stamp(),
            "command": command, "device": bench.device_summary(device),
            "environment": provenance.environment_or_reason(),
            "copy_tb_s": copy_bandwidth(), "rows": [row for shape in shapes for row in quantizer_rows(shape)]}


def format_rows(rows: list[dict], copy_tb_s: float) -> str:
    """The table `sagelib bench --suite` prints: call and GPU times, TB/s, share of copy."""
    lines = [f"device copy bandwidth (read + write): {copy_tb_s:.2f} TB/s",
             "call = the Python call timed with events (host overhead included); "
             "gpu = the same work replayed from a CUDA graph",
             f"{'shape':<16} {'quantizer':<34} {'call ms':>8} {'TB/s':>6} {'gpu ms':>8} {'TB/s':>6} {'of copy':>8}"]
    for r in rows:
        g = r["gpu_ms"]
        gpu = f"{g:8.3f} {r['gpu_tb_s']:6.2f} {r['gpu_tb_s'] / copy_tb_s:8.0%}" if g else f"{'-':>8} {'-':>6} {'-':>8}"
        lines.append(f"{r['shape']:<16} {r['what']:<34} {r['ms']:8.3f} {r['tb_s']:6.2f} {gpu}")
    return "\n".join(lines)
