"""Time the Hopper backend's call pass by pass and print what each fusion could save at most (sm_90 GPU).

Usage (repository root):
    python3 scripts/quant_breakdown.py [--shapes 32:32:1024:128,2:32:16384:128] [--rounds 5] [--out FILE.json]

Per shape (fp16, HND, non-causal, the sm90 preset's per_thread quantizers): cuDNN's SDPA call, the
cuda-sm90 call end to end, its kernel alone, and the quantization passes (Q; K alone; V alone; K and
V in one launch, as the call runs them). Each call is timed in every round, the rounds in rotated
order, all in one process; the median of the round medians is kept. Then sagelib.quant_breakdown's
ceilings: the call with each pass taken away as if its fusion were free (upper bounds: its
docstring says why).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from datetime import datetime, timezone

import torch

from sagelib import backends, bench, quant_breakdown
from sagelib.cuda import ops, ops_sm90


def pass_calls(q, k, v) -> dict:
    """One closure per timed call of quant_breakdown.PASSES, on one input set (fp16 HND)."""
    gran, preset = "per_thread", "sm90"
    flavour = ops._flavour(None, preset, gran)
    width = ops._kernel_head_dim(q.shape[-1])
    qh, kh, vh = (ops._prepared(x, width) for x in (q, k, v))
    n_groups = ops.n_q_groups(q.shape[2], preset, gran)

    def kv(do_k, do_v):
        return lambda: ops._quantize_kv(kh, vh, preset=preset, granularity=gran, flavour=flavour,
                                        pv_accum="fp32+fp32", layout="HND", do_k=do_k, do_v=do_v, permute_v=True)

    cudnn, sm90 = backends.get("sdpa-cudnn"), backends.get("cuda-sm90")
    return {"cudnn": lambda: cudnn.attention(q, k, v), "call": lambda: sm90.attention(q, k, v),
            "kernel": sm90.kernel_only(q, k, v),
            "q": lambda: ops._quantize_int8(qh, ops.q_geometry(preset, gran), n_groups, flavour, "HND"),
            "k": kv(True, False), "v": kv(False, True), "kv": kv(True, True)}


def time_shape(shape: bench.Shape, rounds: int, seed: int = 0) -> dict[str, list[float]]:
    """Round medians (ms) of every call at ``shape``, rounds in rotated order."""
    dev = torch.device("cuda")
    torch.manual_seed(seed)
    q = torch.randn(shape.batch, shape.heads, shape.seq_q, shape.head_dim, device=dev, dtype=torch.float16)
    k, v = (torch.randn(shape.batch, shape.heads, shape.seq_kv, shape.head_dim, device=dev, dtype=torch.float16)
            for _ in range(2))
    calls = pass_calls(q, k, v)
    names = list(quant_breakdown.PASSES)
    config = bench.TimingConfig(warmup=3, reps=20, min_reps=5, budget_s=1.0)
    medians = {name: [] for name in names}
    for r in range(rounds):
        for i in range(len(names)):
            name = names[(i + r) % len(names)]
            medians[name].append(statistics.median(bench.time_calls([calls[name]], dev, config)))
    return medians


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
        shapes = bench.parse_shapes(args.shapes)
    except ValueError as exc:
        parser.error(str(exc))
    reason = ops_sm90.unavailable_reason() or backends.get("sdpa-cudnn", require_available=False).unavailable_reason()
    if reason:
        print(f"nothing measured: {reason}", file=sys.stderr)
        return 2
    rows = []
    for shape in shapes:
        rounds = time_shape(shape, args.rounds)
        times = quant_breakdown.PassTimes(**{name: statistics.median(ms) for name, ms in rounds.items()})
        print(quant_breakdown.format_table(shape.label, times), flush=True)
        rows.append({"shape": shape.label, "times_ms": times.__dict__, "round_ms": rounds,
                     "ceilings": [c.__dict__ for c in quant_breakdown.ceilings(times)]})
    if args.out:
        created = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
        with open(args.out, "w") as f:
            json.dump({"schema": quant_breakdown.SCHEMA, "created_utc": created,
                       "device": bench.device_summary(torch.device("cuda")),
                       "command": command,
                       "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
