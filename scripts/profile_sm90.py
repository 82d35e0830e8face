"""One prepared attention problem for profilers: the Hopper kernel launched `--launches` times.

Usage (sm_90 host):
    ncu --clock-control none -k regex:attn_sm90 --launch-skip 1 --launch-count 1 ... \
        python3 scripts/profile_sm90.py --shape 2:32:8192:128
    python3 scripts/profile_sm90.py --seconds 3     # a steady load (for nvidia-smi clock readings)
    python3 scripts/profile_sm90.py --trace         # the consumer warps' phase timeline (SM90_TRACE build)
    python3 scripts/profile_sm90.py --trace --shape 32:32:1024:128   # ... and the cost of each tile change
    python3 scripts/profile_sm90.py --shape 2:32:8192:64 --cta-k 64 --trace   # the three-consumer geometry
    python3 scripts/profile_sm90.py --shape 2:32:8192:64 --consumers 2 --stages 6 --trace   # a geometry not the preset
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from sagelib.backends.kernels import sm90
from sagelib.cuda.build import define_options

POINTS = ("start", "softmax done", "turn", "issued", "complete", "folded")


def print_trace(p, options, run_options: dict) -> int:
    """Per block of warp 0 of each consumer warpgroup: cycles spent in each phase, and the overlap."""
    trace = torch.zeros(sm90.TRACE_SHAPE, dtype=torch.int64, device="cuda")
    for _ in range(2):  # the second launch is warm
        trace.zero_()
        sm90.run_attention(p, build_options=options + ("-DSM90_TRACE=1",), trace=trace, **run_options)
    torch.cuda.synchronize()
    t = trace.cpu()
    t0 = int(t[t > 0].min())
    print("cycles from the first stamp; per block: softmax | wait turn | issue | wgmma wait | fold")
    for warp in (0, 4):
        print(f"consumer warpgroup {warp // 4}, warp 0:")
        for j in range(2, 12):
            s = [int(x) - t0 for x in t[warp, j]]
            if s[0] < 0:
                break
            print(f"  block {j:2d} start {s[0]:8d}  softmax {s[1] - s[0]:5d} | turn {s[2] - s[1]:5d} | "
                  f"issue {s[3] - s[2]:4d} | wait {s[4] - s[3]:5d} | fold {s[5] - s[4]:4d}")
    steady = t[0, 8:40]
    period = float((steady[1:, 0] - steady[:-1, 0]).float().median())
    print(f"median block period, warp 0: {period:.0f} cycles")
    print_tile_walk(t, t0)
    return 0


def print_tile_walk(t, t0: int) -> None:
    """CTA 0's first tiles: where a tile's cycles go beside its key blocks (trace.cuh, tile rows).

    A tile is taken (its Q slot waited for, its index decoded) before the previous tile's
    epilogue when the kernel has a second Q slot, so "start" counts from the later of the
    take and the previous tile's end, and "epilogue" includes the next tile's take."""
    rows = t[:, sm90.TRACE_BLOCKS:]
    print("tile walk, cycles; consumer: take | start to first scores | blocks | epilogue | tile end to tile end")
    for warp in (0, 4):
        print(f"consumer warpgroup {warp // 4}, warp 0:")
        stored = None
        for i in range(rows.shape[1]):
            s = [int(x) for x in rows[warp, i, :5]]
            if s[0] == 0 or s[4] == 0:
                break
            begin = max(s[1], stored) if stored is not None else s[1]
            period = s[4] - stored if stored is not None else s[4] - s[0]
            if not s[2] and not s[3]:  # nothing computed: the tile has no key block, or no row of this warpgroup
                print(f"  tile {i:2d} at {s[0] - t0:9d}  take {s[1] - s[0]:6d} | computed nothing (no key block, "
                      f"or no row in range: its blocks passed) until stored {s[4] - begin:7d} | period {period:7d}")
            else:
                first = s[2] if s[2] else s[3]
                print(f"  tile {i:2d} at {s[0] - t0:9d}  take {s[1] - s[0]:6d} | start {first - begin:5d} | "
                      f"blocks {s[3] - first:7d} | epilogue {s[4] - s[3]:5d} | period {period:7d}")
            stored = s[4]
    producer = rows[sm90.TRACE_PRODUCER]
    print("producer: slot freed | Q issued | first K/V issued | last K/V issued (from the slot's release)")
    for i in range(producer.shape[0]):
        s = [int(x) for x in producer[i, :4]]
        if s[0] == 0:
            break
        print(f"  tile {i:2d} at {s[0] - t0:9d}  Q {s[1] - s[0]:6d} | first K/V {s[2] - s[0]:7d} | "
              f"last K/V {s[3] - s[0]:7d}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="2:32:8192:128", help="B:H:N:D")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--launches", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=0.0, help="keep launching for this long instead")
    parser.add_argument("--define", action="append", default=[], help="a -D option for the kernel build")
    parser.add_argument("--trace", action="store_true", help="print the phase timeline of CTA 0's first tile")
    parser.add_argument("--cta-k", type=int, default=None,
                        help="64: the three-consumer geometry (sm90.geometry_for)")
    parser.add_argument("--consumers", type=int, default=None,
                        help="build Sm90Geometry<consumers, cta_k> instead of the preset's (experiments)")
    parser.add_argument("--stages", type=int, default=None, help="the K/V ring depth (default: the built one)")
    args = parser.parse_args(argv)
    try:
        options = define_options(args.define)
    except ValueError as exc:
        parser.error(str(exc))
    b, h, n, d = (int(x) for x in args.shape.split(":"))
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
    p = sm90.prepare(q, k, v, causal=args.causal, check_finite=False)
    geometry = sm90.Geometry(args.consumers, args.cta_k or 128) if args.consumers else None
    run_options = dict(cta_k=args.cta_k, geometry=geometry, stages=args.stages)
    if args.trace:
        return print_trace(p, options, run_options)
    run = lambda: sm90.run_attention(p, build_options=options, **run_options)  # noqa: E731
    for _ in range(args.launches):
        run()
    torch.cuda.synchronize()
    if args.seconds:
        end, count = time.time() + args.seconds, 0
        start = time.time()
        while time.time() < end:
            for _ in range(10):
                run()
            torch.cuda.synchronize()
            count += 10
        ops = 4 * b * h * n * n * d / (2 if args.causal else 1)
        print(f"{count} launches in {time.time() - start:.2f} s: {ops * count / (time.time() - start) / 1e12:.1f} TOPS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
