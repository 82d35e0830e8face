"""One K/V quantization problem for profilers: quant_kv.cu launched `--launches` times.

Usage (GPU host, repository root):
    SAGELIB_KERNEL_LINEINFO=1 ncu --set full --import-source yes -k regex:quant_kv --launch-skip 2 -c 1 \
        -o quant_kv python3 scripts/profile_quant_kv.py --shape 2:32:16384:128
Same inputs as the quantizer rows of scripts/bench_cuda.py (K with a per-channel offset to smooth).
"""

from __future__ import annotations

import argparse
import sys

import torch

from sagelib.backends.kernels import quantizers


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", default="2:32:16384:128", help="B:H:N:D")
    parser.add_argument("--launches", type=int, default=3)
    args = parser.parse_args(argv)
    b, h, n, d = (int(x) for x in args.shape.split(":"))
    if not torch.cuda.is_available():
        print("needs a CUDA GPU: torch sees none on this machine", file=sys.stderr)
        return 2
    k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(2))
    k += 4 * torch.randn(1, 1, 1, d, device="cuda", dtype=torch.float16)
    for _ in range(args.launches):
        quantizers.quantize_kv(k, v, preset="sm89", granularity="per_thread", flavour="triton", pv_accum="fp32+fp32",
                         layout="HND", do_k=True, do_v=True)
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    sys.exit(main())
