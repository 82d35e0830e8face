"""The Hopper kernel (``kernels/attn_sm90.cu``, sm_90a) as a torch function.

Same call as :func:`sagelib.contract.attention` with ``preset="sm90"``: the
quantizers run with the sm90 preset's geometry (16-row q tiles, 128-key k blocks,
V padded to 128 tokens), V keeps the sm89 token permutation the kernel's P
fragments need (``kernels/include/attn_sm90/softmax.cuh``), then one persistent
launch computes stages 3-7. Q, K and V^T reach the kernel through TMA tensor maps
(:mod:`sagelib.cuda.tma`), built per call.

Only an sm_90 GPU runs it (wgmma, TMA and setmaxnreg are sm_90a instructions);
:func:`unavailable_reason` says why on any other machine.
"""

from __future__ import annotations

import os
import shlex

import torch

from sagelib.contract import presets as P
from sagelib.cuda import instances
from sagelib.cuda.build import load_function
from sagelib.cuda.launch import F32, I32, launch
from sagelib.cuda.ops import (
    KernelTarget, PreparedAttention, _sm_count, causal_shift, checked_options, finish_outputs, kernel_flags,
    output_buffers, prepare_for,
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


#: Environment variable with extra build options for every launch of the kernel, e.g.
#: ``SAGELIB_SM90_OPTIONS="-DSM90_Q_IN_REGISTERS=1" pytest -m gpu tests/test_cuda_sm90.py``
#: runs the GPU tests on an experimental schedule of kernels/include/attn_sm90/mainloop.cuh.
OPTIONS_ENV = "SAGELIB_SM90_OPTIONS"


def environment_options() -> tuple[str, ...]:
    """The build options in ``$SAGELIB_SM90_OPTIONS`` (shell words, each a -D or -U macro option)."""
    words = tuple(shlex.split(os.environ.get(OPTIONS_ENV, "")))
    bad = [w for w in words if not w.startswith(("-D", "-U"))]
    if bad:
        raise ValueError(f"{OPTIONS_ENV}: expected -DNAME[=VALUE] or -UNAME words, got {bad}; "
                         f"unset it or give macro options only, e.g. {OPTIONS_ENV}=\"-DSM90_Q_IN_REGISTERS=1\"")
    return words


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
    barriers = 8 * (2 * stages + 2) + 8  # the ring's and the Q slot's mbarriers, the tile index (padded to 8)
    return tiles + barriers + SMEM_ALIGN


def check_stages(head_dim: int, stages: int | None) -> int:
    """The K/V ring depth to build: ``stages`` if it fits in shared memory, else a ValueError."""
    if stages is None:
        return instances.SM90_STAGES[head_dim]
    if not isinstance(stages, int) or stages < 2 or shared_memory_bytes(head_dim, stages) > SMEM_LIMIT:
        fits = max(s for s in range(2, 16) if shared_memory_bytes(head_dim, s) <= SMEM_LIMIT)
        raise ValueError(f"stages: expected an int in 2..{fits} at head_dim {head_dim} (shared memory), got {stages!r}")
    return stages


#: The operands the kernel reads: the sm90 preset's quantizers, with V in the sm89 token order.
TARGET = KernelTarget(PRESET, PV_ACCUM, "the sm_90a kernel", permute_v=True)


def prepare(q, k, v, *, causal=False, sm_scale=None, layout="HND", granularity="per_thread", pv_accum="fp32+fp32",
            flavour=None, smooth_k=True, causal_alignment="bottom_right", check_finite=True) -> PreparedAttention:
    """Validate and quantize (stages 1, 2, 5) with the sm90 preset, for :func:`run_attention`."""
    return prepare_for(TARGET, q, k, v, causal=causal, sm_scale=sm_scale, layout=layout, granularity=granularity,
                       pv_accum=pv_accum, flavour=flavour, smooth_k=smooth_k, causal_alignment=causal_alignment,
                       check_finite=check_finite)


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
    to build another schedule of ``kernels/include/attn_sm90/mainloop.cuh``, added after those in
    ``$SAGELIB_SM90_OPTIONS`` (:func:`environment_options`); with
    ``-DSM90_TRACE=1``, ``trace`` (int64, TRACE_SHAPE, zeroed) receives the phase timestamps
    of ``kernels/include/attn_sm90/trace.cuh``.
    """
    b, h_q, n_q, width = p.q_int8.shape
    h_kv = p.k_int8.shape[1]
    stages = check_stages(width, stages)
    dev = p.q_int8.device
    out, out_hnd, lse = output_buffers(p, return_lse)
    flags, shift = kernel_flags(p), causal_shift(p)  # the flag bits are attn_mma.cu's (mainloop.cuh SM90_*)
    tiles = -(-n_q // CTA_Q) * h_q * b
    options = (*environment_options(), *build_options)
    fn = load_function("attn_sm90.cu", instances.attn_sm90(width, stages), ARCH, options=options)
    tile_counter = torch.zeros(1, dtype=torch.int32, device=dev)  # the dynamic tile scheduler's (scheduler.cuh)
    launch(fn, (min(tiles, _sm_count(dev)), 1, 1), (THREADS, 1, 1),
           (*tensor_maps(p), p.q_scale, p.k_scale, p.v_scale, out_hnd, *(int(s) for s in out_hnd.stride()[:3]), lse,
            I32(n_q), I32(p.n_kv), I32(h_q), I32(h_kv), I32(b), I32(p.q_scale.shape[-1]), I32(p.k_scale.shape[-1]),
            I32(flags), I32(shift), F32(p.sm_scale * P.LOG2E), tile_counter, trace),
           shared_mem=shared_memory_bytes(width, stages), name="attn_sm90_kernel")
    return finish_outputs(p, out, lse)


def attention(q, k, v, causal=False, sm_scale=None, layout="HND", preset=PRESET, granularity="per_thread",
              pv_accum="fp32+fp32", return_lse=False, **options):
    """The sm_90a kernel behind :func:`sagelib.contract.attention`'s call (preset must be 'sm90').

    Besides the contract's options, ``stages`` picks the K/V ring depth (:func:`check_stages`).
    """
    options = checked_options(TARGET, preset, options, extra=("stages",))
    stages = options.pop("stages", None)
    prepared = prepare(q, k, v, causal=causal, sm_scale=sm_scale, layout=layout, granularity=granularity,
                       pv_accum=pv_accum, **options)
    return run_attention(prepared, return_lse=return_lse, stages=stages)
