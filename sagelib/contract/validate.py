"""Input checks shared by every entry point of the contract (and by the kernels' wrappers).

Each failure is a ValueError that names the argument, says what was expected and
what was given, and how to fix it. Nothing here modifies a caller's tensor.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from sagelib.contract import presets as P
from sagelib.contract.arguments import check_flag

INPUT_DTYPES = (torch.float16, torch.bfloat16)


@dataclass(frozen=True)
class Shapes:
    batch: int
    heads_q: int
    heads_kv: int
    n_q: int
    n_kv: int
    head_dim: int

    @property
    def group_size(self) -> int:
        """Query heads per kv head (GQA ratio)."""
        return self.heads_q // self.heads_kv

    @property
    def padded_head_dim(self) -> int:
        return P.padded_head_dim(self.head_dim)


def check_layout(layout: str) -> str:
    if layout not in P.LAYOUTS:
        raise ValueError(
            f"layout: expected 'HND' ([batch, heads, tokens, head_dim]) or 'NHD' "
            f"([batch, tokens, heads, head_dim]), got {layout!r}"
        )
    return layout


def to_hnd(x: torch.Tensor, layout: str) -> torch.Tensor:
    """A [B, H, N, D] view of ``x`` (no copy)."""
    return x if layout == "HND" else x.transpose(1, 2)


def from_hnd(x: torch.Tensor, layout: str) -> torch.Tensor:
    """Back to the caller's layout, contiguous."""
    return (x if layout == "HND" else x.transpose(1, 2)).contiguous()


def check_tensor(name: str, x, *, check_finite: bool = True, dtypes=INPUT_DTYPES) -> None:
    """One tensor's type, dtype, rank and last stride; then (``check_finite``) its values."""
    _check_form(name, x, dtypes)
    if check_flag("check_finite", check_finite):
        _check_data((name, x))


def _check_form(name: str, x, dtypes=INPUT_DTYPES) -> None:
    """What can be judged without reading the tensor's data."""
    if not isinstance(x, torch.Tensor):
        raise ValueError(f"{name}: expected a torch.Tensor, got {type(x).__name__}")
    if x.dtype not in dtypes:
        wanted = " or ".join(str(d) for d in dtypes)
        raise ValueError(
            f"{name}: expected dtype {wanted}, got {x.dtype}; convert with {name}.half() or {name}.bfloat16()"
        )
    if x.dim() != 4:
        raise ValueError(
            f"{name}: expected a 4-d tensor ([B, H, N, D] for HND or [B, N, H, D] for NHD), "
            f"got shape {tuple(x.shape)}"
        )
    if x.shape[-1] > 1 and x.stride(-1) != 1:
        raise ValueError(
            f"{name}: expected a contiguous last (head_dim) dimension, got stride {x.stride(-1)}; "
            f"pass {name}.contiguous()"
        )


def _check_data(*named) -> None:
    """Real data (not the meta device), then finite values; only after the devices agree."""
    for name, x in named:
        if x.is_meta:
            raise ValueError(
                f"{name}: expected a tensor with data on cpu or cuda, got a meta tensor (shape only, no values); "
                f"create {name} on a real device, e.g. torch.randn(..., device='cpu')"
            )
    for name, x in named:
        if x.numel() and not bool(torch.isfinite(x).all()):
            bad = int((~torch.isfinite(x)).sum())
            raise ValueError(
                f"{name}: contains {bad} NaN or Inf value(s); clean the input or pass check_finite=False"
            )


def check_qkv(q, k, v, layout: str, *, check_finite: bool = True) -> Shapes:
    """Validate an attention call and return its shapes (in HND terms).

    Order: layout, each tensor's form, one dtype, one device, and only then the data (meta, NaN/Inf),
    so a mixed or meta device is named as such and never reached through a scan of the values.
    """
    check_layout(layout)
    check_flag("check_finite", check_finite)
    for name, x in (("q", q), ("k", k), ("v", v)):
        _check_form(name, x)
    if not (q.dtype == k.dtype == v.dtype):
        raise ValueError(
            f"k, v: expected the dtype of q ({q.dtype}), got k {k.dtype} and v {v.dtype}; convert them to one dtype"
        )
    if not (q.device == k.device == v.device):
        raise ValueError(
            f"k, v: expected the device of q ({q.device}), got k on {k.device} and v on {v.device}; "
            "move them with .to(q.device)"
        )
    shapes = _check_shapes(to_hnd(q, layout).shape, to_hnd(k, layout).shape, to_hnd(v, layout).shape, layout)
    if check_finite:
        _check_data(("q", q), ("k", k), ("v", v))
    elif q.is_meta:
        _check_data(("q", q))
    return shapes


