"""The kernels in ``kernels/`` as torch functions with the contract's signatures.

================================  ===============================================
function                          contract twin
================================  ===============================================
:func:`quantize_qk`               :func:`sagelib.contract.quantize_qk`
:func:`quantize_v`                :func:`sagelib.contract.quantize_v`
:func:`attention`                 :func:`sagelib.contract.attention` (sm89 preset)
================================  ===============================================

Inputs are validated with the contract's own checks, so bad input fails with
the same messages. Nothing is modified in place. Head dims other than 64 and
128 are zero-padded on the way in (exact: zero channels change no amax, no
score and no output) and sliced on the way out.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import torch

from sagelib.contract import presets as P
from sagelib.contract.fp8 import QuantizedV
from sagelib.contract.quantize import QuantizedQK, n_k_groups, n_q_groups
from sagelib.contract.validate import check_layout, check_qk, check_qkv, check_tensor, default_sm_scale, to_hnd
from sagelib.cuda import instances
from sagelib.cuda.build import load_function
from sagelib.cuda.launch import F32, F64, I32, launch, max_active_blocks

KERNEL_HEAD_DIMS = (64, 128)
QUANT_ROWS = 128
QUANT_Q_ROWS = instances.QUANT_QK_DEFAULT_ROWS  # kernels/quant_qk.cu's QUANT_QK_ROWS
ATTN_THREADS, ATTN_CTA_Q = 128, 128  #: 4 warps x 32 query rows (kernels/attn_mma.cu)
ATTN_CAUSAL, ATTN_PER_THREAD, ATTN_OUT_BF16 = 1, 2, 4
#: The attention kernel's geometry is the contract's sm89 preset (WARPQ 32, BLKK = CTA_K = 64).
ATTN_PRESET = "sm89"
ATTN_GRANULARITIES = ("per_thread", "per_warp")
ATTN_PV_ACCUM = ("fp32+fp32", "fp32+fp16")


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
                raise ValueError(f"{name}: expected a power of two, got {value}")

    def args(self):
        shift = int.bit_length
        return (I32(shift(self.tile) - 1), I32(shift(self.per_tile) - 1), I32(self.mod - 1),
                I32(shift(self.div) - 1))


def quant_threads(width: int, rows: int = QUANT_ROWS) -> int:
    """Threads per quantizer block of ``rows`` tokens: rows * head_dim / 32 (one 16-byte chunk of 4 rows each;
    kernels/include/quant_int8.cuh's QuadLayout)."""
    return rows * width // 32


def q_geometry(preset: str, granularity: str) -> GroupGeometry:
    g = _preset(preset)
    if granularity == "per_thread":
        return GroupGeometry(g.warpq, 8, 8, 1)
    if granularity == "per_warp":
        return GroupGeometry(g.warpq, 1, 1, 1)
    raise ValueError(f"granularity: the CUDA quantizers implement 'per_thread' and 'per_warp', got {granularity!r}")


def k_geometry(preset: str, granularity: str) -> GroupGeometry:
    g = _preset(preset)
    if granularity == "per_thread":
        return GroupGeometry(g.warpk, 4, 8, 2)
    if granularity == "per_warp":
        return GroupGeometry(g.blkk, 1, 1, 1)
    raise ValueError(f"granularity: the CUDA quantizers implement 'per_thread' and 'per_warp', got {granularity!r}")


def _preset(preset: str) -> P.Preset:
    if preset not in P.PRESETS:
        raise ValueError(f"preset: expected one of {list(P.PRESETS)}, got {preset!r}")
    return P.PRESETS[preset]


def _flavour(flavour, preset: str, granularity: str) -> str:
    flavour = flavour or _preset(preset).default_flavour(granularity)
    if flavour not in P.FLAVOURS:
        raise ValueError(f"flavour: expected one of {list(P.FLAVOURS)}, got {flavour!r}")
    return flavour


def _kernel_head_dim(d: int) -> int:
    for width in KERNEL_HEAD_DIMS:
        if d <= width:
            return width
    raise ValueError(f"head_dim: the CUDA kernels support head_dim up to 128, got {d}; use the reference backend")


def _prepared(x_hnd: torch.Tensor, width: int) -> torch.Tensor:
    """x as the kernels read it: head dim padded to ``width``, 16-byte aligned rows (copies only if needed)."""
    if x_hnd.shape[-1] != width:
        x_hnd = torch.nn.functional.pad(x_hnd, (0, width - x_hnd.shape[-1]))
    aligned = x_hnd.data_ptr() % 16 == 0 and all(s % 8 == 0 for s in x_hnd.stride()[:3])
    if x_hnd.stride(-1) != 1 or not aligned:
        x_hnd = x_hnd.contiguous()
    return x_hnd


def _hnd_strides(x: torch.Tensor):
    return tuple(int(s) for s in x.stride()[:3])


def _require_cuda(*tensors):
    for name, t in tensors:
        if not t.is_cuda:
            raise ValueError(f"{name}: expected a CUDA tensor for the cuda backend, got one on {t.device}; "
                             "move it with .cuda() or use the reference backend")


def _empty_like_layout(shape_hnd, dtype, layout: str, device):
    """An empty tensor in ``layout`` and its HND view."""
    b, h, n, d = shape_hnd
    t = torch.empty((b, h, n, d) if layout == "HND" else (b, n, h, d), dtype=dtype, device=device)
    return t, to_hnd(t, layout)


def _quantize_int8(x_hnd: torch.Tensor, geometry: GroupGeometry, n_groups: int, flavour: str, layout: str,
                   rows: int | None = None):
    """INT8 values (caller's layout, padded head dim) and scales of x through kernels/quant_qk.cu.

    ``rows``: tokens per block, 64 (the kernel's default, log seq 174) or 128; None picks 64 unless the group tile
    needs 128 (K without smoothing under the sm90 preset)."""
    rows = rows or (QUANT_Q_ROWS if QUANT_Q_ROWS % geometry.tile == 0 else QUANT_ROWS)
    if rows not in (QUANT_ROWS, QUANT_Q_ROWS) or rows % geometry.tile:
        raise ValueError(f"rows: expected 128 or 64 tokens per block, a multiple of the group tile "
                         f"({geometry.tile}), got {rows!r}")
    b, h, n, d = x_hnd.shape
    out, out_hnd = _empty_like_layout((b, h, n, d), torch.int8, layout, x_hnd.device)
    scale = torch.empty((b, h, n_groups), dtype=torch.float32, device=x_hnd.device)
    fn = load_function("quant_qk.cu", instances.quant_int8(d, x_hnd.dtype == torch.bfloat16, flavour == "cuda"),
                       options=instances.quant_int8_options(rows))
    # the grid covers whole 128-token tiles, as the scale groups do (n_groups counts the last tile's padding groups)
    launch(fn, (-(-n // QUANT_ROWS) * (QUANT_ROWS // rows), h, b), (quant_threads(d, rows), 1, 1),
           (x_hnd, *_hnd_strides(x_hnd), out_hnd, *_hnd_strides(out_hnd), scale, I32(n), I32(n_groups),
            *geometry.args()), name="quant_int8_kernel")
    return out, scale


@dataclass
class KVQuantized:
    k_int8: torch.Tensor | None  #: caller's layout, padded head dim
    k_scale: torch.Tensor | None
    km: torch.Tensor | None  #: [B, H, D] in k's dtype
    v_fp8: torch.Tensor | None  #: [B, H, D, N_pad] e4m3
    v_scale: torch.Tensor | None  #: [B, H, D]


def _quantize_kv(k_hnd, v_hnd, *, preset: str, granularity: str, flavour: str, pv_accum: str, layout: str,
                 do_k: bool, do_v: bool, permute_v: bool | None = None) -> KVQuantized:
    """K smoothing + INT8 K and/or e4m3 V in one persistent launch (kernels/quant_kv.cu).

    ``permute_v`` overrides the preset's V token order (the sm_90a kernel reads the sm89
    permutation with the sm90 preset's 128-token padding; attn_sm90/softmax.cuh says why).
    """
    x = k_hnd if k_hnd is not None else v_hnd
    b, h, n, d = x.shape
    dev = x.device
    g = _preset(preset)
    cta_k = g.cta_k
    n_pad = -(-n // cta_k) * cta_k
    k_int8 = k_scale = km = v_fp8 = v_scale = None
    k_args = (None, 0, 0, 0)
    kq_args = (None, 0, 0, 0)
    geometry, k_groups = GroupGeometry(1, 1, 1, 1), 1
    if do_k:
        geometry, k_groups = k_geometry(preset, granularity), n_k_groups(n, preset, granularity)
        k_int8, kq_hnd = _empty_like_layout((b, h, n, d), torch.int8, layout, dev)
        k_scale = torch.empty((b, h, k_groups), dtype=torch.float32, device=dev)
        km = torch.empty((b, h, d), dtype=x.dtype, device=dev)
        k_args = (k_hnd, *_hnd_strides(k_hnd))
        kq_args = (kq_hnd, *_hnd_strides(kq_hnd))
    v_args = (None, 0, 0, 0)
    if do_v:
        v_fp8 = torch.empty((b, h, d, n_pad), dtype=torch.float8_e4m3fn, device=dev)
        v_scale = torch.empty((b, h, d), dtype=torch.float32, device=dev)
        v_args = (v_hnd, *_hnd_strides(v_hnd))
    # Workspace, zeroed by one memset: [ticket, head_done[B*H]] int32, then per channel
    # k_sum fp64, v_amax u32, and the finalized head's km and V multiplier words (u32).
    n_ints = 1 + b * h
    ints_bytes = -(-4 * n_ints // 8) * 8
    bhd = b * h * d
    workspace = torch.zeros(ints_bytes + 8 * bhd + 3 * 4 * bhd, dtype=torch.uint8, device=dev)
    ints = workspace[:4 * n_ints].view(torch.int32)
    k_sum = workspace[ints_bytes:ints_bytes + 8 * bhd].view(torch.float64)
    v_amax, km_word, vmult_word = workspace[ints_bytes + 8 * bhd:].view(torch.int32).split(bhd)
    fn = load_function("quant_kv.cu", instances.quant_kv(d, x.dtype == torch.bfloat16, flavour == "cuda"))
    items_per_head = -(-n // QUANT_ROWS)
    n_items = items_per_head * b * h
    threads = quant_threads(d)
    resident = max(1, max_active_blocks(fn, threads)) * _sm_count(dev)
    grid = min(2 * n_items, resident)
    lag = kv_lag(grid, items_per_head)
    launch(fn, (grid, 1, 1), (threads, 1, 1),
           (*k_args, *v_args, *kq_args, k_scale, I32(k_groups), *geometry.args(), km, v_fp8, v_scale, I32(n_pad),
            F32(P.V_SCALE_MAX[pv_accum]), F32(float(np.float32(1) / np.float32(P.V_SCALE_MAX[pv_accum]))),
            I32(int(g.permute_v if permute_v is None else permute_v)), ints, k_sum, v_amax, km_word, vmult_word,
            I32(n), I32(h), I32(b), I32(lag), I32(int(do_k)), I32(int(do_v)), F64(1.0 / n)), name="quant_kv_kernel")
    return KVQuantized(k_int8, k_scale, km, v_fp8, v_scale)


def kv_lag(grid: int, items_per_head: int) -> int:
    """Tickets between a stats item and the apply item of the same tokens (kernels/quant_kv.cu).

    Each of the ``grid`` blocks holds at most two tickets (the one it runs and the
    next, fetched early), so when an apply item starts, the tickets more than about
    2 * grid before it are done. The last stats item of a head comes
    2 * (lag - items_per_head) + 1 tickets before the head's first apply item, so
    lag = grid + items_per_head keeps apply items from waiting while the re-read
    distance (about lag stats items of input) stays small enough for L2.
    lag >= items_per_head is what makes the schedule deadlock-free.
    """
    return grid + items_per_head


@lru_cache(maxsize=None)
def _sm_count_of(index: int) -> int:
    return torch.cuda.get_device_properties(index).multi_processor_count


def _sm_count(device: torch.device) -> int:
    return _sm_count_of(device.index if device.index is not None else torch.cuda.current_device())


def _slice_head_dim(x: torch.Tensor | None, d: int, dim: int = -1):
    if x is None or x.shape[dim] == d:
        return x
    return x.narrow(dim, 0, d).contiguous()


def quantize_qk(q, k, layout="HND", preset="sm90", granularity="per_thread", flavour=None, smooth_k=True,
                sm_scale=None, check_finite=True) -> QuantizedQK:
    """Stages 1-2 on the GPU; bit-exact twin of :func:`sagelib.contract.quantize_qk` (per_thread, per_warp)."""
    shapes = check_qk(q, k, layout, check_finite=check_finite)
    width = _kernel_head_dim(shapes.head_dim)
    _require_cuda(("q", q), ("k", k))
    flavour = _flavour(flavour, preset, granularity)
    qh, kh = _prepared(to_hnd(q, layout), width), _prepared(to_hnd(k, layout), width)
    q_int8, q_scale = _quantize_int8(qh, q_geometry(preset, granularity),
                                     n_q_groups(shapes.n_q, preset, granularity), flavour, layout)
    if smooth_k:
        kv = _quantize_kv(kh, None, preset=preset, granularity=granularity, flavour=flavour, pv_accum="fp32+fp32",
                          layout=layout, do_k=True, do_v=False)
        k_int8, k_scale, km = kv.k_int8, kv.k_scale, kv.km
    else:
        k_int8, k_scale = _quantize_int8(kh, k_geometry(preset, granularity),
                                         n_k_groups(shapes.n_kv, preset, granularity), flavour, layout)
        km = None
    d = shapes.head_dim
    if km is not None:
        b, h = km.shape[:2]
        km = km[..., :d].reshape(b, h, 1, d) if layout == "HND" else km[..., :d].reshape(b, 1, h, d)
    return QuantizedQK(q_int8=_slice_head_dim(q_int8, d), q_scale=q_scale, k_int8=_slice_head_dim(k_int8, d),
                       k_scale=k_scale, km=km, layout=layout, preset=preset, granularity=granularity,
                       flavour=flavour, scale_folded=False)


def quantize_v(v, layout="HND", preset="sm90", pv_accum="fp32+fp32", smooth_v=False, check_finite=True) -> QuantizedV:
    """Stage 5 for V on the GPU; bit-exact twin of :func:`sagelib.contract.quantize_v` (without smooth_v)."""
    check_layout(layout)
    check_tensor("v", v, check_finite=check_finite)
    _require_cuda(("v", v))
    _preset(preset)
    if pv_accum not in P.PV_ACCUM_MODES:
        raise ValueError(f"pv_accum: expected one of {list(P.PV_ACCUM_MODES)}, got {pv_accum!r}")
    if smooth_v:
        raise ValueError("smooth_v: the CUDA V quantizer does not implement smooth_v; pass smooth_v=False "
                         "or use the reference backend")
    vh = to_hnd(v, layout)
    d = vh.shape[-1]
    kv = _quantize_kv(None, _prepared(vh, _kernel_head_dim(d)), preset=preset, granularity="per_warp",
                      flavour="cuda", pv_accum=pv_accum, layout=layout, do_k=False, do_v=True)
    return QuantizedV(v_fp8=_slice_head_dim(kv.v_fp8, d, dim=2), v_scale=_slice_head_dim(kv.v_scale, d),
                      vm=None, n_tokens=vh.shape[2], preset=preset)


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


_ATTENTION_OPTIONS = ("flavour", "smooth_k", "causal_alignment", "check_finite", "lse_correction")


def prepare(q, k, v, *, causal=False, sm_scale=None, layout="HND", granularity="per_thread",
            pv_accum="fp32+fp32", flavour=None, smooth_k=True, causal_alignment="bottom_right",
            check_finite=True) -> PreparedAttention:
    """Validate and quantize (stages 1, 2, 5) for :func:`run_attention`."""
    return prepare_for(MMA_TARGET, q, k, v, causal=causal,
                       sm_scale=sm_scale, layout=layout, granularity=granularity, pv_accum=pv_accum, flavour=flavour,
                       smooth_k=smooth_k, causal_alignment=causal_alignment, check_finite=check_finite)


@dataclass(frozen=True)
class KernelTarget:
    """What an attention kernel reads: its contract preset, the accumulation modes it has, its V order."""

    preset: str
    pv_accum: tuple[str, ...]
    name: str  #: for error messages
    permute_v: bool | None = None  #: None: the preset's own V order


MMA_TARGET = KernelTarget(ATTN_PRESET, ATTN_PV_ACCUM, "the mma.sync kernel")


def prepare_for(target: KernelTarget, q, k, v, *, causal, sm_scale, layout, granularity, pv_accum, flavour,
                smooth_k, causal_alignment, check_finite) -> PreparedAttention:
    """Validate and quantize q, k, v (stages 1, 2, 5) the way ``target`` reads them."""
    shapes = check_qkv(q, k, v, layout, check_finite=check_finite)
    width = _kernel_head_dim(shapes.head_dim)
    _require_cuda(("q", q), ("k", k), ("v", v))
    if granularity not in ATTN_GRANULARITIES:
        raise ValueError(f"granularity: {target.name} implements {list(ATTN_GRANULARITIES)}, got {granularity!r}")
    if pv_accum not in target.pv_accum:
        raise ValueError(f"pv_accum: {target.name} implements {list(target.pv_accum)}, got {pv_accum!r}")
    if causal_alignment not in P.CAUSAL_ALIGNMENTS:
        raise ValueError(f"causal_alignment: expected one of {list(P.CAUSAL_ALIGNMENTS)}, got {causal_alignment!r}")
    if not smooth_k:
        raise ValueError(f"smooth_k: {target.name} always smooths K (exact for the output); pass smooth_k=True")
    flavour = _flavour(flavour, target.preset, granularity)
    qh = _prepared(to_hnd(q, layout), width)
    kh = _prepared(to_hnd(k, layout), width)
    vh = _prepared(to_hnd(v, layout), width)
    q_int8, q_scale = _quantize_int8(qh, q_geometry(target.preset, granularity),
                                     n_q_groups(shapes.n_q, target.preset, granularity), flavour, "HND")
    kv = _quantize_kv(kh, vh, preset=target.preset, granularity=granularity, flavour=flavour, pv_accum=pv_accum,
                      layout="HND", do_k=True, do_v=True, permute_v=target.permute_v)
    return PreparedAttention(
        q_int8=q_int8, q_scale=q_scale, k_int8=kv.k_int8, k_scale=kv.k_scale, km=kv.km, v_fp8=kv.v_fp8,
        v_scale=kv.v_scale, q_hnd=to_hnd(q, layout), n_q=shapes.n_q, n_kv=shapes.n_kv, head_dim=shapes.head_dim,
        layout=layout, dtype=q.dtype, granularity=granularity, pv_accum=pv_accum, causal=bool(causal),
        causal_alignment=causal_alignment, sm_scale=default_sm_scale(shapes.head_dim, sm_scale))


def output_buffers(p: PreparedAttention, return_lse: bool):
    """(out in the caller's layout, its HND view, lse or None) for an attention kernel to write."""
    b, h_q, n_q, width = p.q_int8.shape
    out, out_hnd = _empty_like_layout((b, h_q, n_q, width), p.dtype, p.layout, p.q_int8.device)
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
    out = _slice_head_dim(out, p.head_dim)
    if lse is None:
        return out
    if p.km is not None:  # lse_true = lse_kernel + sm_scale * q . km, in fp32 (contract section 1)
        h_q, h_kv = p.q_int8.shape[1], p.k_int8.shape[1]
        heads = torch.arange(h_q, device=lse.device) // (h_q // h_kv)
        km = p.km[:, heads, : p.head_dim].float()
        lse = lse + p.sm_scale * torch.einsum("bhnd,bhd->bhn", p.q_hnd.float(), km)
    return out, lse


def run_attention(p: PreparedAttention, return_lse: bool = False, build_options: tuple[str, ...] = ()):
    """Stages 3-7: the mma.sync kernel (kernels/attn_mma.cu) on prepared operands.

    ``build_options`` are extra NVRTC macro options for experiments: the -D switch of a variant added to
    kernels/attn_mma.cu for the experiment (the default build has none).
    """
    b, h_q, n_q, width = p.q_int8.shape
    h_kv = p.k_int8.shape[1]
    out, out_hnd, lse = output_buffers(p, return_lse)
    flags, shift = kernel_flags(p), causal_shift(p)
    fn = load_function("attn_mma.cu", instances.attn_mma(width, p.pv_accum == "fp32+fp16"), options=build_options)
    launch(fn, (-(-n_q // ATTN_CTA_Q), h_q, b), (ATTN_THREADS, 1, 1),
           (p.q_int8, *_hnd_strides(p.q_int8), p.k_int8, *_hnd_strides(p.k_int8), p.v_fp8, p.q_scale, p.k_scale,
            p.v_scale, out_hnd, *_hnd_strides(out_hnd), lse, I32(n_q), I32(p.n_kv), I32(p.v_fp8.shape[-1]),
            I32(h_q), I32(h_kv), I32(p.q_scale.shape[-1]), I32(p.k_scale.shape[-1]), I32(flags), I32(shift),
            F32(p.sm_scale * P.LOG2E)),
           shared_mem=3 * ATTN_CTA_Q * width, name="attn_mma_kernel")  # AttnSmem<D>::TOTAL
    return finish_outputs(p, out, lse)


def checked_options(target: KernelTarget, preset: str, options: dict, extra: tuple[str, ...] = ()) -> dict:
    """The ``**options`` of an attention call for ``target``, validated; lse_correction removed."""
    if preset != target.preset:
        raise ValueError(f"preset: {target.name}'s geometry is the {target.preset!r} preset, got {preset!r}")
    allowed = _ATTENTION_OPTIONS + extra
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise ValueError(f"options: unknown or unsupported by {target.name}: {unknown}; "
                         f"expected some of {list(allowed)}")
    options = dict(options)
    if options.pop("lse_correction", "fp32") != "fp32":
        raise ValueError(f"lse_correction: {target.name} adds the smoothing correction in fp32; pass 'fp32'")
    return options


def attention(q, k, v, causal=False, sm_scale=None, layout="HND", preset="sm89", granularity="per_thread",
              pv_accum="fp32+fp32", return_lse=False, **options):
    """Our kernels behind :func:`sagelib.contract.attention`'s call (preset must be 'sm89')."""
    options = checked_options(MMA_TARGET, preset, options)
    prepared = prepare(q, k, v, causal=causal, sm_scale=sm_scale, layout=layout, granularity=granularity,
                       pv_accum=pv_accum, **options)
    return run_attention(prepared, return_lse=return_lse)
