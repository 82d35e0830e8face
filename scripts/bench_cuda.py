"""Speed of our CUDA kernels on this GPU: quantizer bandwidth, then attention against the peers.

Usage (GPU host, repository root):
    python3 scripts/bench_cuda.py [--out DIR] [--quick] [--backends a,b,...] [--shapes B:H:N:D,...] [--no-quant]

1. Device copy bandwidth (bytes read + written), the ceiling the quantizers are held to.
2. Quantizers: Q to INT8 (quant_qk.cu) and K smoothing + INT8 K + V to e4m3 (quant_kv.cu),
   and all of quantization together, in TB/s counting the bytes each must read and write.
3. Attention through ``sagelib.measure.bench`` (CUDA events, rotated buffers, checked outputs):
   our backends (cuda, cuda-per-warp-fp16, and on sm_90 cuda-sm90 and its three-consumer
   geometry cuda-sm90-k64), sdpa-flash, sdpa-cudnn and
   sage (where installed), end to end and kernel-only, with ratios.
Ops = 4*B*H*Nq*Nkv*D (half when causal). Writes bench.json and prints the tables.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from sagelib import backends, inputs
from sagelib.commands.bench import CUDA_COOLDOWN_S
from sagelib.measure import bench, quant_bench, timing

DEFAULT_BACKENDS = ("cuda-sm90", "cuda-sm90-k64", "cuda", "cuda-per-warp-fp16", "sage", "sdpa-flash", "sdpa-cudnn")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=".", help="folder for bench.json")
    parser.add_argument("--quick", action="store_true", help="fewer shapes and repetitions")
    parser.add_argument("--quant-only", action="store_true", help="only the copy ceiling and the quantizers")
    parser.add_argument("--no-quant", action="store_true", help="skip the quantizer bandwidth section")
    parser.add_argument("--backends", default=",".join(DEFAULT_BACKENDS),
                        help="comma-separated backends (unavailable ones are reported and skipped)")
    parser.add_argument("--shapes", default=None, help="comma-separated B:H:N:D (default: the issue's shapes)")
    parser.add_argument("--cooldown-s", type=float, default=CUDA_COOLDOWN_S,
                        help=f"idle seconds before each timed case (default {CUDA_COOLDOWN_S:g}: a case right after "
                             "heavy ones otherwise starts under the power cap; EXPERIMENT_LOG seq 104, 182)")
    args = parser.parse_args(argv)
    if not args.cooldown_s >= 0:
        parser.error(f"--cooldown-s: expected 0 or more seconds, got {args.cooldown_s}")
    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing measured", file=sys.stderr)
        return 2
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    command = " ".join(["python3 scripts/bench_cuda.py", *(sys.argv[1:] if argv is None else argv)])
    quantizers = quant_bench.measure(() if args.no_quant else quant_bench.SHAPES, command=command)
    print("\n" + quant_bench.format_rows(quantizers["rows"], quantizers["copy_tb_s"]))

    if args.quant_only:
        (out / "bench_quant.json").write_text(json.dumps(quantizers, indent=1, default=str))
        return 0
    shapes = args.shapes or ("2:32:16384:128,32:32:1024:128,2:32:16384:64" if not args.quick
                             else "2:32:16384:128,32:32:1024:128")
    available = backends.availability()
    names = [n for n in args.backends.split(",") if n]
    for name in names:
        if available.get(name, "unknown backend"):
            print(f"backend {name}: skipped ({available.get(name, 'unknown backend')})")
    names = [n for n in names if available.get(n, "unknown") is None]
    plan = bench.SweepPlan(backends=names, shapes=inputs.parse_shapes(shapes),
                           causal=[False, True], timing=timing.TimingConfig(reps=20 if not args.quick else 10,
                                                                           budget_s=1.5, cooldown_s=args.cooldown_s))
    document = bench.run_sweep(plan, torch.device("cuda"), command="python3 scripts/bench_cuda.py",
                               progress=False)
    document["quantizers"] = {"copy_tb_s": quantizers["copy_tb_s"], "rows": quantizers["rows"]}
    (out / "bench.json").write_text(json.dumps(document, indent=1, default=str))
    print()
    print(bench.format_table(document))
    return 0


if __name__ == "__main__":
    sys.exit(main())
