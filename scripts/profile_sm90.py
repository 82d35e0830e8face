"""One prepared attention problem for profilers: the Hopper kernel launched `--launches` times.

Usage (sm_90 host):
    ncu --clock-control none -k regex:attn_sm90 --launch-skip 1 --launch-count 1 ... \
        python3 scripts/profile_sm90.py --shape 2:32:8192:128
    python3 scripts/profile_sm90.py --seconds 3     # a steady load (for nvidia-smi clock readings)
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from sagelib.cuda import ops_sm90


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="2:32:8192:128", help="B:H:N:D")
    parser.add_argument("--causal", action="store_true")
    parser.add_argument("--launches", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=0.0, help="keep launching for this long instead")
    parser.add_argument("--define", action="append", default=[], help="a -D option for the kernel build")
    args = parser.parse_args(argv)
    b, h, n, d = (int(x) for x in args.shape.split(":"))
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
    p = ops_sm90.prepare(q, k, v, causal=args.causal, check_finite=False)
    options = tuple(f"-D{x}" for x in args.define)
    run = lambda: ops_sm90.run_attention(p, build_options=options)  # noqa: E731
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
