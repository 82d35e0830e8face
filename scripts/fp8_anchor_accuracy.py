"""Accuracy against float64 of the FP8 speed anchor (cudnn-fp8) beside ours and the peers, on canonical inputs.

    python3 scripts/fp8_anchor_accuracy.py [--backends cuda-sm90,sage2-sm90,cudnn-fp8,sdpa-cudnn] [--out FILE]

Each canonical input (gaussian, k_outliers at strength 4: the accuracy input of shared/ANCHORS.md, heavy_tails)
at B1 H8 N4096 D128 fp16, non-causal; every backend usable here runs it once, and its output is compared with
exact attention in float64: relative L1 and cosine similarity. A backend that cannot run here is named with why.
The table is what issue 37's anchor asks for next to the bench: how much accuracy the fastest FP8 attention
gives up for its speed (numerics aside in the bench, not here).
"""

from __future__ import annotations

import argparse
import json
import sys

import torch

from sagelib import backends, inputs
from sagelib.inputs import Shape
from sagelib.records.datafile import utc_stamp
from sagelib.records.provenance import environment_or_reason

INPUTS = ("gaussian", "k_outliers", "heavy_tails")


def exact(q, k, v):
    return torch.nn.functional.scaled_dot_product_attention(q.double(), k.double(), v.double())


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="cuda-sm90,sage2-sm90,cudnn-fp8,sdpa-cudnn")
    parser.add_argument("--out", help="write the rows as JSON here")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("fp8_anchor_accuracy: needs a CUDA GPU; torch sees none (nothing measured)", file=sys.stderr)
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
    if args.out:
        document = {"schema": "sagelib.fp8-anchor-accuracy/1", "created_utc": utc_stamp(),
                    "device": torch.cuda.get_device_name(), "shape": "1:8:4096:128", "dtype": "fp16",
                    "environment": environment_or_reason(), "rows": rows, "skipped": skipped,
                    "command": "python3 scripts/fp8_anchor_accuracy.py " + " ".join(argv or sys.argv[1:])}
        with open(args.out, "w") as f:
            json.dump(document, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
