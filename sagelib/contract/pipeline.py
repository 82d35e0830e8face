"""Stages 3-7: QK traversal in CTA_K blocks, base-2 online softmax with the fp8
offset, P.V with one- or two-level accumulation, final conversion and lse.

The loop runs over key blocks exactly as a kernel does and is vectorised over
everything else (batch, heads, all query rows), so a CPU run of B=1, H=8,
N=4096, D=128 takes seconds. Every arithmetic stage can be switched to exact
through ``ContractConfig.exact`` (see :class:`sagelib.contract.config.Exact`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from sagelib.contract import presets as P
from sagelib.contract.arguments import check_flag
from sagelib.contract.config import ContractConfig
from sagelib.contract.fp8 import (
    quantize_v_hnd,
    round_e4m3,
    round_fp16,
    round_fp32,
    truncate_fp22,
)
from sagelib.contract.quantize import _quantize_qk_hnd, k_group_index, q_group_index
from sagelib.contract.smoothing import k_mean
from sagelib.contract.validate import (
    Shapes,
    check_qkv,
    check_score_range,
    default_sm_scale,
    from_hnd,
    pad_head_dim,
    to_hnd,
)


@dataclass
class Operands:
    """What the traversal multiplies: scores come from ``q_op @ k_op^T * score_scale``."""

    q_op: torch.Tensor  #: [B, H_q, N_q, Dp] in the compute dtype (integers when quantized)
    k_op: torch.Tensor  #: [B, H_q, N_kv, Dp] (kv heads already expanded for GQA)
    score_scale: torch.Tensor  #: per query row, [B, H_q, N_q, 1] (broadcastable)
    k_scale_cols: torch.Tensor  #: per key column, [B, H_q, 1, N_kv] (broadcastable)
    v_op: torch.Tensor  #: [B, H_q, N_kv, Dp] values the P.V product uses (e4m3 values or exact)
    v_scale: torch.Tensor | None  #: [B, H_q, 1, Dp] per-channel dequantization, None when exact
    vm: torch.Tensor | None  #: [B, H_q, 1, Dp] V mean added back (smooth_v)
    km: torch.Tensor | None  #: [B, H_kv, 1, D] in the input dtype, for the lse correction


def attention_hnd(q, k, v, config: ContractConfig, shapes: Shapes, return_lse: bool):
    """The contract on HND tensors. Returns (out [B,H_q,N_q,D], lse [B,H_q,N_q] or None)."""
    exact = config.exact
    cdtype = torch.float64 if exact.float64_state else torch.float32
    dp = shapes.padded_head_dim
    sm_scale = default_sm_scale(shapes.head_dim, config.sm_scale)
    if config.check_finite:
        check_score_range(q, k, sm_scale)
    ops = _operands(pad_head_dim(q, dp), pad_head_dim(k, dp), pad_head_dim(v, dp), config, shapes, sm_scale, cdtype)

    n_q, n_kv, cta_k = shapes.n_q, shapes.n_kv, config.geometry.cta_k
    b, h = shapes.batch, shapes.heads_q
    dev = q.device
    m = torch.full((b, h, n_q), P.INITIAL_ROW_MAX, dtype=cdtype, device=dev)
    l = torch.zeros((b, h, n_q), dtype=cdtype, device=dev)
    o = torch.zeros((b, h, n_q, dp), dtype=cdtype, device=dev)
    offset = torch.tensor(config.fp8_offset, dtype=cdtype)
    log2e = _log2e(exact.float64_state)
    q_rows = torch.arange(n_q, device=dev).unsqueeze(1)

    for start in range(0, n_kv, cta_k):
        stop = min(start + cta_k, n_kv)
        s = torch.matmul(ops.q_op, ops.k_op[:, :, start:stop].transpose(-1, -2))
        s = s * ops.score_scale * ops.k_scale_cols[..., start:stop]
        # with check_finite the score bound (check_score_range) already keeps every score finite
        if not config.check_finite and not bool(torch.isfinite(s).all()):
            raise ValueError("q, k, sm_scale: scores overflow float32 (they would give NaN, not attention); "
                             "scale q, k or sm_scale down")
        if config.causal:
            keys = torch.arange(start, stop, device=dev).unsqueeze(0)
            s = s.masked_fill(_causal_mask(q_rows, keys, n_q, n_kv, config.causal_alignment), P.MASK_SCORE)
        m_new = torch.maximum(m, s.amax(dim=-1) - offset)
        alpha = torch.exp2(m - m_new)
        p = torch.exp2(s - m_new.unsqueeze(-1))
        l = l * alpha + p.sum(dim=-1)  # the sum uses P before fp8 rounding
        if not exact.p_fp8:
            p = round_e4m3(p)
        o = _accumulate(o, alpha, p, ops.v_op[:, :, start:stop], config)
        m = m_new

    out = o / l.unsqueeze(-1)
    if ops.v_scale is not None:
        out = out * ops.v_scale
    if ops.vm is not None:
        out = out + ops.vm
    out = out[..., : shapes.head_dim]
    lse = None
    if return_lse:
        lse = ((torch.log2(l) + m) / log2e).to(torch.float64 if exact.float64_state else torch.float32)
        if ops.km is not None:
            lse = lse + sm_scale * _smoothing_correction(q, ops.km, shapes, config).to(lse.dtype)
    if config.causal:
        out, lse = _blank_rows_without_keys(out, lse, n_q, n_kv, config.causal_alignment)
    if not exact.output_rounding:
        out = out.to(q.dtype)
    return out, lse


def _log2e(exact_state: bool) -> float:
    """The kernels' 1.44269504, or log2(e) to float64 precision when the state is exact."""
    return 1.0 / math.log(2.0) if exact_state else P.LOG2E


