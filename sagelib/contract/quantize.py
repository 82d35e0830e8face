"""Stage 2: symmetric INT8 quantization of Q and K.

A *group* is the set of tokens that share one float32 scale. The granularity
decides the groups (``q_group_index`` / ``k_group_index``), the flavour decides
the rounding (``quantize_groups``). Scale tensors are [B, H, n_groups] and
include the padded tail groups of the last block (a group with no tokens has
amax 0, or the cuda flavour's initial 1e-7).
"""

from __future__ import annotations

from contextlib import contextmanager
from dataclasses import dataclass

import torch

from sagelib.contract import presets as P
from sagelib.contract.config import ContractConfig
from sagelib.contract.smoothing import k_mean, smoothed_k
from sagelib.contract.validate import check_qk, default_sm_scale, from_hnd, to_hnd


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def n_q_groups(n_tokens: int, preset: str | P.Preset, granularity: str) -> int:
    g = _preset(preset)
    blocks = _ceil_div(n_tokens, g.blkq)
    return {"per_block": blocks, "per_warp": blocks * (g.blkq // g.warpq),
            "per_thread": blocks * (g.blkq // g.warpq) * 8}[_granularity(granularity)]


def n_k_groups(n_tokens: int, preset: str | P.Preset, granularity: str) -> int:
    g = _preset(preset)
    blocks = _ceil_div(n_tokens, g.blkk)
    return {"per_block": blocks, "per_warp": blocks,
            "per_thread": blocks * (g.blkk // g.warpk) * 4}[_granularity(granularity)]


def q_group_index(n_tokens: int, preset: str | P.Preset, granularity: str, device=None) -> torch.Tensor:
    """Scale-group index of every query token.

    per_thread follows the mma C fragment: inside a WARPQ tile, rows with the same
    row % 8 belong to the same lanes and share a scale (8 groups per tile).
    """
    g = _preset(preset)
    row = torch.arange(n_tokens, device=device)
    granularity = _granularity(granularity)
    if granularity == "per_block":
        return row // g.blkq
    if granularity == "per_warp":
        return row // g.warpq
    return (row // g.warpq) * 8 + (row % g.warpq) % 8


def k_group_index(n_tokens: int, preset: str | P.Preset, granularity: str, device=None) -> torch.Tensor:
    """Scale-group index of every key token.

    per_thread: inside a WARPK tile a lane holds key columns 2*(lane%4) and +1 of
    every 8, so rows with the same (row % 8) // 2 share a scale (4 groups per tile).
    """
    g = _preset(preset)
    row = torch.arange(n_tokens, device=device)
    granularity = _granularity(granularity)
    if granularity in ("per_block", "per_warp"):
        return row // g.blkk
    return (row // g.warpk) * 4 + ((row % g.warpk) % 8) // 2


def group_amax(x: torch.Tensor, group: torch.Tensor, n_groups: int) -> torch.Tensor:
    """max |x| over the tokens (dim 2) and channels of each group: [B, H, n_groups], empty groups 0."""
    b, h, n, _ = x.shape
    row_amax = x.abs().amax(dim=-1)  # [B, H, N]
    out = torch.zeros(b, h, n_groups, dtype=x.dtype, device=x.device)
    return out.scatter_reduce(2, group.expand(b, h, n), row_amax, reduce="amax", include_self=True)


def quantize_groups(x: torch.Tensor, group: torch.Tensor, n_groups: int, flavour: str):
    """INT8 values and float32 scales of ``x`` (float32 [B, H, N, D]) under ``flavour``.

    triton: scale = fma(amax, fl32(1/127), 1e-7), one rounding; q = trunc(x/scale + 0.5*sign(x/scale))
            (half away from zero).
    cuda:   amax = max(1e-7, amax); scale = amax * fl32(1/127); q = rne(x * (127/amax)), saturated.

    Both scales are what the real quantizers compute: GPU code divides by the constant 127 as a product with
    its float32 reciprocal, and in Triton's ``amax / 127. + 1e-7`` ptxas fuses that product with the sum into
    one FFMA (its SASS for sm_90; every scale of SageAttention2's Triton quantizer measured on the H200 matches
    this form, and 31% miss the unfused one). "x/scale" and "127/amax" are correctly rounded (the real ones
    divide approximately: :func:`division`). Written so, the contract gives the same bits on every device.
    """
    amax = group_amax(x, group, n_groups)
    if flavour == "triton":
        scale = fma_f32(amax, reciprocal_f32(P.INT8_MAX), P.TRITON_SCALE_EPS)
        ratio = divide(x, _per_token(scale, group), "triton_ratio")
        half = torch.where(ratio >= 0, 0.5, -0.5).to(ratio.dtype)
        values = torch.trunc(ratio + half)
    elif flavour == "cuda":
        amax = torch.clamp(amax, min=P.CUDA_AMAX_INIT)
        scale = amax * reciprocal_f32(P.INT8_MAX)
        multiplier = divide(torch.full_like(amax, P.INT8_MAX), amax, "cuda_multiplier")
        values = torch.round(x * _per_token(multiplier, group))
    else:
        raise ValueError(f"flavour: expected one of {list(P.FLAVOURS)}, got {flavour!r}")
    return values.clamp(-128, 127).to(torch.int8), scale


def reciprocal_f32(constant: float) -> torch.Tensor:
    """1/constant rounded to float32: dividing by a constant is multiplying by this."""
    return torch.tensor(1.0 / constant, dtype=torch.float32)


def fma_f32(a: torch.Tensor, b: torch.Tensor, c: float) -> torch.Tensor:
    """a * b + c rounded once to float32 (the GPU's FFMA), for float32 ``a`` and ``b``, on every device.

    In float64 the product is exact (24 + 24 bits) and the sum is rounded once; rounding that to float32 gives
    the fused result except where the float64 sum lands exactly on a midpoint of two float32 values while the
    exact sum does not: there the sum's rounding error (TwoSum) says which neighbour is nearer.
    """
    p = a.double() * b.double().to(a.device)
    c64 = torch.tensor(c, dtype=torch.float32).double().to(p.device)
    t = p + c64
    bb = t - p
    err = (p - (t - bb)) + (c64 - bb)  # exact: p + c64 = t + err
    r = t.float()
    other = torch.nextafter(r, torch.where(t > r.double(), torch.inf, -torch.inf).float())
    tie = (r.double() + other.double()) * 0.5 == t
    toward_other = torch.sign(err) == torch.sign(other.double() - t)
    return torch.where(tie & (err != 0) & toward_other, other, r)


def constant_over(constant: float, x: torch.Tensor) -> torch.Tensor:
    """constant / x, correctly rounded on every device.

    (``constant / tensor`` in torch is ``tensor.reciprocal() * constant``, rounded twice.)
    """
    return torch.full_like(x, constant) / x


_DIVISIONS: list = []  #: the stand-ins :func:`division` put in place, innermost last


#: where the INT8 quantizers divide: the triton flavour's x / scale and the cuda flavour's 127 / amax (their
#: amax / 127 is a product with fl32(1/127) in the real kernels as in the contract: no division)
DIVISION_SITES = ("triton_ratio", "cuda_multiplier")


def divide(a: torch.Tensor, b: torch.Tensor, site: str) -> torch.Tensor:
    """a / b at one of :data:`DIVISION_SITES`: IEEE (correctly rounded), or the stand-in of :func:`division`."""
    if not _DIVISIONS:
        return a / b
    a, b = torch.broadcast_tensors(a, b)
    return _DIVISIONS[-1](a.contiguous(), b.contiguous(), site)


@contextmanager
def division(divide_like):
    """Inside the block the INT8 quantizers divide with ``divide_like(a, b, site)`` (float32 tensors of one shape,
    ``site`` one of :data:`DIVISION_SITES`) where the contract divides exactly.

    The real kernels divide approximately there (Triton's fp32 ``/``, CUDA's under ``--use_fast_math``): a GPU's
    division unit, which no CPU reproduces bit for bit. So the contract divides exactly, and a measurement on the
    GPU (``sagelib parity --against sage2``) swaps the GPU's own division in to show which bytes that explains.
    (V's multiplier is the contract's scale_max * fl32(1 / amax): stage 5.)
    """
    _DIVISIONS.append(divide_like)
    try:
        yield
    finally:
        _DIVISIONS.pop()


def _per_token(per_group: torch.Tensor, group: torch.Tensor) -> torch.Tensor:
    """[B, H, G] -> [B, H, N, 1] by each token's group."""
    return per_group[:, :, group].unsqueeze(-1)


@dataclass
class QuantizedQK:
    """Q and K as the attention kernel receives them."""

    q_int8: torch.Tensor  #: int8, q's layout and shape
    q_scale: torch.Tensor  #: float32 [B, H_q, n_q_groups]
    k_int8: torch.Tensor  #: int8, k's layout and shape
    k_scale: torch.Tensor  #: float32 [B, H_kv, n_k_groups]
    km: torch.Tensor | None  #: k's token mean in k's dtype (keepdim, k's layout), None without smoothing
    layout: str
    preset: str
    granularity: str
    flavour: str
    #: True when sm_scale * log2e is folded into q_scale (per_block)
    scale_folded: bool


def quantize_qk(q, k, layout="HND", preset="sm90", granularity="per_thread", flavour=None,
                smooth_k=True, sm_scale=None, check_finite=True) -> QuantizedQK:
    """Stages 1-2: smooth K and quantize Q and K to INT8 as the preset's kernels do.

    flavour None picks the one the preset's real kernels use: ``triton`` for
    per_thread, ``cuda`` for per_warp and per_block. per_block folds
    sm_scale * log2e into Q before quantizing (``sm_scale`` defaults to head_dim**-0.5).
    """
    config = ContractConfig(preset=preset, granularity=granularity, flavour=flavour, smooth_k=smooth_k,
                            sm_scale=sm_scale, check_finite=check_finite)
    shapes = check_qk(q, k, layout, check_finite=check_finite)
    return _quantize_qk_hnd(to_hnd(q, layout), to_hnd(k, layout), config, shapes.head_dim, layout)


def _quantize_qk_hnd(q, k, config: ContractConfig, head_dim: int, layout: str) -> QuantizedQK:
    geometry, flavour = config.geometry, config.quantizer_flavour
    km = k_mean(k) if config.smooth_k else None
    k32 = smoothed_k(k, km, flavour) if km is not None else k.float()
    q32 = q.float()
    folded = config.granularity == "per_block"
    if folded:
        q32 = q32 * torch.tensor(default_sm_scale(head_dim, config.sm_scale) * P.LOG2E, dtype=torch.float32)
    nq, nk = q.shape[2], k.shape[2]
    q_int8, q_scale = quantize_groups(
        q32, q_group_index(nq, geometry, config.granularity, q.device),
        n_q_groups(nq, geometry, config.granularity), flavour)
    k_int8, k_scale = quantize_groups(
        k32, k_group_index(nk, geometry, config.granularity, k.device),
        n_k_groups(nk, geometry, config.granularity), flavour)
    return QuantizedQK(
        q_int8=from_hnd(q_int8, layout), q_scale=q_scale, k_int8=from_hnd(k_int8, layout), k_scale=k_scale,
        km=from_hnd(km, layout) if km is not None else None, layout=layout, preset=geometry.name,
        granularity=config.granularity, flavour=flavour, scale_folded=folded,
    )


def _preset(preset: str | P.Preset) -> P.Preset:
    if isinstance(preset, P.Preset):
        return preset
    if preset not in P.PRESETS:
        raise ValueError(f"preset: expected one of {list(P.PRESETS)}, got {preset!r}")
    return P.PRESETS[preset]


def _granularity(granularity: str) -> str:
    if granularity not in P.GRANULARITIES:
        raise ValueError(f"granularity: expected one of {list(P.GRANULARITIES)}, got {granularity!r}")
    return granularity
