"""The quantizers (``kernels/quant_qk.cu``, ``kernels/quant_kv.cu``) as torch functions with the contract's signatures.

:func:`quantize_qk` is the twin of :func:`sagelib.contract.quantize_qk`, :func:`quantize_v` of
:func:`sagelib.contract.quantize_v`; :func:`prepare_for` runs stages 1, 2 and 5 the way an attention
kernel reads them. Inputs are validated with the contract's own checks. Nothing is modified in place;
head dims other than 64 and 128 are zero-padded on the way in (exact) and sliced on the way out.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from sagelib.backends.kernels.operands import (
    ATTN_GRANULARITIES,
    GroupGeometry,
    KernelTarget,
    PreparedAttention,
    empty_like_layout,
    k_geometry,
    kernel_head_dim,
    kernel_operand,
    preset_of,
    q_geometry,
    require_cuda,
    resolve_flavour,
    slice_head_dim,
    sm_count,
    strides,
)
from sagelib.contract import presets as P
from sagelib.contract.arguments import check_call, check_flag
from sagelib.contract.fp8 import QuantizedV
from sagelib.contract.quantize import QuantizedQK, n_k_groups, n_q_groups
from sagelib.contract.validate import (
    check_layout,
    check_qk,
    check_qkv,
    check_score_range,
    check_tensor,
    default_sm_scale,
    to_hnd,
)
from sagelib.cuda import instances
from sagelib.cuda.build import load_function
from sagelib.cuda.launch import max_active_blocks
from sagelib.cuda.prepared import LaunchSpec, run_spec
from sagelib.errors import InputError

QUANT_ROWS = 128


QUANT_Q_ROWS = instances.QUANT_QK_DEFAULT_ROWS  # kernels/quant_qk.cu's QUANT_QK_ROWS


def quant_threads(width: int, rows: int = QUANT_ROWS) -> int:
    """Threads per quantizer block of ``rows`` tokens: rows * head_dim / 32 (one 16-byte chunk of 4 rows each;
    kernels/include/quant_int8.cuh's QuadLayout)."""
    return rows * width // 32


def quantize_int8(x_hnd: torch.Tensor, geometry: GroupGeometry, n_groups: int, flavour: str, layout: str,
                   rows: int | None = None):
    """INT8 values (caller's layout, padded head dim) and scales of x through kernels/quant_qk.cu.

    ``rows``: tokens per block, 64 (the kernel's default) or 128; None picks 64 unless the group tile
    needs 128 (K without smoothing under the sm90 preset)."""
    spec, out, scale = int8_spec(x_hnd, geometry, n_groups, flavour, layout, rows)
    run_spec(spec)
    return out, scale


def int8_spec(x_hnd: torch.Tensor, geometry: GroupGeometry, n_groups: int, flavour: str, layout: str,
              rows: int | None = None, zero: torch.Tensor | None = None):
    """(the launch of :func:`quantize_int8`, its int8 output, its scales): outputs allocated, nothing launched.
    ``zero``: a tensor of whole 32-bit words the launch also sets to 0 (a later launch's workspace)."""
    rows = rows or (QUANT_Q_ROWS if QUANT_Q_ROWS % geometry.tile == 0 else QUANT_ROWS)
    if rows not in (QUANT_ROWS, QUANT_Q_ROWS) or rows % geometry.tile:
        raise InputError(f"rows: expected 128 or 64 tokens per block, a multiple of the group tile "
                         f"({geometry.tile}), got {rows!r}")
    b, h, n, d = x_hnd.shape
    out, out_hnd = empty_like_layout((b, h, n, d), torch.int8, layout, x_hnd.device)
    scale = torch.empty((b, h, n_groups), dtype=torch.float32, device=x_hnd.device)
    fn = load_function("quant_qk.cu", instances.quant_int8(d, x_hnd.dtype == torch.bfloat16, flavour == "cuda"),
                       options=instances.quant_int8_options(rows))
    # the grid covers whole 128-token tiles, as the scale groups do (n_groups counts the last tile's padding groups)
    spec = LaunchSpec(fn, (-(-n // QUANT_ROWS) * (QUANT_ROWS // rows), h, b), (quant_threads(d, rows), 1, 1),
                      "QuantQkParams", dict(x=x_hnd, **strides("x", x_hnd), xq=out_hnd, **strides("q", out_hnd),
                                            scale=scale, n_tokens=n, n_groups=n_groups, **geometry.members(),
                                            zero=zero, zero_words=_words(zero)),
                      name="quant_int8_kernel")
    return spec, out, scale


def _words(zero: torch.Tensor | None) -> int:
    if zero is None:
        return 0
    nbytes = zero.numel() * zero.element_size()
    if nbytes % 4 or zero.data_ptr() % 4 or not zero.is_contiguous():
        raise InputError(f"zero: expected a contiguous tensor of whole 32-bit words, got {nbytes} bytes at "
                         f"address {zero.data_ptr():#x}")
    return nbytes // 4


@dataclass
class KVQuantized:
    k_int8: torch.Tensor | None  #: caller's layout, padded head dim
    k_scale: torch.Tensor | None
    km: torch.Tensor | None  #: [B, H, D] in k's dtype
    v_fp8: torch.Tensor | None  #: [B, H, D, N_pad] e4m3
    v_scale: torch.Tensor | None  #: [B, H, D]


def quantize_kv(k_hnd, v_hnd, *, preset: str, granularity: str, flavour: str, pv_accum: str, layout: str,
                 do_k: bool, do_v: bool, permute_v: bool | None = None) -> KVQuantized:
    """K smoothing + INT8 K and/or e4m3 V in one persistent launch (kernels/quant_kv.cu).

    ``permute_v`` overrides the preset's V token order (the sm_90a kernel reads the sm89
    permutation with the sm90 preset's 128-token padding; attn_sm90/softmax.cuh says why).
    """
    spec, kv = kv_spec(k_hnd, v_hnd, preset=preset, granularity=granularity, flavour=flavour, pv_accum=pv_accum,
                       layout=layout, do_k=do_k, do_v=do_v, permute_v=permute_v)
    run_spec(spec)
    return kv


def kv_workspace_bytes(b: int, h: int, d: int) -> int:
    """Bytes of quant_kv.cu's workspace: [ticket, head_done[B*H]] int32 (padded to 8 bytes), then per channel
    k_sum fp64, v_amax u32, and the finalized head's km and V multiplier words (u32)."""
    return -(-4 * (1 + b * h) // 8) * 8 + 8 * b * h * d + 3 * 4 * b * h * d


def kv_spec(k_hnd, v_hnd, *, preset: str, granularity: str, flavour: str, pv_accum: str, layout: str,
            do_k: bool, do_v: bool, permute_v: bool | None = None, workspace: torch.Tensor | None = None):
    """(the launch of :func:`quantize_kv`, its outputs): outputs allocated, nothing launched.

    ``workspace``: uint8, :func:`kv_workspace_bytes` long, zeroed before the launch runs by whoever passes it;
    None allocates a zeroed one (a memset now)."""
    x = k_hnd if k_hnd is not None else v_hnd
    b, h, n, d = x.shape
    dev = x.device
    g = preset_of(preset)
    cta_k = g.cta_k
    n_pad = -(-n // cta_k) * cta_k
    k_int8 = k_scale = km = v_fp8 = v_scale = None
    kq_hnd = None
    geometry, k_groups = GroupGeometry(1, 1, 1, 1), 1
    if do_k:
        geometry, k_groups = k_geometry(preset, granularity), n_k_groups(n, preset, granularity)
        k_int8, kq_hnd = empty_like_layout((b, h, n, d), torch.int8, layout, dev)
        k_scale = torch.empty((b, h, k_groups), dtype=torch.float32, device=dev)
        km = torch.empty((b, h, d), dtype=x.dtype, device=dev)
    if do_v:
        v_fp8 = torch.empty((b, h, d, n_pad), dtype=torch.float8_e4m3fn, device=dev)
        v_scale = torch.empty((b, h, d), dtype=torch.float32, device=dev)
    # Workspace, zeroed by one memset (kv_workspace_bytes says what it holds).
    n_ints = 1 + b * h
    ints_bytes = -(-4 * n_ints // 8) * 8
    bhd = b * h * d
    size = kv_workspace_bytes(b, h, d)
    if workspace is None:
        workspace = torch.zeros(size, dtype=torch.uint8, device=dev)
    elif workspace.dtype != torch.uint8 or workspace.numel() != size:
        raise InputError(f"workspace: expected {size} uint8 bytes (kv_workspace_bytes), got {workspace.numel()} "
                         f"{workspace.dtype}")
    ints = workspace[:4 * n_ints].view(torch.int32)
    k_sum = workspace[ints_bytes:ints_bytes + 8 * bhd].view(torch.float64)
    v_amax, km_word, vmult_word = workspace[ints_bytes + 8 * bhd:].view(torch.int32).split(bhd)
    fn = load_function("quant_kv.cu", instances.quant_kv(d, x.dtype == torch.bfloat16, flavour == "cuda"))
    items_per_head = -(-n // QUANT_ROWS)
    n_items = items_per_head * b * h
    threads = quant_threads(d)
    resident = max(1, max_active_blocks(fn, threads)) * sm_count(dev)
    grid = min(2 * n_items, resident)
    lag = kv_lag(grid, items_per_head)
    spec = LaunchSpec(fn, (grid, 1, 1), (threads, 1, 1), "QuantKvParams", dict(
        k=k_hnd if do_k else None, **strides("k", k_hnd if do_k else None),
        v=v_hnd if do_v else None, **strides("v", v_hnd if do_v else None), k_int8=kq_hnd,
        **strides("kq", kq_hnd), k_scale=k_scale, k_groups=k_groups, **geometry.members(), km=km, v_fp8=v_fp8,
        v_scale=v_scale, n_pad=n_pad, v_scale_max=P.V_SCALE_MAX[pv_accum],
        inv_v_scale_max=float(np.float32(1) / np.float32(P.V_SCALE_MAX[pv_accum])),
        permute_v=int(g.permute_v if permute_v is None else permute_v), workspace_ints=ints, k_sum=k_sum,
        v_amax=v_amax, km_word=km_word, vmult_word=vmult_word, n_tokens=n, heads=h, batch=b, lag=lag,
        do_k=int(do_k), do_v=int(do_v), inv_n=1.0 / n), name="quant_kv_kernel")
    return spec, KVQuantized(k_int8, k_scale, km, v_fp8, v_scale)


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


def quantize_qk(q, k, layout="HND", preset="sm90", granularity="per_thread", flavour=None, smooth_k=True,
                sm_scale=None, check_finite=True) -> QuantizedQK:
    """Stages 1-2 on the GPU; bit-exact twin of :func:`sagelib.contract.quantize_qk` (per_thread, per_warp)."""
    shapes = check_qk(q, k, layout, check_finite=check_finite)
    width = kernel_head_dim(shapes.head_dim)
    require_cuda(("q", q), ("k", k))
    flavour = resolve_flavour(flavour, preset, granularity)
    qh, kh = kernel_operand(to_hnd(q, layout), width), kernel_operand(to_hnd(k, layout), width)
    q_int8, q_scale = quantize_int8(qh, q_geometry(preset, granularity),
                                     n_q_groups(shapes.n_q, preset, granularity), flavour, layout)
    if smooth_k:
        kv = quantize_kv(kh, None, preset=preset, granularity=granularity, flavour=flavour, pv_accum="fp32+fp32",
                          layout=layout, do_k=True, do_v=False)
        k_int8, k_scale, km = kv.k_int8, kv.k_scale, kv.km
    else:
        k_int8, k_scale = quantize_int8(kh, k_geometry(preset, granularity),
                                         n_k_groups(shapes.n_kv, preset, granularity), flavour, layout)
        km = None
    d = shapes.head_dim
    if km is not None:
        b, h = km.shape[:2]
        km = km[..., :d].reshape(b, h, 1, d) if layout == "HND" else km[..., :d].reshape(b, 1, h, d)
    return QuantizedQK(q_int8=slice_head_dim(q_int8, d), q_scale=q_scale, k_int8=slice_head_dim(k_int8, d),
                       k_scale=k_scale, km=km, layout=layout, preset=preset, granularity=granularity,
                       flavour=flavour, scale_folded=False)


def quantize_v(v, layout="HND", preset="sm90", pv_accum="fp32+fp32", smooth_v=False, check_finite=True) -> QuantizedV:
    """Stage 5 for V on the GPU; bit-exact twin of :func:`sagelib.contract.quantize_v` (without smooth_v)."""
    check_layout(layout)
    check_tensor("v", v, check_finite=check_finite)
    require_cuda(("v", v))
    preset_of(preset)
    if pv_accum not in P.PV_ACCUM_MODES:
        raise InputError(f"pv_accum: expected one of {list(P.PV_ACCUM_MODES)}, got {pv_accum!r}")
    if smooth_v:
        raise InputError("smooth_v: the CUDA V quantizer does not implement smooth_v; pass smooth_v=False "
                         "or use the reference backend")
    vh = to_hnd(v, layout)
    d = vh.shape[-1]
    kv = quantize_kv(None, kernel_operand(vh, kernel_head_dim(d)), preset=preset, granularity="per_warp",
                      flavour="cuda", pv_accum=pv_accum, layout=layout, do_k=False, do_v=True)
    return QuantizedV(v_fp8=slice_head_dim(kv.v_fp8, d, dim=2), v_scale=slice_head_dim(kv.v_scale, d),
                      vm=None, n_tokens=vh.shape[2], preset=preset)


def prepare_for(target: KernelTarget, q, k, v, *, causal, sm_scale, layout, granularity, pv_accum, flavour,
                smooth_k, causal_alignment, check_finite) -> PreparedAttention:
    """Validate and quantize q, k, v (stages 1, 2, 5) the way ``target`` reads them."""
    shapes, width, flavour = checked_call(target, q, k, v, causal=causal, sm_scale=sm_scale, layout=layout,
                                          granularity=granularity, pv_accum=pv_accum, flavour=flavour,
                                          smooth_k=smooth_k, causal_alignment=causal_alignment,
                                          check_finite=check_finite)
    operands = tuple(kernel_operand(to_hnd(x, layout), width) for x in (q, k, v))
    q_spec, kv_launch, prepared = operand_specs(target, q, *operands, shapes=shapes, layout=layout,
                                                granularity=granularity, pv_accum=pv_accum, flavour=flavour,
                                                causal=causal, causal_alignment=causal_alignment, sm_scale=sm_scale)
    run_spec(q_spec)
    run_spec(kv_launch)
    return prepared


def checked_call(target: KernelTarget, q, k, v, *, causal, sm_scale, layout, granularity, pv_accum, flavour,
                 smooth_k, causal_alignment, check_finite):
    """(shapes, the kernels' head dim, the flavour) of an attention call for ``target``, every input checked."""
    check_call(causal=causal, sm_scale=sm_scale, check_finite=check_finite)
    check_flag("smooth_k", smooth_k)
    shapes = check_qkv(q, k, v, layout, check_finite=check_finite)
    width = kernel_head_dim(shapes.head_dim)
    require_cuda(("q", q), ("k", k), ("v", v))
    if granularity not in ATTN_GRANULARITIES:
        raise InputError(f"granularity: {target.name} implements {list(ATTN_GRANULARITIES)}, got {granularity!r}")
    if pv_accum not in target.pv_accum:
        raise InputError(f"pv_accum: {target.name} implements {list(target.pv_accum)}, got {pv_accum!r}")
    if causal_alignment not in P.CAUSAL_ALIGNMENTS:
        raise InputError(f"causal_alignment: expected one of {list(P.CAUSAL_ALIGNMENTS)}, got {causal_alignment!r}")
    if not smooth_k:
        raise InputError(f"smooth_k: {target.name} always smooths K (exact for the output); pass smooth_k=True")
    if check_finite:  # with the finite scan: scores that would overflow float32 are refused, as the contract does
        check_score_range(q, k, default_sm_scale(shapes.head_dim, sm_scale))
    return shapes, width, resolve_flavour(flavour, target.preset, granularity)


def operand_specs(target: KernelTarget, q, qh, kh, vh, *, shapes, layout, granularity, pv_accum, flavour, causal,
                  causal_alignment, sm_scale, workspace=None, zero=None):
    """(the Q quantizer's launch, the K/V quantizer's launch, the PreparedAttention they fill): the operands
    allocated, nothing launched. ``qh, kh, vh``: the kernels' operands (:func:`kernel_operand`); ``workspace``:
    see :func:`kv_spec`; ``zero``: words the Q quantizer clears (:func:`int8_spec`)."""
    q_spec, q_int8, q_scale = int8_spec(qh, q_geometry(target.preset, granularity),
                                        n_q_groups(shapes.n_q, target.preset, granularity), flavour, "HND",
                                        zero=zero)
    kv_launch, kv = kv_spec(kh, vh, preset=target.preset, granularity=granularity, flavour=flavour,
                            pv_accum=pv_accum, layout="HND", do_k=True, do_v=True, permute_v=target.permute_v,
                            workspace=workspace)
    prepared = PreparedAttention(
        q_int8=q_int8, q_scale=q_scale, k_int8=kv.k_int8, k_scale=kv.k_scale, km=kv.km, v_fp8=kv.v_fp8,
        v_scale=kv.v_scale, q_hnd=to_hnd(q, layout), n_q=shapes.n_q, n_kv=shapes.n_kv, head_dim=shapes.head_dim,
        layout=layout, dtype=q.dtype, granularity=granularity, pv_accum=pv_accum, causal=causal,
        causal_alignment=causal_alignment, sm_scale=default_sm_scale(shapes.head_dim, sm_scale))
    return q_spec, kv_launch, prepared
