"""Sweep the K/V quantizer's lag (tickets between a stats item and its apply item) on a GPU.

The lag trades L2 residency of the second read (small lag) against apply items waiting for
their head's statistics (large lag). Prints the time and bandwidth per lag and checks that
every lag gives the same bytes as the default. Usage on a GPU host, from the repository root:
    PYTHONPATH=$PWD python3 scripts/sweep_kv_lag.py [--shape B:H:N:D] [--reps 30]
"""

from __future__ import annotations

import argparse
import statistics

import torch

from sagelib.backends.kernels import quantizers
from sagelib.measure import timing


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="2:32:16384:128")
    parser.add_argument("--reps", type=int, default=30)
    args = parser.parse_args()
    b, h, n, d = (int(x) for x in args.shape.split(":"))
    sets = [tuple(torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(2)) for _ in range(3)]
    default_lag = quantizers.kv_lag

    def run(k, v):
        return quantizers.quantize_kv(k, v, preset="sm89", granularity="per_thread", flavour="triton",
                                pv_accum="fp32+fp32", layout="HND", do_k=True, do_v=True)

    reference = run(*sets[0])
    moved = 3 * b * h * n * d * 2  # K and V read (fp16) + K int8 and V e4m3 written
    print(f"{'lag':>28}  {'median ms':>9}  {'TB/s':>5}  same bytes")
    for label, factor in (("items_per_head (minimum)", 0.0), ("+ grid/4", 0.25), ("+ grid/2", 0.5),
                          ("+ grid (default)", 1.0), ("+ 2 grid", 2.0)):
        quantizers.kv_lag = lambda grid, per_head, f=factor: per_head + int(f * grid)  # noqa: E731
        out = run(*sets[0])
        same = all(torch.equal(getattr(out, f).view(torch.uint8), getattr(reference, f).view(torch.uint8))
                   for f in ("k_int8", "k_scale", "km", "v_fp8", "v_scale"))
        calls = [lambda k=k, v=v: run(k, v) for k, v in sets]
        ms = statistics.median(timing.time_calls(calls, torch.device("cuda"), timing.TimingConfig(reps=args.reps)))
        print(f"{label:>28}  {ms:9.3f}  {moved / ms / 1e9:5.2f}  {same}")
    quantizers.kv_lag = default_lag
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
