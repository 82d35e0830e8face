"""Stages 5-6 in number formats: e4m3 rounding, the FP22 accumulator, and V to fp8.

``round_e4m3`` is cvt.rn.satfinite.e4m3x2.f32: round to nearest even, saturate
at +-448. ``truncate_fp22`` drops the low 10 mantissa bits of an fp32 value, which
is what the fp8 tensor-core accumulator of Ada and Hopper keeps of its running sum.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sagelib.contract import presets as P
from sagelib.contract.quantize import constant_over, reciprocal_f32
from sagelib.contract.validate import check_layout, check_tensor, to_hnd

_E4M3_MIN_NORMAL_EXP = -6  # smallest normal is 2**-6
_E4M3_MANTISSA_BITS = 3


def round_e4m3(x: torch.Tensor) -> torch.Tensor:
    """``x`` rounded to the nearest e4m3 value (ties to even, saturating), in x's dtype."""
    if x.dtype == torch.float32:
        return x.clamp(-P.E4M3_MAX, P.E4M3_MAX).to(torch.float8_e4m3fn).to(torch.float32)
    return round_e4m3_arithmetic(x)


def round_e4m3_arithmetic(x: torch.Tensor) -> torch.Tensor:
    """The same rounding done with exact arithmetic, for any float dtype (float64 included)."""
    x = x.clamp(-P.E4M3_MAX, P.E4M3_MAX)
    _, exponent = torch.frexp(x)  # |x| = m * 2**exponent, m in [0.5, 1)
    binade = torch.clamp(exponent - 1, min=_E4M3_MIN_NORMAL_EXP)  # subnormals share the lowest quantum
    quantum = torch.pow(torch.tensor(2.0, dtype=x.dtype, device=x.device), (binade - _E4M3_MANTISSA_BITS).to(x.dtype))
    return (torch.round(x / quantum) * quantum).clamp(-P.E4M3_MAX, P.E4M3_MAX)


def truncate_fp22(x: torch.Tensor) -> torch.Tensor:
    """Drop the low 10 mantissa bits of fp32 ``x`` (toward zero), returned in x's dtype."""
    as_int = x.to(torch.float32).view(torch.int32)
    mask = ~((1 << P.FP22_DROPPED_MANTISSA_BITS) - 1)
    return (as_int & mask).view(torch.float32).to(x.dtype)


def round_fp32(x: torch.Tensor) -> torch.Tensor:
    """``x`` rounded through fp32 (an fp32 MMA accumulator), in x's dtype."""
    return x.to(torch.float32).to(x.dtype)


def round_fp16(x: torch.Tensor) -> torch.Tensor:
    """``x`` rounded through fp16 (the fp32+fp16 inner accumulator), in x's dtype."""
    return x.to(torch.float32).to(torch.float16).to(x.dtype)


@dataclass
class QuantizedV:
    """V as the attention kernel receives it."""

    #: e4m3 [B, H_kv, D, N_pad]: head_dim-major, zero-padded to a multiple of CTA_K tokens,
    #: tokens permuted in 16s for presets with ``permute_v``
    v_fp8: torch.Tensor
    v_scale: torch.Tensor  #: float32 [B, H_kv, D]: dequantize by multiplying
    vm: torch.Tensor | None  #: float32 [B, H_kv, D] channel mean subtracted before quantizing (smooth_v)
    n_tokens: int
    preset: str

    def tokens_hnd(self) -> torch.Tensor:
        """The e4m3 values back in token order as float32 [B, H_kv, N, D] (undoes pad and permutation)."""
        vt = self.v_fp8.to(torch.float32)
        if P.PRESETS[self.preset].permute_v:
            vt = vt[..., token_permutation(vt.shape[-1], vt.device).argsort()]
        return vt[..., : self.n_tokens].transpose(-1, -2)


def token_permutation(n_padded: int, device=None) -> torch.Tensor:
    """Source token of every stored position for the 16-token V permutation."""
    perm = torch.tensor(P.SM89_V_PERMUTATION, device=device)
    base = torch.arange(0, n_padded, 16, device=device).unsqueeze(1)
    return (base + perm).reshape(-1)


def v_channel_scales(v32: torch.Tensor, pv_accum: str):
    """Per-channel amax over tokens -> (v_scale, multiplier) for ``v32`` float32 [B, H, N, D].

    v_scale = amax * fl32(1 / scale_max); multiplier = scale_max * fl32(1 / amax): a rounded
    reciprocal of amax, then a rounded product (not the correctly rounded scale_max / amax), as
    SageAttention2's fast-math V quantizer computes it (measured on its bytes, see NUMERICAL_CONTRACT.md).
    """
    scale_max = P.V_SCALE_MAX[pv_accum]
    amax = v32.abs().amax(dim=2).clamp(min=P.V_AMAX_FLOOR)  # [B, H, D]
    return amax * reciprocal_f32(scale_max), constant_over(1.0, amax) * torch.tensor(scale_max, dtype=torch.float32)


def quantize_v_hnd(v: torch.Tensor, preset: str, pv_accum: str, smooth_v: bool) -> QuantizedV:
    """V [B, H, N, D] (input dtype) -> QuantizedV, the kernel layout included."""
    geometry = P.PRESETS[preset]
    v32 = v.float()
    vm = v32.mean(dim=2) if smooth_v else None
    if vm is not None:
        v32 = v32 - vm.unsqueeze(2)
    v_scale, multiplier = v_channel_scales(v32, pv_accum)
    v8 = (v32 * multiplier.unsqueeze(2)).clamp(-P.E4M3_MAX, P.E4M3_MAX).to(torch.float8_e4m3fn)
    n = v.shape[2]
    n_pad = -(-n // geometry.cta_k) * geometry.cta_k
    vt = torch.zeros(*v8.shape[:2], v8.shape[3], n_pad, dtype=torch.float8_e4m3fn, device=v.device)
    vt[..., :n] = v8.transpose(-1, -2)
    if geometry.permute_v:
        vt = vt[..., token_permutation(n_pad, v.device)]
    return QuantizedV(v_fp8=vt.contiguous(), v_scale=v_scale, vm=vm, n_tokens=n, preset=preset)


def quantize_v(v, layout="HND", preset="sm90", pv_accum="fp32+fp32", smooth_v=False, check_finite=True) -> QuantizedV:
    """Stage 5 for V: per-channel scale, e4m3, transposed, padded (and permuted for sm89)."""
    check_layout(layout)
    check_tensor("v", v, check_finite=check_finite)
    if preset not in P.PRESETS:
        raise ValueError(f"preset: expected one of {list(P.PRESETS)}, got {preset!r}")
    if pv_accum not in P.PV_ACCUM_MODES:
        raise ValueError(f"pv_accum: expected one of {list(P.PV_ACCUM_MODES)}, got {pv_accum!r}")
    if smooth_v and pv_accum == "fp32+fp16":
        raise ValueError("smooth_v: only defined for the fp32 accumulation modes; use pv_accum='fp32+fp32'")
    return quantize_v_hnd(to_hnd(v, layout), preset, pv_accum, smooth_v)
