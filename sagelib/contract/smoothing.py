"""Stage 1: K smoothing.

Subtracting the per-channel mean of K over tokens shifts every score row by the
constant q . km, which softmax ignores; it shrinks the range INT8 must cover when
keys carry per-channel outliers. Only the log-sum-exp moves (corrected at the end).
"""

from __future__ import annotations

import torch


def k_mean(k_hnd: torch.Tensor) -> torch.Tensor:
    """km: mean of k over tokens per (batch, kv head, channel), keepdim, in k's dtype.

    Computed in float64, then converted to k's dtype the way torch converts
    float64 to fp16/bf16 (through float32: two roundings). The kernels reproduce
    exactly this; a plain fp32 reduction can differ where a rounding crosses a tie.
    """
    return k_hnd.double().mean(dim=2, keepdim=True).to(k_hnd.dtype)


def smoothed_k(k_hnd: torch.Tensor, km: torch.Tensor, flavour: str) -> torch.Tensor:
    """k - km as the quantizer of ``flavour`` sees it, in float32 (a new tensor).

    ``triton`` subtracts in the input dtype (the difference is rounded to fp16/bf16);
    ``cuda`` upcasts both to fp32 and subtracts there.
    """
    if flavour == "triton":
        return (k_hnd - km).float()
    return k_hnd.float() - km.float()
