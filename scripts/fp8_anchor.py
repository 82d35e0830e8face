"""The FP8 speed anchor (cudnn-fp8) beside ours: its accuracy against float64, and its fused graph's time alone.

    python3 scripts/fp8_anchor.py [--backends cuda-sm90,sage2-sm90,cudnn-fp8,sdpa-cudnn] [--no-graph-time] [--out FILE]

Accuracy: each canonical input (gaussian, k_outliers at strength 4: the accuracy input of shared/ANCHORS.md,
heavy_tails) at B1 H8 N4096 D128 fp16, non-causal; every backend usable here runs it once, and its output is
compared with exact attention in float64 (relative L1, cosine). A backend that cannot run here is named with why.

Graph time: cuDNN's fused FP8 graph alone (CudnnFp8.graph_only: operands quantized ahead, O left in e4m3 where
cuDNN cannot write fp16) and, in the same run on the same buffers, cuda-sm90's kernel-only call, timed as the
bench times (CUDA events, rotated buffers) at B2 H32 N16384, D128 and D64, causal and not. On Hopper the bench's
cudnn-fp8 kernel_only adds O's widening to fp16; this is the kernel alone.
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from sagelib import backends, inputs
from sagelib.inputs import Shape, random_qkv
from sagelib.measure.timing import (
    TimingConfig,
    attention_ops,
    buffer_count,
    summarize,
    time_calls,
    tops,
)
from sagelib.records import documents
from sagelib.records.datafile import utc_stamp
from sagelib.records.provenance import environment_or_reason

INPUTS = ("gaussian", "k_outliers", "heavy_tails")


def exact(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double())


def graph_times(timing: TimingConfig) -> list[dict]:
    """cuDNN's FP8 graph alone at the bench's long shapes, and in the same run, on the same buffers, our Hopper
    kernel's kernel-only call where it runs: median ms and TOPS per (kernel, head_dim, causal)."""
    anchor = backends.get("cudnn-fp8")
    kernels = {"cudnn-fp8 graph alone": lambda qkv, causal: anchor.graph_only(*qkv, causal=causal)}
    ours = backends.get("cuda-sm90", require_available=False)
    if ours.unavailable_reason() is None:
        kernels["cuda-sm90 kernel only"] = lambda qkv, causal: ours.kernel_only(*qkv, causal=causal)
    device = torch.device("cuda")
    rows = []
    for head_dim in (128, 64):
        shape = Shape(2, 32, 16384, head_dim)
        per_set = 3 * 2 * shape.batch * shape.heads * shape.seq_q * head_dim
        sets = [random_qkv(shape, torch.float16, device, "HND", seed) for seed in range(buffer_count(per_set, device,
                                                                                                         timing))]
        for causal in (False, True):
            for name, make in kernels.items():
                calls = [make(qkv, causal) for qkv in sets]
                stats = summarize(time_calls(calls, device, timing))
                rows.append({"kernel": name, "shape": f"2:32:16384:{head_dim}", "causal": causal,
                             "median_ms": stats.median_ms, "tops": tops(attention_ops(shape, causal), stats.median_ms)})
                calls.clear()
        sets.clear()
        torch.cuda.empty_cache()
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="cuda-sm90,sage2-sm90,cudnn-fp8,sdpa-cudnn")
    parser.add_argument("--no-graph-time", action="store_true", help="skip timing cuDNN's graph alone")
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("fp8_anchor: needs a CUDA GPU; torch sees none (nothing measured)", file=sys.stderr)
        return 3
    shape = Shape(1, 8, 4096, 128)
    rows, skipped = [], {}
    for name in INPUTS:
        drawn = inputs.make(name, shape=shape, dtype="fp16", device="cuda")
        reference = exact(drawn.q, drawn.k, drawn.v)
        for backend_name in args.backends.split(","):
            backend = backends.get(backend_name, require_available=False)
            reason = backend.unavailable_reason()
            if reason:
                skipped[backend_name] = reason
                continue
            out = backend.attention(drawn.q, drawn.k, drawn.v).double()
            rel_l1 = float((out - reference).abs().sum() / reference.abs().sum())
            cosine = float(torch.nn.functional.cosine_similarity(out.flatten(), reference.flatten(), dim=0))
            rows.append({"input": name, "backend": backend_name, "rel_l1": rel_l1, "cosine": cosine,
                         "input_sha256": drawn.sha256})
    print(f"{'input':<12} {'backend':<12} {'rel L1':>9} {'cosine':>9}")
    for r in rows:
        print(f"{r['input']:<12} {r['backend']:<12} {r['rel_l1']:>9.5f} {r['cosine']:>9.6f}")
    for name, reason in skipped.items():
        print(f"skipped {name}: {reason}")
    graph = [] if args.no_graph_time or "cudnn-fp8" in skipped else graph_times(TimingConfig(reps=20))
    for r in graph:
        print(f"{r['kernel']:<22} B2 H32 N16384 D{r['shape'].split(':')[-1]:<4} "
              f"{'causal' if r['causal'] else 'full  '}  {r['median_ms']:.3f} ms  {r['tops']:.1f} TOPS")
    if args.out:
        document = {"schema": documents.FP8_ANCHOR.id, "created_utc": utc_stamp(),
                    "device": {"name": torch.cuda.get_device_name(),
                               "capability": ".".join(map(str, torch.cuda.get_device_capability()))}, "shape": "1:8:4096:128", "dtype": "fp16",
                    "environment": environment_or_reason(), "rows": rows, "skipped": skipped,
                    "graph_only": graph, "command": "python3 scripts/fp8_anchor.py " + " ".join(argv or sys.argv[1:])}
        with open(args.out, "w") as f:
            json.dump(document, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
