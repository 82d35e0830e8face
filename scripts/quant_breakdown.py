"""Time the Hopper backend's call pass by pass and print what each fusion could save at most (sm_90 GPU).

Usage (repository root):
    python3 scripts/quant_breakdown.py [--shapes 32:32:1024:128,2:32:16384:128] [--rounds 5] [--out FILE.json]

Per shape (fp16, HND, non-causal, the sm90 preset's per_thread quantizers): cuDNN's SDPA call, the
cuda-sm90 call end to end, its kernel alone, and the quantization passes (Q; K alone; V alone; K and
V in one launch, as the call runs them). Each call is timed in every round, the rounds in rotated
order, all in one process; the median of the round medians is kept. Then sagelib.studies.quant_breakdown's
ceilings: the call with each pass taken away as if its fusion were free (upper bounds: its
docstring says why).
"""

from __future__ import annotations

import argparse
import sys

import torch

from sagelib import inputs
from sagelib.measure import bench
from sagelib.measure import recordings as bench_records
from sagelib.records.datafile import utc_stamp
from sagelib.studies import quant_breakdown


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="32:32:1024:128,2:32:16384:128,2:32:16384:64",
                        help="B:H:N:D,... (default: the issue's N=1024 shape and the two N=16384 ones)")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--out", default=None, help="also write the rows as JSON")
    args = parser.parse_args(argv)
    command = "python3 scripts/quant_breakdown.py " + " ".join(sys.argv[1:] if argv is None else argv)
    if args.rounds < 1:
        parser.error(f"--rounds: expected a whole number of 1 or more, got {args.rounds}")
    try:
        shapes = inputs.parse_shapes(args.shapes)
    except ValueError as exc:
        parser.error(str(exc))
    reason = quant_breakdown.unavailable_reason()
    if reason:
        print(f"nothing measured: {reason}", file=sys.stderr)
        return 2
    rows = []
    for shape in shapes:
        row = quant_breakdown.measure(shape, args.rounds)
        print(quant_breakdown.format_table(row["shape"], quant_breakdown.PassTimes(**row["times_ms"])), flush=True)
        rows.append(row)
    if args.out:
        bench_records.write_json({"schema": quant_breakdown.SCHEMA, "created_utc": utc_stamp(),
                                  "device": bench.device_summary(torch.device("cuda")), "command": command,
                                  "rows": rows}, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
