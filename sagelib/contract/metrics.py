"""Error metrics between an output and its reference.

All metrics are computed in float64 over the elements both tensors share.
``compare`` returns the four numbers the notebooks report; ``per_row`` and
``per_channel`` show where an error lives.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import torch


def _pair(out, ref):
    if out.shape != ref.shape:
        raise ValueError(f"out: expected the shape of ref {tuple(ref.shape)}, got {tuple(out.shape)}")
    return out.detach().double(), ref.detach().double().to(out.device)


def cosine(out, ref) -> float:
    a, b = _pair(out, ref)
    return float(torch.nn.functional.cosine_similarity(a.reshape(1, -1), b.reshape(1, -1)).item())


def relative_l1(out, ref) -> float:
    """sum |out - ref| / sum |ref|."""
    a, b = _pair(out, ref)
    return float((a - b).abs().sum() / b.abs().sum().clamp_min(torch.finfo(torch.float64).tiny))


def rmse(out, ref) -> float:
    a, b = _pair(out, ref)
    return float(((a - b) ** 2).mean().sqrt())


def max_abs(out, ref) -> float:
    a, b = _pair(out, ref)
    return float((a - b).abs().max())


def per_row(out, ref, token_dim: int = -2) -> torch.Tensor:
    """Relative L1 of every token row (all other dims but the last reduced): [N]."""
    a, b = _pair(out, ref)
    dims = [d for d in range(a.dim()) if d not in (token_dim % a.dim(), a.dim() - 1)]
    num = (a - b).abs().sum(dim=[*dims, -1])
    return num / b.abs().sum(dim=[*dims, -1]).clamp_min(torch.finfo(torch.float64).tiny)


def per_channel(out, ref) -> torch.Tensor:
    """Relative L1 of every channel of the last dimension: [D]."""
    a, b = _pair(out, ref)
    dims = list(range(a.dim() - 1))
    return (a - b).abs().sum(dim=dims) / b.abs().sum(dim=dims).clamp_min(torch.finfo(torch.float64).tiny)


@dataclass(frozen=True)
class ErrorReport:
    cosine: float
    relative_l1: float
    rmse: float
    max_abs: float

    def as_dict(self) -> dict:
        return asdict(self)


def compare(out, ref) -> ErrorReport:
    if not bool(torch.isfinite(out).all()):
        return ErrorReport(float("nan"), float("inf"), float("inf"), float("inf"))
    return ErrorReport(cosine(out, ref), relative_l1(out, ref), rmse(out, ref), max_abs(out, ref))
