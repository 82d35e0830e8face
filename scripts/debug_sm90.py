"""First-light diagnostics of the Hopper kernel (kernels/attn_sm90.cu) on small inputs (sm_90 host).

Runs a ladder of cases from one tile upward, each launch synchronized
(SAGELIB_SYNC_LAUNCHES=1), and prints the kernel's relative L1 against the
contract's sm90 output, the worst (query block, key block) error, and the
first rows that differ, so a hang or a layout bug shows at the smallest case
that has it. Run it under `timeout`: a barrier bug hangs rather than fails.
"""

import os
import sys
import time

import torch

os.environ.setdefault("SAGELIB_SYNC_LAUNCHES", "1")

from sagelib import contract  # noqa: E402
from sagelib.backends.kernels import sm90

CASES = [  # (b, hq, hkv, nq, nkv, d, causal)
    (1, 1, 1, 128, 128, 128, False),
    (1, 1, 1, 64, 128, 128, False),
    (1, 1, 1, 128, 256, 128, False),
    (1, 1, 1, 128, 1024, 128, False),
    (1, 1, 1, 128, 128, 64, False),
    (1, 2, 1, 300, 700, 128, False),
    (1, 2, 2, 300, 300, 128, True),
    (2, 4, 2, 1000, 1000, 64, True),
    (2, 16, 16, 2048, 2048, 128, False),
]


def main() -> int:
    reason = sm90.unavailable_reason()
    if reason:
        print(reason)
        return 2
    worst = 0.0
    for b, hq, hkv, nq, nkv, d, causal in CASES:
        g = torch.Generator(device="cuda").manual_seed(0)
        q = torch.randn(b, hq, nq, d, generator=g, device="cuda").half()
        k = (torch.randn(b, hkv, nkv, d, generator=g, device="cuda") + 4 * torch.randn(1, 1, 1, d, device="cuda",
                                                                                        generator=g)).half()
        v = torch.randn(b, hkv, nkv, d, generator=g, device="cuda").half()
        t0 = time.time()
        out = sm90.attention(q, k, v, causal=causal)
        torch.cuda.synchronize()
        ms = (time.time() - t0) * 1e3
        ref = contract.attention(q, k, v, causal=causal, preset="sm90")
        err = (out.double() - ref.double()).abs()
        rel = float(err.sum() / ref.double().abs().sum())
        worst = max(worst, rel)
        rows = err.amax(dim=-1)[0, 0]
        bad = (rows > 1e-2).nonzero().flatten()[:8].tolist()
        print(f"B{b} H{hq}/{hkv} {nq}x{nkv} d{d} causal={causal}: rel_l1 {rel:.3e}, {ms:.1f} ms (first call), "
              f"finite {bool(torch.isfinite(out).all())}, rows off (head 0) {bad}", flush=True)
        if bad:
            r = bad[0]
            print("   ours", out[0, 0, r, :8].tolist())
            print("   ref ", ref[0, 0, r, :8].tolist())
    return 0 if worst < 2e-3 else 1


if __name__ == "__main__":
    sys.exit(main())
