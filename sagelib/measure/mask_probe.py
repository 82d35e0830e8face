"""Does a hidden key ever contribute? A causal probe whose visible scores are the most negative.

The first half of the keys point along +u, the second half along -u (so K's mean is 0 and smoothing
keeps them), and the first half of the queries along -u: every score a first-half row may see is
-magnitude^2 * head_dim (the most negative possible), every score it must not see is +magnitude^2 *
head_dim. V's channel 0 is 0 on visible keys and 1 on hidden ones, so in the first half of the rows
channel 0 is exactly 0 when no hidden key contributes and positive when one does. A sentinel score that
real scores can fall below (-5e6 once did) shows as a leak at large magnitudes; -inf never does.

The same inputs serve the contract (CPU tests), our kernels and the real SageAttention2 (GPU probes).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

#: Magnitudes each dtype is probed at: ordinary, past the old -5e6 sentinel, and the largest the score limit
#: (presets.SCORE_LIMIT) accepts at head_dim 128; beyond it, up to the dtype's own limit, calls are refused
#: (:data:`REFUSED`).
MAGNITUDES = {torch.float16: (1.0, 400.0, 1000.0, 5000.0), torch.bfloat16: (1.0, 1000.0, 5000.0)}
#: Magnitudes that must be refused with the score limit named, up to each dtype's largest finite value.
REFUSED = {torch.float16: (7000.0, 65504.0), torch.bfloat16: (7000.0, 1e15, 3.0e38)}


@dataclass(frozen=True)
class LeakRow:
    dtype: str
    magnitude: float
    head_dim: int
    leak: float  #: largest channel-0 output over the first half of the rows (0 = nothing hidden contributed)
    finite: bool


def hidden_key_inputs(n: int, head_dim: int, magnitude: float, dtype: torch.dtype, device="cpu",
                      heads: int = 2):
    """q, k, v ([1, heads, n, head_dim], HND) of the probe; ``n`` even."""
    if n % 2:
        raise ValueError(f"n: expected an even number of tokens, got {n}")
    half = n // 2
    u = torch.ones(head_dim, dtype=torch.float64, device=device)
    sign = torch.cat([torch.ones(half), -torch.ones(half)]).to(device=device, dtype=torch.float64)
    k = (magnitude * sign[:, None] * u).expand(1, heads, n, head_dim)
    q = -k  # first-half rows along -u: their visible scores are the most negative possible
    v = torch.zeros(1, heads, n, head_dim, dtype=torch.float64, device=device)
    v[..., half:, 0] = 1.0
    v[..., 1:] = torch.linspace(-1, 1, head_dim - 1, dtype=torch.float64, device=device)
    return q.to(dtype).contiguous(), k.to(dtype).contiguous(), v.to(dtype).contiguous()


def hidden_key_leak(out: torch.Tensor) -> float:
    """Largest channel-0 value over the first half of the rows of an HND output."""
    half = out.shape[2] // 2
    return float(out[..., :half, 0].double().abs().max())


def probe(attention, n: int = 256, head_dims=(64, 128), device="cpu", magnitudes=MAGNITUDES) -> list[LeakRow]:
    """``attention(q, k, v)`` (causal, HND, returns the output) on the probe at every dtype and magnitude."""
    rows = []
    for dtype, values in magnitudes.items():
        for head_dim in head_dims:
            for magnitude in values:
                q, k, v = hidden_key_inputs(n, head_dim, magnitude, dtype, device)
                out = attention(q, k, v)
                rows.append(LeakRow(str(dtype).replace("torch.", ""), magnitude, head_dim, hidden_key_leak(out),
                                    bool(torch.isfinite(out).all())))
    return rows