def _operands(q, k, v, config: ContractConfig, shapes: Shapes, sm_scale: float, cdtype) -> Operands:
    """Stages 1, 2 and 5: smoothing, INT8 Q/K (or exact), e4m3 V (or exact)."""
    exact = config.exact
    log2e = _log2e(exact.float64_state)
    heads = torch.arange(shapes.heads_q, device=q.device) // shapes.group_size
    ones_q = torch.ones(1, 1, 1, 1, dtype=cdtype, device=q.device)
    if exact.qk_int8:
        km = k_mean(k) if config.smooth_k else None
        q_op = q.to(cdtype)
        k_op = k.to(cdtype) - km.to(cdtype) if km is not None else k.to(cdtype)
        score_scale = ones_q * (sm_scale * log2e)
        k_cols = torch.ones(1, 1, 1, shapes.n_kv, dtype=cdtype, device=q.device)
    else:
        qk = _quantize_qk_hnd(q, k, config, shapes.head_dim, "HND")
        km = qk.km  # the mean the quantizer subtracted (HND), reused for the lse correction
        g = config.geometry
        q_op, k_op = qk.q_int8.to(cdtype), qk.k_int8.to(cdtype)
        q_rows = qk.q_scale[:, :, q_group_index(shapes.n_q, g, config.granularity, q.device)].to(cdtype)
        k_cols = qk.k_scale[:, :, k_group_index(shapes.n_kv, g, config.granularity, q.device)].to(cdtype)
        folded = 1.0 if qk.scale_folded else sm_scale * log2e
        score_scale = (q_rows * torch.tensor(folded, dtype=torch.float32).to(cdtype)).unsqueeze(-1)
        k_cols = k_cols[:, heads].unsqueeze(2)
    k_op = k_op[:, heads]
    if exact.v_fp8 and config.pv_accum == "fp32+fp16" and not exact.pv_accum:
        # V unrounded but at its channel scale (|V| <= 2.25), so the fp16 partials see the kernel's magnitudes
        v_op, v_scale = _scaled_exact_v(v, cdtype)
        return Operands(q_op, k_op, score_scale, k_cols, v_op[:, heads], v_scale[:, heads], None, km)
    if exact.v_fp8:
        v_op = v.to(cdtype)[:, heads]
        if config.smooth_v:
            vm = v.to(cdtype).mean(dim=2, keepdim=True)[:, heads]
            return Operands(q_op, k_op, score_scale, k_cols, v_op - vm, None, vm, km)
        return Operands(q_op, k_op, score_scale, k_cols, v_op, None, None, km)
    qv = quantize_v_hnd(v, config.preset, config.pv_accum, config.smooth_v)
    v_op = qv.tokens_hnd().to(cdtype)[:, heads]
    v_scale = qv.v_scale.to(cdtype)[:, heads].unsqueeze(2)
    vm = qv.vm.to(cdtype)[:, heads].unsqueeze(2) if qv.vm is not None else None
    return Operands(q_op, k_op, score_scale, k_cols, v_op, v_scale, vm, km)


