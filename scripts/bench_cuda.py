"""Speed of our CUDA kernels on this GPU: quantizer bandwidth, then attention against the peers.

Usage (GPU host, repository root):
    python3 scripts/bench_cuda.py [--out DIR] [--quick] [--backends a,b,...] [--shapes B:H:N:D,...] [--no-quant]

1. Device copy bandwidth (bytes read + written), the ceiling the quantizers are held to.
2. Quantizers: Q to INT8 (quant_qk.cu) and K smoothing + INT8 K + V to e4m3 (quant_kv.cu),
   and all of quantization together, in TB/s counting the bytes each must read and write.
3. Attention through ``sagelib.bench`` (CUDA events, rotated buffers, checked outputs):
   our backends (cuda, cuda-per-warp-fp16, and cuda-sm90 on sm_90), sdpa-flash, sdpa-cudnn and
   sage (where installed), end to end and kernel-only, with ratios.
Ops = 4*B*H*Nq*Nkv*D (half when causal). Writes bench.json and prints the tables.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from sagelib import backends, bench
from sagelib.cuda import ops


DEFAULT_BACKENDS = ("cuda-sm90", "cuda", "cuda-per-warp-fp16", "sage", "sdpa-flash", "sdpa-cudnn")


def _time_ms(fn, reps=20, warmup=3) -> float:
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
    for s, e in zip(starts, ends):
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    times = sorted(s.elapsed_time(e) for s, e in zip(starts, ends))
    return times[len(times) // 2]


def _graph_ms(fn, reps=20) -> float | None:
    """GPU time of ``fn`` alone: captured once in a CUDA graph, replayed (no host overhead)."""
    try:
        fn()
        torch.cuda.synchronize()
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            fn()
        return _time_ms(graph.replay, reps=reps)
    except Exception as exc:  # a capture failure is reported, not fatal
        print(f"  (graph capture failed: {type(exc).__name__}: {exc})")
        return None


def copy_bandwidth() -> float:
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda").random_()
    dst = torch.empty_like(src)
    ms = _time_ms(lambda: dst.copy_(src))
    return 2 * src.numel() / (ms * 1e-3) / 1e12


def quantizer_rows(shape: tuple[int, int, int, int]) -> list[dict]:
    b, h, n, d = shape
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
    k += 4 * torch.randn(1, 1, 1, d, device="cuda", dtype=torch.float16)
    elems = b * h * n * d
    g = "per_thread"
    n_pad = -(-n // 64) * 64
    q_scales = 4 * ops.n_q_groups(n, "sm89", g) * b * h
    k_scales = 4 * ops.n_k_groups(n, "sm89", g) * b * h
    rows = []

    def add(name, fn, read, write):
        ms = _time_ms(fn)
        gpu_ms = _graph_ms(fn)
        rows.append({"shape": f"{b}:{h}:{n}:{d}", "what": name, "ms": ms, "bytes": read + write,
                     "tb_s": (read + write) / (ms * 1e-3) / 1e12, "gpu_ms": gpu_ms,
                     "gpu_tb_s": (read + write) / (gpu_ms * 1e-3) / 1e12 if gpu_ms else None})

    qh = ops._prepared(q, d)
    add("Q -> int8 (quant_qk)", lambda: ops._quantize_int8(qh, ops.q_geometry("sm89", g),
                                                             ops.n_q_groups(n, "sm89", g), "triton", "HND"),
        2 * elems, elems + q_scales)
    add("K smooth+int8, V e4m3 (quant_kv)",
        lambda: ops._quantize_kv(k, v, preset="sm89", granularity=g, flavour="triton", pv_accum="fp32+fp32",
                                 layout="HND", do_k=True, do_v=True),
        4 * elems, elems + k_scales + b * h * d * n_pad + 2 * b * h * d + 4 * b * h * d)
    add("all quantization (prepare)", lambda: ops.prepare(q, k, v, check_finite=False), 6 * elems,
        2 * elems + q_scales + k_scales + b * h * d * n_pad + 6 * b * h * d)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=".", help="folder for bench.json")
    parser.add_argument("--quick", action="store_true", help="fewer shapes and repetitions")
    parser.add_argument("--quant-only", action="store_true", help="only the copy ceiling and the quantizers")
    parser.add_argument("--no-quant", action="store_true", help="skip the quantizer bandwidth section")
    parser.add_argument("--backends", default=",".join(DEFAULT_BACKENDS),
                        help="comma-separated backends (unavailable ones are reported and skipped)")
    parser.add_argument("--shapes", default=None, help="comma-separated B:H:N:D (default: the issue's shapes)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing measured", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    copy = copy_bandwidth()
    quant = [] if args.no_quant else quantizer_rows((2, 32, 16384, 128)) + quantizer_rows((32, 32, 1024, 128))
    print(f"\ndevice copy bandwidth (read + write): {copy:.2f} TB/s")
    print("call = the Python call timed with events (host overhead included); "
          "gpu = the same work replayed from a CUDA graph")
    print(f"{'shape':<16} {'quantizer':<34} {'call ms':>8} {'TB/s':>6} {'gpu ms':>8} {'TB/s':>6} {'of copy':>8}")
    for r in quant:
        g = r["gpu_ms"]
        gpu = f"{g:8.3f} {r['gpu_tb_s']:6.2f} {r['gpu_tb_s'] / copy:8.0%}" if g else f"{'-':>8} {'-':>6} {'-':>8}"
        print(f"{r['shape']:<16} {r['what']:<34} {r['ms']:8.3f} {r['tb_s']:6.2f} {gpu}")

    if args.quant_only:
        (out / "bench_quant.json").write_text(json.dumps({"copy_tb_s": copy, "rows": quant}, indent=1))
        return 0
    shapes = args.shapes or ("2:32:16384:128,32:32:1024:128,2:32:16384:64" if not args.quick
                             else "2:32:16384:128,32:32:1024:128")
    available = backends.availability()
    names = [n for n in args.backends.split(",") if n]
    for name in names:
        if available.get(name, "unknown backend"):
            print(f"backend {name}: skipped ({available.get(name, 'unknown backend')})")
    names = [n for n in names if available.get(n, "unknown") is None]
    plan = bench.SweepPlan(backends=names, shapes=bench.parse_shapes(shapes),
                           causal=[False, True], timing=bench.TimingConfig(reps=20 if not args.quick else 10,
                                                                           budget_s=1.5))
    document = bench.run_sweep(plan, torch.device("cuda"), command="python3 scripts/bench_cuda.py",
                               progress=False)
    document["quantizers"] = {"copy_tb_s": copy, "rows": quant}
    (out / "bench.json").write_text(json.dumps(document, indent=1, default=str))
    print()
    print(bench.format_table(document))
    return 0


if __name__ == "__main__":
    sys.exit(main())
