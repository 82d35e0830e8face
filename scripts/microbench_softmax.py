"""The Hopper kernel's softmax step alone, at 1 to 4 warps per scheduler (any CUDA GPU, sm_89+).

Usage (repository root):  python3 scripts/microbench_softmax.py [--iters N]

kernels/microbench_softmax.cu runs sm90_online_softmax (one 64 x 128 tile per warpgroup:
64 scores per thread) in a loop on one CTA per SM. Printed per configuration: SM cycles
per step (the time the W warps of a scheduler each take for one tile step, together) and
per warp-step (that divided by W: the throughput when W warps share a scheduler). The
attention kernel runs 2 consumer warps per scheduler; its traced softmax phase
(scripts/profile_sm90.py --trace) can be read against these.

    python3 scripts/microbench_softmax.py --beside [--out FILE.json]

--define MACRO=V (repeatable) builds either kernel with an experiment's switch in the softmax step,
e.g. `--define SM90_ABLATE_PACK=1` (log seq 180-181 used it for the speculative row max, tree 18309d8).

kernels/microbench_softmax_beside.cu (sm_90a) runs the same step on one warpgroup while a
second warpgroup runs back-to-back tensor-core batches (Q.K^T, P.V, both as the attention
kernel issues them, with and without the fold), the fold alone, or two variations of a batch
(sagelib.studies.softmax_beside.KINDS). Printed per kind: the softmax step's cycles, their ratio to the
step with nothing beside it, and the batches the other warpgroup completed per 1,000 cycles,
beside the softmax and with the softmax warpgroup asleep.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

from sagelib.cuda.build import define_options, load_function
from sagelib.cuda.launch import I32, KernelLaunchError, launch
from sagelib.studies import softmax_beside


def print_beside(rows: list[dict]) -> None:
    print(f"{'beside the softmax warpgroup':<38} {'cycles/step':>11} {'x alone':>8} {'batches/kcycle':>15} "
          f"{'(softmax asleep)':>16}")
    for r in rows:
        print(f"{r['kind']:<38} {r['cycles_per_step']:>11.0f} {r['over_alone']:>8.3f} {r['batches_per_kcycle']:>15.2f} "
              f"{r['batches_per_kcycle_alone']:>16.2f}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iters", type=int, default=2000)
    parser.add_argument("--beside", action="store_true", help="the step beside another warpgroup's work (sm_90)")
    parser.add_argument("--out", type=Path, default=None, help="with --beside: also write the rows as JSON")
    parser.add_argument("--softmax-warpgroups", type=int, default=1, choices=(1, 2),
                        help="with --beside: softmax warpgroups side by side (2: two warps per scheduler)")
    parser.add_argument("--define", action="append", default=[], metavar="MACRO=V",
                        help="a -D option for the kernel build (repeatable)")
    args = parser.parse_args(argv)
    try:
        options = define_options(args.define)
    except ValueError as exc:
        parser.error(str(exc))
    if args.iters < 1:
        parser.error(f"--iters: expected at least 1 step, got {args.iters}")
    if not torch.cuda.is_available():
        print("no CUDA GPU: nothing measured", file=sys.stderr)
        return 2
    if args.beside:
        from sagelib.backends.kernels import sm90

        reason = sm90.unavailable_reason()
        if reason:
            print(f"--beside {reason}: nothing measured", file=sys.stderr)
            return 2
        rows = softmax_beside.measure(args.iters, args.softmax_warpgroups, options)
        print_beside(rows)
        if args.out:
            command = (f"python3 scripts/microbench_softmax.py --beside --iters {args.iters} "
                       f"--softmax-warpgroups {args.softmax_warpgroups}"
                       + "".join(f" --define {x}" for x in args.define))
            args.out.write_text(json.dumps({"schema": softmax_beside.SCHEMA, "command": command,
                                            "options": list(options), "softmax_warpgroups": args.softmax_warpgroups,
                                            "gpu": torch.cuda.get_device_name(0), "runs": [rows]}, indent=1) + "\n")
        return 0
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    fn = load_function("microbench_softmax.cu", "bench_sm90_softmax", options=options)
    print(f"{'warps/scheduler':>15} {'threads':>8} {'cycles/step':>12} {'cycles/warp-step':>17}")
    for warps_per_scheduler in (1, 2, 3, 4):
        threads = 128 * warps_per_scheduler
        cycles = torch.zeros(sms, dtype=torch.int64, device="cuda")
        sink = torch.empty(sms * threads, dtype=torch.float32, device="cuda")
        try:
            for iters in (10, args.iters):  # the first launch warms up (and builds)
                launch(fn, (sms, 1, 1), (threads, 1, 1), (I32(iters), cycles, sink), name="bench_sm90_softmax")
        except KernelLaunchError as exc:  # e.g. a --define build needing more registers than 512 threads get
            print(f"{warps_per_scheduler:>15} {threads:>8} did not launch: {exc.__cause__ or exc}")
            continue
        torch.cuda.synchronize()
        per_step = statistics.median(cycles.tolist()) / args.iters
        print(f"{warps_per_scheduler:>15} {threads:>8} {per_step:>12.0f} {per_step / warps_per_scheduler:>17.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
