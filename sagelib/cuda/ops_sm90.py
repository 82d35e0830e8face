"""The Hopper kernel (``kernels/attn_sm90.cu``, sm_90a) as a torch function.

Same call as :func:`sagelib.contract.attention` with ``preset="sm90"``: the
quantizers run with the sm90 preset's geometry (16-row q tiles, 128-key k blocks,
V padded to 128 tokens), V keeps the sm89 token permutation the kernel's P
fragments need (``kernels/include/attn_sm90/softmax.cuh``), then one persistent
launch computes stages 3-7. Q, K and V^T reach the kernel through TMA tensor maps
(:mod:`sagelib.cuda.tma`), built per call.

Only an sm_90 GPU runs it (wgmma, TMA and setmaxnreg are sm_90a instructions);
:func:`unavailable_reason` says so elsewhere.
"""

from __future__ import annotations

import torch

from sagelib.contract import presets as P
from sagelib.contract.quantize import n_q_groups
from sagelib.contract.validate import check_qkv, default_sm_scale, to_hnd
from sagelib.cuda import instances
from sagelib.cuda.build import load_function
from sagelib.cuda.launch import F32, I32, launch
from sagelib.cuda.ops import (
    ATTN_GRANULARITIES, PreparedAttention, _empty_like_layout, _flavour, _kernel_head_dim, _prepared,
    _quantize_int8, _quantize_kv, _require_cuda, _sm_count, _slice_head_dim, q_geometry,
)
from sagelib.cuda.tma import tensor_map

PRESET = "sm90"
ARCH = "sm_90a"
THREADS = 384  #: producer warpgroup + two consumer warpgroups (kernels/include/attn_sm90/geometry.cuh)
CTA_Q, BLOCK_KEYS = 128, 128
SMEM_ALIGN = 1024  #: the kernel aligns its tiles to the swizzle atom itself; this much slack is requested
SMEM_LIMIT = 227 * 1024  #: dynamic shared memory one CTA may have on sm_90
PV_ACCUM = ("fp32+fp32",)
TRACE_SHAPE = (8, 64, 6)  #: consumer warps x key blocks x phase points (kernels/include/attn_sm90/trace.cuh)
SM90_CAUSAL, SM90_PER_THREAD, SM90_OUT_BF16 = 1, 2, 4
_OPTIONS = ("flavour", "smooth_k", "causal_alignment", "check_finite", "lse_correction", "stages")


def unavailable_reason() -> str | None:
    """None on an sm_90 GPU; otherwise why the Hopper kernel cannot run here."""
    if not torch.cuda.is_available():
        return "needs an sm_90 GPU (H100/H200); torch sees no CUDA GPU on this machine"
    major, minor = torch.cuda.get_device_capability()
    if (major, minor) != (9, 0):
        return (f"needs an sm_90 GPU (wgmma, TMA, setmaxnreg); this one is sm_{major}{minor}: "
                "use the 'cuda' backend (the portable mma.sync kernel)")
    return None


def shared_memory_bytes(head_dim: int, stages: int) -> int:
    """Dynamic shared memory of attn_sm90_kernel<head_dim, stages> (layout of Sm90Smem, plus alignment slack)."""
    tiles = CTA_Q * head_dim + stages * 2 * BLOCK_KEYS * head_dim
    barriers = 8 * (2 * stages + 2)
    return tiles + barriers + SMEM_ALIGN


def check_stages(head_dim: int, stages: int | None) -> int:
    """The K/V ring depth to build: ``stages`` if it fits in shared memory, else a ValueError."""
    if stages is None:
        return instances.SM90_STAGES[head_dim]
    if not isinstance(stages, int) or stages < 2 or shared_memory_bytes(head_dim, stages) > SMEM_LIMIT:
        fits = max(s for s in range(2, 16) if shared_memory_bytes(head_dim, s) <= SMEM_LIMIT)
        raise ValueError(f"stages: expected an int in 2..{fits} at head_dim {head_dim} (shared memory), got {stages!r}")
    return stages


def prepare(q, k, v, *, causal=False, sm_scale=None, layout="HND", granularity="per_thread", pv_accum="fp32+fp32",
            flavour=None, smooth_k=True, causal_alignment="bottom_right", check_finite=True) -> PreparedAttention:
    """Validate and quantize (stages 1, 2, 5) with the sm90 preset, for :func:`run_attention`."""
    shapes = check_qkv(q, k, v, layout, check_finite=check_finite)
    width = _kernel_head_dim(shapes.head_dim)
    _require_cuda(("q", q), ("k", k), ("v", v))
    if granularity not in ATTN_GRANULARITIES:
        raise ValueError(f"granularity: the sm_90a kernel implements {list(ATTN_GRANULARITIES)}, got {granularity!r}")
    if pv_accum not in PV_ACCUM:
        raise ValueError(f"pv_accum: the sm_90a kernel implements {list(PV_ACCUM)} (the sm90 preset's mode), "
                         f"got {pv_accum!r}")
    if causal_alignment not in P.CAUSAL_ALIGNMENTS:
        raise ValueError(f"causal_alignment: expected one of {list(P.CAUSAL_ALIGNMENTS)}, got {causal_alignment!r}")
    if not smooth_k:
        raise ValueError("smooth_k: the sm_90a path always smooths K (exact for the output); pass smooth_k=True")
    flavour = _flavour(flavour, PRESET, granularity)
    qh = _prepared(to_hnd(q, layout), width)
    kh = _prepared(to_hnd(k, layout), width)
    vh = _prepared(to_hnd(v, layout), width)
    q_int8, q_scale = _quantize_int8(qh, q_geometry(PRESET, granularity),
                                     n_q_groups(shapes.n_q, PRESET, granularity), flavour, "HND")
    kv = _quantize_kv(kh, vh, preset=PRESET, granularity=granularity, flavour=flavour, pv_accum=pv_accum,
                      layout="HND", do_k=True, do_v=True, permute_v=True)
    return PreparedAttention(
        q_int8=q_int8, q_scale=q_scale, k_int8=kv.k_int8, k_scale=kv.k_scale, km=kv.km, v_fp8=kv.v_fp8,
        v_scale=kv.v_scale, q_hnd=to_hnd(q, layout), n_q=shapes.n_q, n_kv=shapes.n_kv, head_dim=shapes.head_dim,
        layout=layout, dtype=q.dtype, granularity=granularity, pv_accum=pv_accum, causal=bool(causal),
        causal_alignment=causal_alignment, sm_scale=default_sm_scale(shapes.head_dim, sm_scale))


