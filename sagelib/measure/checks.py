"""Is a backend's output right? Every element written (finite), and sampled rows of two heads close to
exact attention; outputs land in memory poisoned with NaN first, so an element never written cannot pass.
"""

from __future__ import annotations

import math

import torch

from sagelib.inputs import Shape

#: Relative L1 error against exact attention above which a backend's output is called wrong.
CHECK_REL_L1_LIMIT = 0.1


def poison_allocator(like_shape, dtype, device, blocks: int = 4) -> None:
    """Fill ``blocks`` blocks of the output's size with NaN and hand them back to the allocator.

    Torch's caching allocator serves the next allocations of that size on this stream from those
    blocks, so an output element that the backend fails to write stays NaN instead of holding a
    stale, plausible value. Several blocks, because a backend may allocate same-sized temporaries
    (a smoothed K, say) before its output.
    """
    if device.type != "cuda":
        return
    poison = [torch.full(like_shape, float("nan"), dtype=dtype, device=device) for _ in range(blocks)]
    del poison


def first_output(result):
    return result[0] if isinstance(result, (tuple, list)) else result


def exact_rows(q, k, v, rows: torch.Tensor, *, causal: bool, layout: str, batch: int, head: int):
    """Exact fp32 attention for query ``rows`` of one (batch, head); causal is top-left aligned."""
    if layout == "NHD":
        qb, kb, vb = (t[batch, :, head] for t in (q, k, v))
    else:
        qb, kb, vb = (t[batch, head] for t in (q, k, v))
    scores = (qb[rows].float() @ kb.float().T) / math.sqrt(q.shape[-1])
    if causal:
        keys = torch.arange(kb.shape[0], device=q.device)
        scores = scores.masked_fill(keys[None, :] > rows[:, None], float("-inf"))
    return torch.softmax(scores, dim=-1) @ vb.float()


def check_output(out, q, k, v, *, shape: Shape, causal: bool, layout: str, sample_rows: int = 64) -> dict:
    """Every element finite (written), and sampled rows of two heads close to exact attention."""
    out = first_output(out)
    expected = (shape.batch, shape.heads, shape.seq_q, shape.head_dim) if layout == "HND" else \
        (shape.batch, shape.seq_q, shape.heads, shape.head_dim)
    if tuple(out.shape) != expected:
        return {"written": False, "rel_l1": None, "ok": False,
                "problem": f"output shape {tuple(out.shape)}, expected {expected}"}
    written = bool(torch.isfinite(out).all())
    n = shape.seq_q
    rows = torch.unique(torch.cat([
        torch.arange(min(n, sample_rows // 2), device=q.device),
        torch.arange(max(0, n - sample_rows // 2), n, device=q.device),
    ]))
    num = den = 0.0
    for b, h in ((0, 0), (shape.batch - 1, shape.heads - 1)):
        ref = exact_rows(q, k, v, rows, causal=causal, layout=layout, batch=b, head=h)
        got = (out[b, :, h] if layout == "NHD" else out[b, h])[rows].float()
        num += float((got - ref).abs().sum())
        den += float(ref.abs().sum())
    rel_l1 = num / den if den > 0 and math.isfinite(num) else None
    ok = written and rel_l1 is not None and rel_l1 <= CHECK_REL_L1_LIMIT
    result = {"written": written, "rel_l1": rel_l1, "rows_checked": int(rows.numel()) * 2, "ok": ok}
    if not written:
        result["problem"] = "output holds NaN/Inf where the inputs are finite: elements left unwritten"
    elif not ok:
        result["problem"] = f"rel_l1 {rel_l1} exceeds {CHECK_REL_L1_LIMIT}: wrong output"
    return result
