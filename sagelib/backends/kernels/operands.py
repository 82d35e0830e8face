"""The operands our attention kernels read and the outputs they write, shared by the mma.sync and sm_90a hosts.

Scale-group geometry, head-dim padding, the prepared (quantized) operands, the flag bits and the
causal shift the kernels take, and the outputs as the contract returns them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import torch

from sagelib.contract import presets as P
from sagelib.contract.validate import (
    to_hnd,
)
from sagelib.cuda import params
from sagelib.errors import InputError

KERNEL_HEAD_DIMS = (64, 128)


#: the attention kernels' flag bits, read from AttnFlags in kernels/include/params.cuh
ATTN_CAUSAL, ATTN_PER_THREAD, ATTN_OUT_BF16 = (params.attn_flags()[name] for name in
                                              ("ATTN_CAUSAL", "ATTN_PER_THREAD", "ATTN_OUT_BF16"))


ATTN_GRANULARITIES = ("per_thread", "per_warp")


@dataclass(frozen=True)
class GroupGeometry:
    """group(row) = (row // tile) * per_tile + (row % mod) // div (kernels/include/quant_int8.cuh).

    Every field is a power of two; the kernels take them as shifts and a mask.
    """

    tile: int
    per_tile: int
    mod: int
    div: int

    def __post_init__(self):
        for name in ("tile", "per_tile", "mod", "div"):
            value = getattr(self, name)
            if value < 1 or value & (value - 1):
                raise InputError(f"{name}: expected a power of two, got {value}")

    def members(self) -> dict[str, int]:
        """The kernels' GroupGeometry members (tile_shift, per_tile_shift, mod_mask, div_shift of params.cuh)."""
        shift = int.bit_length
        return {"tile_shift": shift(self.tile) - 1, "per_tile_shift": shift(self.per_tile) - 1,
                "mod_mask": self.mod - 1, "div_shift": shift(self.div) - 1}


def q_geometry(preset: str, granularity: str) -> GroupGeometry:
    g = preset_of(preset)
    if granularity == "per_thread":
        return GroupGeometry(g.warpq, 8, 8, 1)
    if granularity == "per_warp":
        return GroupGeometry(g.warpq, 1, 1, 1)
    raise InputError(f"granularity: the CUDA quantizers implement 'per_thread' and 'per_warp', got {granularity!r}")


def k_geometry(preset: str, granularity: str) -> GroupGeometry:
    g = preset_of(preset)
    if granularity == "per_thread":
        return GroupGeometry(g.warpk, 4, 8, 2)
    if granularity == "per_warp":
        return GroupGeometry(g.blkk, 1, 1, 1)
    raise InputError(f"granularity: the CUDA quantizers implement 'per_thread' and 'per_warp', got {granularity!r}")


def preset_of(preset: str) -> P.Preset:
    if preset not in P.PRESETS:
        raise InputError(f"preset: expected one of {list(P.PRESETS)}, got {preset!r}")
    return P.PRESETS[preset]


def resolve_flavour(flavour, preset: str, granularity: str) -> str:
    flavour = flavour or preset_of(preset).default_flavour(granularity)
    if flavour not in P.FLAVOURS:
        raise InputError(f"flavour: expected one of {list(P.FLAVOURS)}, got {flavour!r}")
    return flavour


def kernel_head_dim(d: int) -> int:
    for width in KERNEL_HEAD_DIMS:
        if d <= width:
            return width
    raise InputError(f"head_dim: the CUDA kernels support head_dim up to 128, got {d}; use the reference backend")


def kernel_operand(x_hnd: torch.Tensor, width: int) -> torch.Tensor:
    """x as the kernels read it: head dim padded to ``width``, 16-byte aligned rows (copies only if needed)."""
    if x_hnd.shape[-1] != width:
        x_hnd = torch.nn.functional.pad(x_hnd, (0, width - x_hnd.shape[-1]))
    aligned = x_hnd.data_ptr() % 16 == 0 and all(s % 8 == 0 for s in x_hnd.stride()[:3])
    if x_hnd.stride(-1) != 1 or not aligned:
        x_hnd = x_hnd.contiguous()
    return x_hnd


def hnd_strides(x: torch.Tensor):
    return tuple(int(s) for s in x.stride()[:3])


def strides(prefix: str, x: torch.Tensor | None) -> dict[str, int]:
    """``{prefix}_sb, _sh, _sn``: the batch, head and token strides of an HND tensor (0 for None), as the
    kernels' parameter structs name them (params.cuh)."""
    values = hnd_strides(x) if x is not None else (0, 0, 0)
    return dict(zip((f"{prefix}_sb", f"{prefix}_sh", f"{prefix}_sn"), values))


def require_cuda(*tensors):
    for name, t in tensors:
        if not t.is_cuda:
            raise InputError(f"{name}: expected a CUDA tensor for the cuda backend, got one on {t.device}; "
                             "move it with .cuda() or use the reference backend")


def empty_like_layout(shape_hnd, dtype, layout: str, device):
    """An empty tensor in ``layout`` and its HND view."""
    b, h, n, d = shape_hnd
    t = torch.empty((b, h, n, d) if layout == "HND" else (b, n, h, d), dtype=dtype, device=device)
    return t, to_hnd(t, layout)


@lru_cache(maxsize=None)
def _sm_count_of(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def sm_count(device: torch.device) -> int:
    return _sm_count_of(device.index if device.index is not None else torch.cuda.current_device())


def slice_head_dim(x: torch.Tensor | None, d: int, dim: int = -1):
    if x is None or x.shape[dim] == d:
        return x
    return x.narrow(dim, 0, d).contiguous()


@dataclass
class PreparedAttention:
    """Everything the attention kernel reads, quantized ahead of time (for kernel-only timing)."""

    q_int8: torch.Tensor  #: HND view, padded head dim
    q_scale: torch.Tensor
    k_int8: torch.Tensor
    k_scale: torch.Tensor
    km: torch.Tensor | None  #: [B, H_kv, D]
    v_fp8: torch.Tensor
    v_scale: torch.Tensor
    q_hnd: torch.Tensor  #: the input q (HND view), for the lse correction
    n_q: int
    n_kv: int
    head_dim: int
    layout: str
    dtype: torch.dtype
    granularity: str
    pv_accum: str
    causal: bool
    causal_alignment: str
    sm_scale: float


ATTENTION_OPTIONS = ("flavour", "smooth_k", "causal_alignment", "check_finite", "lse_correction", "target",
                     "mma_accumulator")
#: Contract targets of the compute capabilities our kernels run on.
TARGET_OF_CAPABILITY = {(8, 9): "sm89", (9, 0): "sm90", (12, 0): "sm120", (12, 1): "sm121"}


def device_target(device) -> str | None:
    """The contract ``target`` of a CUDA device ("sm90" on an H200), None for the CPU or an unknown GPU."""
    device = torch.device(device)
    if device.type != "cuda":
        return None
    return TARGET_OF_CAPABILITY.get(torch.cuda.get_device_capability(device))


@dataclass(frozen=True)
class KernelTarget:
    """What an attention kernel reads: its contract preset, the accumulation modes it has, its V order."""

    preset: str
    pv_accum: tuple[str, ...]
    name: str  #: for error messages
    permute_v: bool | None = None  #: None: the preset's own V order


def output_buffers(p: PreparedAttention, return_lse: bool):
    """(out in the caller's layout, its HND view, lse or None) for an attention kernel to write."""
    b, h_q, n_q, width = p.q_int8.shape
    out, out_hnd = empty_like_layout((b, h_q, n_q, width), p.dtype, p.layout, p.q_int8.device)
    lse = torch.empty((b, h_q, n_q), dtype=torch.float32, device=p.q_int8.device) if return_lse else None
    return out, out_hnd, lse


def kernel_flags(p: PreparedAttention) -> int:
    """The `flags` argument both attention kernels take (ATTN_CAUSAL | ATTN_PER_THREAD | ATTN_OUT_BF16)."""
    return (ATTN_CAUSAL if p.causal else 0) | (ATTN_PER_THREAD if p.granularity == "per_thread" else 0) \
        | (ATTN_OUT_BF16 if p.dtype == torch.bfloat16 else 0)


def causal_shift(p: PreparedAttention) -> int:
    """Keys a query row sees beyond its own index when causal: N_kv - N_q bottom-right, 0 top-left."""
    return p.n_kv - p.n_q if p.causal_alignment == "bottom_right" else 0


def finish_outputs(p: PreparedAttention, out: torch.Tensor, lse: torch.Tensor | None):
    """The kernel's outputs as the contract returns them: head dim unpadded, lse with the smoothing correction."""
    out = slice_head_dim(out, p.head_dim)
    if lse is None:
        return out
    if p.km is not None:  # lse_true = lse_kernel + sm_scale * q . km, in fp32 (contract section 1)
        h_q, h_kv = p.q_int8.shape[1], p.k_int8.shape[1]
        heads = torch.arange(h_q, device=lse.device) // (h_q // h_kv)
        km = p.km[:, heads, : p.head_dim].float()
        lse = lse + p.sm_scale * torch.einsum("bhnd,bhd->bhn", p.q_hnd.float(), km)
    return out, lse


def checked_options(target: KernelTarget, preset: str, options: dict, extra: tuple[str, ...] = ()) -> dict:
    """The ``**options`` of an attention call for ``target``, validated; lse_correction removed."""
    if preset != target.preset:
        raise InputError(f"preset: {target.name}'s geometry is the {target.preset!r} preset, got {preset!r}")
    allowed = ATTENTION_OPTIONS + extra
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise InputError(f"options: unknown or unsupported by {target.name}: {unknown}; "
                         f"expected some of {list(allowed)}")
    options = dict(options)
    # the hardware decides these; a caller may state them (the contract twin's keywords) but not change them
    options.pop("target", None)
    options.pop("mma_accumulator", None)
    if options.pop("lse_correction", "fp32") != "fp32":
        raise InputError(f"lse_correction: {target.name} adds the smoothing correction in fp32; pass 'fp32'")
    return options
