"""Small runs of every CUDA kernel, for compute-sanitizer (scripts/sanitize.sh).

Each case is small (ragged N, GQA, both head dims, causal both alignments, both
layouts) so memcheck and racecheck finish in seconds. Exits non-zero if any
output is non-finite.
"""

import sys

import torch

from sagelib.backends.kernels import mma, quantizers, sm90

CASES = [  # (n_q, n_kv, d, layout, h_q, h_kv, causal, alignment, granularity, pv_accum, dtype)
    (17, 17, 64, "HND", 2, 1, True, "bottom_right", "per_thread", "fp32+fp32", torch.float16),
    (130, 70, 128, "NHD", 2, 2, True, "bottom_right", "per_warp", "fp32+fp16", torch.bfloat16),
    (70, 130, 128, "HND", 4, 2, True, "top_left", "per_thread", "fp32+fp16", torch.float16),
    (200, 200, 128, "HND", 2, 2, False, "bottom_right", "per_thread", "fp32+fp32", torch.bfloat16),
]


def main() -> int:
    bad = 0
    for nq, nkv, d, layout, hq, hkv, causal, align, gran, accum, dtype in CASES:
        shape = lambda h, n: (1, h, n, d) if layout == "HND" else (1, n, h, d)  # noqa: E731
        q = torch.randn(shape(hq, nq), device="cuda", dtype=dtype)
        k = torch.randn(shape(hkv, nkv), device="cuda", dtype=dtype)
        v = torch.randn(shape(hkv, nkv), device="cuda", dtype=dtype)
        out, lse = mma.attention(q, k, v, causal=causal, layout=layout, granularity=gran, pv_accum=accum,
                                 causal_alignment=align, return_lse=True)
        quantizers.quantize_qk(q, k, layout=layout, preset="sm90", granularity=gran)
        quantizers.quantize_v(v, layout=layout, preset="sm90", pv_accum=accum)
        torch.cuda.synchronize()
        finite = bool(torch.isfinite(out).all())
        bad += not finite
        print(f"case {nq}x{nkv} d{d} {layout} causal={causal}/{align}: {'ok' if finite else 'NON-FINITE'}")
    if sm90.unavailable_reason() is None:  # the Hopper kernel, both geometries: the same cases, plus a
        sm90_cases = CASES + [  # persistent walk and fully blind tiles
            (500, 500, 64, "HND", 40, 8, True, "bottom_right", "per_thread", "", torch.float16),
            (400, 100, 64, "HND", 40, 8, True, "bottom_right", "per_thread", "", torch.float16)]
        for (nq, nkv, d, layout, hq, hkv, causal, align, gran, _, dtype), cta_k in (
                (case, cta_k) for cta_k in (None, 64) for case in sm90_cases):
            shape = lambda h, n: (1, h, n, d) if layout == "HND" else (1, n, h, d)  # noqa: E731
            q, k, v = (torch.randn(shape(h, n), device="cuda", dtype=dtype)
                       for h, n in ((hq, nq), (hkv, nkv), (hkv, nkv)))
            out, lse = sm90.attention(q, k, v, causal=causal, layout=layout, granularity=gran,
                                          causal_alignment=align, return_lse=True, cta_k=cta_k)
            torch.cuda.synchronize()
            finite = bool(torch.isfinite(out).all())
            bad += not finite
            print(f"sm90 case {nq}x{nkv} d{d} {layout} h{hq}/{hkv} causal={causal}/{align} cta_k={cta_k}: "
                  f"{'ok' if finite else 'NON-FINITE'}")
    else:
        print(f"sm90 cases not run: {sm90.unavailable_reason()}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
