"""The ground truth: exact softmax attention in float64.

No quantization, no online softmax, no fp8: what every stage of the contract is
measured against. Queries are processed in chunks so long sequences fit in memory.
"""

from __future__ import annotations

import torch

from sagelib.contract.arguments import check_call
from sagelib.contract.presets import CAUSAL_ALIGNMENTS
from sagelib.contract.validate import check_qkv, default_sm_scale, from_hnd, to_hnd

_CHUNK_ELEMENTS = 1 << 25  # scores held at once (256 MiB of float64)


def reference_attention(q, k, v, causal=False, sm_scale=None, layout="HND", causal_alignment="bottom_right",
                        return_lse=False, check_finite=True):
    """float64 attention with the contract's semantics (GQA, causal alignment, blind rows -> 0).

    Returns float64 in the caller's layout (and the float64 lse [B, H_q, N_q]).
    """
    check_call(causal=causal, sm_scale=sm_scale, return_lse=return_lse, check_finite=check_finite)
    if causal_alignment not in CAUSAL_ALIGNMENTS:
        raise ValueError(f"causal_alignment: expected one of {list(CAUSAL_ALIGNMENTS)}, got {causal_alignment!r}")
    shapes = check_qkv(q, k, v, layout, check_finite=check_finite)
    qh, kh, vh = (to_hnd(x, layout).double() for x in (q, k, v))
    heads = torch.arange(shapes.heads_q, device=q.device) // shapes.group_size
    kh, vh = kh[:, heads], vh[:, heads]
    scale = default_sm_scale(shapes.head_dim, sm_scale)
    n_q, n_kv = shapes.n_q, shapes.n_kv
    shift = n_kv - n_q if causal_alignment == "bottom_right" else 0
    rows_per_chunk = max(1, _CHUNK_ELEMENTS // max(1, shapes.batch * shapes.heads_q * n_kv))
    outs, lses = [], []
    keys = torch.arange(n_kv, device=q.device).unsqueeze(0)
    for start in range(0, n_q, rows_per_chunk):
        stop = min(start + rows_per_chunk, n_q)
        s = torch.matmul(qh[:, :, start:stop], kh.transpose(-1, -2)) * scale
        if causal:
            rows = torch.arange(start, stop, device=q.device).unsqueeze(1)
            s = s.masked_fill(keys > rows + shift, float("-inf"))
        lse = torch.logsumexp(s, dim=-1)
        p = torch.exp(s - torch.where(torch.isfinite(lse), lse, 0.0).unsqueeze(-1))
        outs.append(torch.matmul(p, vh))
        lses.append(lse)
    out = from_hnd(torch.cat(outs, dim=2), layout)
    return (out, torch.cat(lses, dim=2)) if return_lse else out