def check_qk(q, k, layout: str, *, check_finite: bool = True) -> Shapes:
    check_layout(layout)
    check_flag("check_finite", check_finite)
    _check_form("q", q)
    _check_form("k", k)
    if q.dtype != k.dtype:
        raise ValueError(f"k: expected the dtype of q ({q.dtype}), got {k.dtype}; convert it with k.to(q.dtype)")
    if q.device != k.device:
        raise ValueError(f"k: expected the device of q ({q.device}), got {k.device}; move it with k.to(q.device)")
    qs, ks = to_hnd(q, layout).shape, to_hnd(k, layout).shape
    shapes = _check_shapes(qs, ks, ks, layout)
    if check_finite:
        _check_data(("q", q), ("k", k))
    elif q.is_meta:
        _check_data(("q", q))
    return shapes


def _check_shapes(qs, ks, vs, layout: str) -> Shapes:
    axes = "[B, H, N, D]" if layout == "HND" else "[B, N, H, D]"

    def show(s):
        return tuple(s) if layout == "HND" else (s[0], s[2], s[1], s[3])

    if ks != vs:
        raise ValueError(f"v: expected the shape of k {show(ks)} in layout {layout} {axes}, got {show(vs)}")
    if qs[0] != ks[0]:
        raise ValueError(f"k: expected batch {qs[0]} (the batch of q), got {ks[0]}")
    if qs[3] != ks[3]:
        raise ValueError(f"k: expected head_dim {qs[3]} (the head_dim of q), got {ks[3]}")
    if ks[1] == 0 or qs[1] % ks[1] != 0:
        raise ValueError(
            f"k: the number of kv heads ({ks[1]}) must divide the number of query heads ({qs[1]}) for GQA; "
            f"check the layout ({layout} = {axes}) or repeat the kv heads"
        )
    if qs[2] < 1 or ks[2] < 1:
        raise ValueError(f"q, k: expected at least one token, got N_q={qs[2]}, N_kv={ks[2]}")
    if qs[3] < 1:
        raise ValueError("q: expected head_dim >= 1, got 0")
    P.padded_head_dim(qs[3])  # raises for head_dim > 256
    return Shapes(batch=qs[0], heads_q=qs[1], heads_kv=ks[1], n_q=qs[2], n_kv=ks[2], head_dim=qs[3])


def check_score_range(q: torch.Tensor, k: torch.Tensor, sm_scale: float) -> None:
    """Refuse inputs whose scores could reach ``presets.SCORE_LIMIT`` (2^30) in the log2 domain.

    The bound: max|q| * 2 max|k| (K minus its mean) * head_dim * sm_scale * log2(e). Beyond 2^30 a score's
    fp32 ulp passes 64, and the kernels' fused exp2 argument (s * mult - m in one FMA, against a rounded row
    max) can err by half of it: exp2 then overflows and rows turn to NaN. Such inputs are far beyond any
    model's (|x| about 6e3 at head_dim 64 and 128, whatever the dtype, at the default sm_scale).
    """
    head_dim = q.shape[-1]
    q_max, k_max = float(q.abs().amax()), float(k.abs().amax())
    bound = q_max * 2.0 * k_max * head_dim * sm_scale * P.LOG2E
    if not bound <= P.SCORE_LIMIT:
        raise ValueError(
            f"q, k, sm_scale: scores could reach {bound:.3g} in the log2 domain, beyond the {P.SCORE_LIMIT:.3g} the "
            f"kernels keep exact enough for exp2 (max|q|={q_max:.3g}, max|k|={k_max:.3g}, sm_scale={sm_scale:.3g}); "
            "scale q, k or sm_scale down (softmax is the same for scores shifted or scaled within the limit), or "
            "pass check_finite=False to skip this check at your own risk")


def pad_head_dim(x: torch.Tensor, width: int) -> torch.Tensor:
    """Zero-pad the last dimension up to ``width`` (a new tensor; the input is untouched)."""
    if x.shape[-1] == width:
        return x
    return torch.nn.functional.pad(x, (0, width - x.shape[-1]))


def default_sm_scale(head_dim: int, sm_scale: float | None) -> float:
    return head_dim ** -0.5 if sm_scale is None else float(sm_scale)