def tensor_maps(p: PreparedAttention):
    """The Q, K and V^T tensor maps the kernel copies tiles with (boxes of 128 rows / keys)."""
    b, h_q, n_q, width = p.q_int8.shape
    row_swizzle = "128B" if width == 128 else "64B"
    q_map = tensor_map(p.q_int8.reshape(b * h_q, n_q, width), (1, CTA_Q, width), row_swizzle)
    k_map = tensor_map(p.k_int8, (1, 1, BLOCK_KEYS, width), row_swizzle)
    v_map = tensor_map(p.v_fp8, (1, 1, width, BLOCK_KEYS), "128B")
    return q_map, k_map, v_map


def run_attention(p: PreparedAttention, return_lse: bool = False, stages: int | None = None,
                  build_options: tuple[str, ...] = (), trace: torch.Tensor | None = None):
    """Stages 3-7: the sm_90a kernel on operands prepared by :func:`prepare`.

    ``build_options`` are extra NVRTC options for experiments, e.g. ``("-DSM90_D64_OVERLAP=1",)``
    to build another schedule of ``kernels/include/attn_sm90/mainloop.cuh``; with
    ``-DSM90_TRACE=1``, ``trace`` (int64, TRACE_SHAPE, zeroed) receives the phase timestamps
    of ``kernels/include/attn_sm90/trace.cuh``.
    """
    b, h_q, n_q, width = p.q_int8.shape
    h_kv = p.k_int8.shape[1]
    stages = check_stages(width, stages)
    dev = p.q_int8.device
    out, out_hnd = _empty_like_layout((b, h_q, n_q, width), p.dtype, p.layout, dev)
    lse = torch.empty((b, h_q, n_q), dtype=torch.float32, device=dev) if return_lse else None
    flags = (SM90_CAUSAL if p.causal else 0) | (SM90_PER_THREAD if p.granularity == "per_thread" else 0) \
        | (SM90_OUT_BF16 if p.dtype == torch.bfloat16 else 0)
    shift = p.n_kv - p.n_q if p.causal_alignment == "bottom_right" else 0
    tiles = -(-n_q // CTA_Q) * h_q * b
    fn = load_function("attn_sm90.cu", instances.attn_sm90(width, stages), ARCH, options=tuple(build_options))
    launch(fn, (min(tiles, _sm_count(dev)), 1, 1), (THREADS, 1, 1),
           (*tensor_maps(p), p.q_scale, p.k_scale, p.v_scale, out_hnd, *(int(s) for s in out_hnd.stride()[:3]), lse,
            I32(n_q), I32(p.n_kv), I32(h_q), I32(h_kv), I32(b), I32(p.q_scale.shape[-1]), I32(p.k_scale.shape[-1]),
            I32(flags), I32(shift), F32(p.sm_scale * P.LOG2E), trace),
           shared_mem=shared_memory_bytes(width, stages), name="attn_sm90_kernel")
    out = _slice_head_dim(out, p.head_dim)
    if not return_lse:
        return out
    if p.km is not None:  # lse_true = lse_kernel + sm_scale * q . km, in fp32 (contract section 1)
        heads = torch.arange(h_q, device=dev) // (h_q // h_kv)
        km = p.km[:, heads, : p.head_dim].float()
        lse = lse + p.sm_scale * torch.einsum("bhnd,bhd->bhn", p.q_hnd.float(), km)
    return out, lse


def attention(q, k, v, causal=False, sm_scale=None, layout="HND", preset=PRESET, granularity="per_thread",
              pv_accum="fp32+fp32", return_lse=False, **options):
    """The sm_90a kernel behind :func:`sagelib.contract.attention`'s call (preset must be 'sm90')."""
    if preset != PRESET:
        raise ValueError(f"preset: the sm_90a kernel's geometry is the {PRESET!r} preset, got {preset!r}")
    unknown = sorted(set(options) - set(_OPTIONS))
    if unknown:
        raise ValueError(f"options: unknown or unsupported by the sm_90a kernel: {unknown}; "
                         f"expected some of {list(_OPTIONS)}")
    if options.pop("lse_correction", "fp32") != "fp32":
        raise ValueError("lse_correction: the sm_90a kernel adds the smoothing correction in fp32; pass 'fp32'")
    stages = options.pop("stages", None)
    prepared = prepare(q, k, v, causal=causal, sm_scale=sm_scale, layout=layout, granularity=granularity,
                       pv_accum=pv_accum, **options)
    return run_attention(prepared, return_lse=return_lse, stages=stages)