def _scaled_exact_v(v, cdtype):
    """V [B, H_kv, N, Dp] times scale_max / amax per channel, unrounded, and the [B, H_kv, 1, Dp] scale back."""
    amax = v.to(cdtype).abs().amax(dim=2, keepdim=True).clamp(min=P.V_AMAX_FLOOR)
    scale_max = P.V_SCALE_MAX["fp32+fp16"]
    return v.to(cdtype) * (scale_max / amax), amax / scale_max


def _accumulate(o, alpha, p, v_blk, config: ContractConfig):
    """Stage 6: add one key block's P.V into O.

    fp32+fp32: a fresh inner accumulator (the MMA's) holds the block's product, one k32 step at a
    time, then joins O with an ordinary add.
    fp32+fp16: the same in fresh fp16 partials of ``config.fp16_partial`` keys each (at most 64, so
    that no partial can overflow), joined into O one after the other.
    fp32: O itself is the MMA's accumulator across all blocks.
    The MMA's accumulator is FP22 or fp32 by ``config.accumulator`` (the target decides).
    """
    rescaled = o * alpha.unsqueeze(-1)
    if config.exact.pv_accum:
        return rescaled + torch.matmul(p, v_blk)
    steps = _k32_partials(p, v_blk)  # [steps, B, H, N_q, D]
    mma_round = truncate_fp22 if config.accumulator == "fp22" else round_fp32
    if config.pv_accum == "fp32":
        acc = rescaled
        for partial in steps:
            acc = mma_round(acc + partial)
        return acc
    if config.pv_accum == "fp32+fp32":
        inner = torch.zeros_like(o)
        for partial in steps:
            inner = mma_round(inner + partial)
        return rescaled + inner
    # fp32+fp16: fresh fp16 partials of config.fp16_partial keys (whole k32 steps), each rounded to fp16
    # after every k32 step and joined into O in key order (sm90's 128-key block: two partials of 64)
    out, per_partial = rescaled, max(1, config.fp16_partial // P.MMA_K_FP8)  # a block under 32 keys: one step
    for first in range(0, len(steps), per_partial):
        inner = torch.zeros_like(o)
        for partial in steps[first:first + per_partial]:
            inner = round_fp16(inner + partial)
        out = out + inner
    return out


def _k32_partials(p, v_blk):
    """P.V of every 32-token k-step of the block: [steps, B, H, N_q, D] (zero-padded tail)."""
    n = p.shape[-1]
    pad = (-n) % P.MMA_K_FP8
    if pad:
        p = torch.nn.functional.pad(p, (0, pad))
        v_blk = torch.nn.functional.pad(v_blk, (0, 0, 0, pad))
    steps = p.shape[-1] // P.MMA_K_FP8
    b, h, nq, _ = p.shape
    p_steps = p.reshape(b, h, nq, steps, P.MMA_K_FP8).permute(3, 0, 1, 2, 4)
    v_steps = v_blk.reshape(b, h, steps, P.MMA_K_FP8, v_blk.shape[-1]).permute(2, 0, 1, 3, 4)
    return torch.matmul(p_steps, v_steps)


def _causal_mask(q_rows, keys, n_q: int, n_kv: int, alignment: str):
    """True where key j is hidden from query i."""
    shift = n_kv - n_q if alignment == "bottom_right" else 0
    return keys > q_rows + shift


def _blank_rows_without_keys(out, lse, n_q: int, n_kv: int, alignment: str):
    """Rows that see no key at all (bottom-right with N_q > N_kv) give 0 and lse -inf."""
    if alignment != "bottom_right" or n_q <= n_kv:
        return out, lse
    blind = n_q - n_kv  # query rows 0 .. blind-1 see nothing
    out = out.clone()
    out[:, :, :blind] = 0
    if lse is not None:
        lse = lse.clone()
        lse[:, :, :blind] = float("-inf")
    return out, lse


def _smoothing_correction(q, km, shapes: Shapes, config: ContractConfig):
    """q . km for every query row: [B, H_q, N_q], in fp32 or the input dtype (the imported way)."""
    heads = torch.arange(shapes.heads_q, device=q.device) // shapes.group_size
    d = shapes.head_dim
    km_q = km[:, heads, :, :d]  # [B, H_q, 1, D]
    if config.exact.qk_int8 or config.exact.float64_state:
        return torch.matmul(q[..., :d].double(), km_q.double().transpose(-1, -2)).squeeze(-1)
    if config.lse_correction == "input_dtype":
        return torch.matmul(q[..., :d], km_q.transpose(-1, -2)).squeeze(-1).float()
    return torch.matmul(q[..., :d].float(), km_q.float().transpose(-1, -2)).squeeze(-1)


def attention(q, k, v, causal=False, sm_scale=None, layout="HND", preset="sm90", granularity="per_thread",
              pv_accum="fp32+fp32", return_lse=False, **options):
    """The numerical contract: what an 8-bit attention kernel of ``preset`` computes.

    q, k, v: fp16 or bf16, layout "HND" [B, H, N, D] or "NHD" [B, N, H, D]; GQA when
    k/v have fewer heads. Returns a tensor of q's dtype and layout, and with
    ``return_lse`` the float32 natural-log lse [B, H_q, N_q] too.

    options (see ContractConfig): flavour, smooth_k, smooth_v, causal_alignment
    ("bottom_right" default; "top_left" reproduces the imported kernels when N_q != N_kv),
    lse_correction ("fp32" or "input_dtype"), exact (an Exact), check_finite, cta_k (keys per
    online-softmax step; None = the preset's, another value for structure studies only), target
    (the GPU the kernel runs on: "sm89", "sm90", "sm120", "sm121"; None = the preset's own) and
    mma_accumulator ("fp22" or "fp32"; None = the target's, see presets.MMA_ACCUMULATOR_BY_TARGET) and
    fp16_partial_keys (fp32+fp16: keys per fp16 inner partial; None = at most 64, the most that cannot overflow).
    """
    config = ContractConfig(preset=preset, granularity=granularity, pv_accum=pv_accum, causal=causal,
                            sm_scale=sm_scale).with_options(**options)
    return run(q, k, v, config, layout=layout, return_lse=return_lse)


def run(q, k, v, config: ContractConfig, layout: str = "HND", return_lse: bool = False):
    """:func:`attention` with a ready ContractConfig."""
    check_flag("return_lse", return_lse)
    shapes = check_qkv(q, k, v, layout, check_finite=config.check_finite)
    out, lse = attention_hnd(to_hnd(q, layout), to_hnd(k, layout), to_hnd(v, layout), config, shapes, return_lse)
    out = from_hnd(out, layout)
    return (out, lse) if return_lse else out
