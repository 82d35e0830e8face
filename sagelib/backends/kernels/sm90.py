"""The Hopper kernel (``kernels/attn_sm90.cu``, sm_90a) as a torch function.

Same call as :func:`sagelib.contract.attention` with ``preset="sm90"``: the
quantizers run with the sm90 preset's geometry (16-row q tiles, 128-key k blocks,
V padded to 128 tokens), V keeps the sm89 token permutation the kernel's P
fragments need (``kernels/include/attn_sm90/softmax.cuh``), then one persistent
launch computes stages 3-7. Q, K and V^T reach the kernel through TMA tensor maps
(:mod:`sagelib.cuda.tma`), built per call.

Geometries of the kernel (``kernels/include/attn_sm90/geometry.cuh``): the sm90 preset
(128-key steps) runs two consumer warpgroups at head_dim 128 and three at head_dim 64, where
a consumer's registers hold the 128-key step at 160; three consumer
warpgroups stepping 64 keys compute the sm90 preset with ``cta_k=64`` (the online-softmax
step and the inner accumulator span 64 keys; quantization is unchanged; at head_dim 128 P.V
runs in two halves of the channels so the accumulators fit). ``cta_k`` and the head dim
pick one (:func:`geometry_for`).

Only an sm_90 GPU runs it (wgmma, TMA and setmaxnreg are sm_90a instructions);
:func:`unavailable_reason` says why on any other machine.
"""

from __future__ import annotations

import functools
import os
import shlex
from dataclasses import dataclass

import torch

from sagelib.backends.kernels.operands import (
    KernelTarget,
    PreparedAttention,
    causal_shift,
    checked_options,
    finish_outputs,
    kernel_flags,
    output_buffers,
    sm_count,
    strides,
)
from sagelib.backends.kernels.quantizers import prepare_for
from sagelib.contract import presets as P
from sagelib.contract.arguments import check_flag
from sagelib.cuda import instances
from sagelib.cuda.build import load_function, macro_options
from sagelib.cuda.prepared import LaunchSpec, run_spec
from sagelib.cuda.tma import tensor_map
from sagelib.errors import InputError

PRESET = "sm90"
ARCH = "sm_90a"
Q_SLOTS = 2  #: Q tiles in shared memory (kernels/include/attn_sm90/geometry.cuh SM90_Q_SLOTS)
SMEM_ALIGN = 1024  #: the kernel aligns its tiles to the swizzle atom itself; this much slack is requested
SMEM_STRUCT_ALIGN = 8  #: Sm90Smem's alignment (its mbarriers are 64-bit), so its size is a multiple of 8
SMEM_LIMIT = 227 * 1024  #: dynamic shared memory one CTA may have on sm_90
#: the modes the kernel runs: fp32+fp16 is the inner level of kernels/include/attn_sm90/fp16_inner.cuh (build
#: option SM90_PV_F16), one-pass geometries only
PV_ACCUM = ("fp32+fp32", "fp32+fp16")
FP16_INNER_OPTIONS = instances.SM90_FP16_INNER_OPTIONS
TRACE_BLOCKS, TRACE_PRODUCER = 64, 8  #: the block rows and the producer's warp slot of the trace
TRACE_SHAPE = (9, TRACE_BLOCKS + 32, 6)  #: warps (8 consumer, the producer) x (blocks, tiles) x points (trace.cuh)


@dataclass(frozen=True)
class Geometry:
    """One built shape of the kernel: Sm90Geometry<consumers, block_keys> in geometry.cuh."""

    consumers: int   #: consumer warpgroups of 64 query rows each
    block_keys: int  #: keys per K/V ring stage and per online-softmax step (the contract's cta_k)

    @property
    def threads(self) -> int:  # the producer warpgroup + the consumers
        return 128 * (self.consumers + 1)

    @property
    def cta_q(self) -> int:  # query rows per tile
        return 64 * self.consumers


PRESET_GEOMETRY = Geometry(consumers=2, block_keys=128)  #: the sm90 preset (cta_k 128) at head_dim 128
PRESET_D64_GEOMETRY = Geometry(consumers=3, block_keys=128)  #: the sm90 preset at head_dim 64
ROTATION_GEOMETRY = Geometry(consumers=3, block_keys=64)  #: three consumers, cta_k 64


def geometry_for(cta_k: int | None, head_dim: int = 128) -> Geometry:
    """The geometry that computes the sm90 preset with traversal block ``cta_k`` (None: the preset's 128)
    at ``head_dim`` (64 or 128)."""
    if cta_k is None or cta_k == PRESET_GEOMETRY.block_keys:
        return PRESET_D64_GEOMETRY if head_dim == 64 else PRESET_GEOMETRY
    if cta_k != ROTATION_GEOMETRY.block_keys:
        raise InputError(f"cta_k: the sm_90a kernel is built for None (the preset's 128) or 64 keys, got {cta_k!r}")
    return ROTATION_GEOMETRY


#: Environment variable with extra build options for every launch of the kernel, e.g.
#: ``SAGELIB_SM90_OPTIONS="-DSM90_TRACE=1" pytest -m gpu tests/test_cuda_sm90.py``
#: runs the GPU tests on the build with the phase trace compiled in (an experiment's macro goes the same way).
OPTIONS_ENV = "SAGELIB_SM90_OPTIONS"


def environment_options() -> tuple[str, ...]:
    """The build options in ``$SAGELIB_SM90_OPTIONS`` (shell words, each a -D or -U macro option that a kernel
    source reads)."""
    return _options_of(os.environ.get(OPTIONS_ENV, ""))


@functools.lru_cache(maxsize=8)
def _options_of(text: str) -> tuple[str, ...]:
    """Checked once per value: every launch asks, and the check reads the kernel sources' names."""
    return macro_options(shlex.split(text), OPTIONS_ENV, f"{OPTIONS_ENV}=\"-DSM90_ABLATE_PACK=1\", or unset it")


def unavailable_reason() -> str | None:
    """None on an sm_90 GPU with the Hopper paths on; otherwise why the Hopper kernel cannot run here
    (the setting that switches them off first: :mod:`sagelib.cuda.features`)."""
    from sagelib.cuda.features import hopper_unavailable_reason

    return hopper_unavailable_reason()


def shared_memory_bytes(head_dim: int, stages: int, geometry: Geometry | None = None) -> int:
    """Dynamic shared memory of attn_sm90_kernel<head_dim, stages, ...> (layout of Sm90Smem, plus alignment slack);
    ``geometry`` None: the preset's at ``head_dim`` (:func:`geometry_for`)."""
    geometry = geometry or geometry_for(None, head_dim)
    tiles = Q_SLOTS * geometry.cta_q * head_dim + stages * 2 * geometry.block_keys * head_dim
    channel_scales = Q_SLOTS * head_dim * 4  # each Q slot's V channel scales (fp32)
    output_staging = 4 * geometry.consumers * 16 * (2 * head_dim + 16)  # 16 padded fp16 rows per consumer warp
    barriers = 8 * 2 * (stages + Q_SLOTS) + 4 * Q_SLOTS  # the ring's and the Q slots' mbarriers, the tile indices
    divisors = 5 * 12  # the tile decode's five FastDivisors (scheduler.cuh TileDivisors)
    layout = tiles + channel_scales + output_staging + barriers + divisors
    return -(-layout // SMEM_STRUCT_ALIGN) * SMEM_STRUCT_ALIGN + SMEM_ALIGN  # sizeof pads to the mbarriers' 8 bytes


def check_stages(head_dim: int, stages: int | None, geometry: Geometry | None = None) -> int:
    """The K/V ring depth to build: ``stages`` if it fits in shared memory, else a ValueError; ``geometry``
    None: the preset's at ``head_dim`` (:func:`geometry_for`)."""
    geometry = geometry or geometry_for(None, head_dim)
    if stages is None:
        built = (head_dim, geometry.consumers, geometry.block_keys)
        table = {**instances.SM90_STAGES, **instances.SM90_COMPARISON_STAGES}
        if built not in table:
            raise InputError(f"geometry: {geometry} is not built at head_dim {head_dim}; expected one of "
                             f"(head_dim, consumers, block_keys) {sorted(table)}")
        return table[built]
    if not isinstance(stages, int) or stages < 2 or shared_memory_bytes(head_dim, stages, geometry) > SMEM_LIMIT:
        fits = max(s for s in range(2, 32) if shared_memory_bytes(head_dim, s, geometry) <= SMEM_LIMIT)
        raise InputError(f"stages: expected an int in 2..{fits} at head_dim {head_dim} (shared memory), got {stages!r}")
    return stages


#: The operands the kernel reads: the sm90 preset's quantizers, with V in the sm89 token order.
TARGET = KernelTarget(PRESET, PV_ACCUM, "the sm_90a kernel", permute_v=True)


def prepare(q, k, v, *, causal=False, sm_scale=None, layout="HND", granularity="per_thread", pv_accum="fp32+fp32",
            flavour=None, smooth_k=True, causal_alignment="bottom_right", check_finite=True) -> PreparedAttention:
    """Validate and quantize (stages 1, 2, 5) with the sm90 preset, for :func:`run_attention`."""
    return prepare_for(TARGET, q, k, v, causal=causal, sm_scale=sm_scale, layout=layout, granularity=granularity,
                       pv_accum=pv_accum, flavour=flavour, smooth_k=smooth_k, causal_alignment=causal_alignment,
                       check_finite=check_finite)


def _row_swizzle(row_bytes: int) -> str:
    return "128B" if row_bytes == 128 else "64B"


def tensor_maps(p: PreparedAttention, geometry: Geometry):
    """The Q, K and V^T tensor maps the kernel copies tiles with (boxes of a tile's rows / a block's keys)."""
    b, h_q, n_q, width = p.q_int8.shape
    q_map = tensor_map(p.q_int8.reshape(b * h_q, n_q, width), (1, geometry.cta_q, width), _row_swizzle(width))
    k_map = tensor_map(p.k_int8, (1, 1, geometry.block_keys, width), _row_swizzle(width))
    v_map = tensor_map(p.v_fp8, (1, 1, width, geometry.block_keys), _row_swizzle(geometry.block_keys))
    return q_map, k_map, v_map


def kernel_instance(p: PreparedAttention, stages: int, geometry: Geometry, causal_instance: bool | None = None) -> str:
    """The attn_sm90_kernel instance a call runs: the causal-only one (CAUSAL_ONLY, instances.SM90_CAUSAL_ONLY)
    for a causal call in a geometry that has one, else the one for every call. ``causal_instance`` (experiments)
    forces the choice: False takes the general instance, True the causal one, which only a causal call may."""
    width = p.q_int8.shape[-1]
    built = (width, geometry.consumers, geometry.block_keys)
    has_causal = instances.has_causal_instance(*built)
    if causal_instance and not (p.causal and has_causal):
        raise InputError(f"causal_instance: True needs a causal call in a geometry with a causal instance "
                         f"({sorted(instances.SM90_CAUSAL_ONLY)} as (head_dim, consumers, block_keys)); this call is "
                         f"{'causal' if p.causal else 'not causal'} at {built}: pass None to let the call choose")
    causal_only = p.causal and has_causal if causal_instance is None else causal_instance
    return instances.attn_sm90(width, stages, geometry.consumers, geometry.block_keys, causal_only)


def run_attention(p: PreparedAttention, return_lse: bool = False, stages: int | None = None,
                  build_options: tuple[str, ...] = (), trace: torch.Tensor | None = None, cta_k: int | None = None,
                  geometry: Geometry | None = None, causal_instance: bool | None = None):
    """Stages 3-7: the sm_90a kernel on operands prepared by :func:`prepare`.

    ``cta_k`` (None or 64) and the head dim pick the geometry (:func:`geometry_for`): the output is
    the contract's sm90 preset with that ``cta_k``.

    ``build_options`` are extra NVRTC options for experiments, e.g. ``("-DSM90_ABLATE_PACK=1",)``
    to build another schedule of ``kernels/include/attn_sm90/mainloop.cuh``, added after those in
    ``$SAGELIB_SM90_OPTIONS`` (:func:`environment_options`); with
    ``-DSM90_TRACE=1``, ``trace`` (int64, TRACE_SHAPE, zeroed) receives the phase timestamps
    of ``kernels/include/attn_sm90/trace.cuh``. ``geometry`` (experiments) builds another
    Sm90Geometry than :func:`geometry_for` picks, with the same ``block_keys``; ``causal_instance``
    (experiments) forces the kernel instance (:func:`kernel_instance`).
    """
    checked_geometry(p.q_int8.shape[-1], cta_k, geometry, trace)  # before anything is allocated
    out, out_hnd, lse = output_buffers(p, return_lse)
    run_spec(attention_spec(p, out_hnd, lse, stages=stages, build_options=build_options, trace=trace, cta_k=cta_k,
                            geometry=geometry, causal_instance=causal_instance))
    return finish_outputs(p, out, lse)


def checked_geometry(width: int, cta_k: int | None, geometry: Geometry | None, trace) -> Geometry:
    """The geometry a run builds (``geometry`` or :func:`geometry_for`'s), with ``trace`` checked."""
    chosen = geometry_for(cta_k, width)
    if geometry is not None and geometry.block_keys != chosen.block_keys:
        raise InputError(f"geometry: expected block_keys {chosen.block_keys} (cta_k {cta_k}), got {geometry}")
    if trace is not None and (tuple(trace.shape) != TRACE_SHAPE or trace.dtype != torch.int64):
        raise InputError(f"trace: expected an int64 tensor of shape {TRACE_SHAPE} (sm90.TRACE_SHAPE), "
                         f"got {trace.dtype} {tuple(trace.shape)}")
    return geometry or chosen


def attention_spec(p: PreparedAttention, out_hnd, lse, stages: int | None = None, build_options: tuple[str, ...] = (),
                   trace: torch.Tensor | None = None, cta_k: int | None = None, geometry: Geometry | None = None,
                   causal_instance: bool | None = None, tile_counter: torch.Tensor | None = None) -> LaunchSpec:
    """The attention launch of :func:`run_attention` writing ``out_hnd`` (and ``lse`` unless None): its tensor maps
    encoded, nothing launched. ``tile_counter``: one int32 the scheduler counts tiles with, zero when the launch
    runs (None: a zeroed one is allocated now)."""
    b, h_q, n_q, width = p.q_int8.shape
    h_kv = p.k_int8.shape[1]
    geometry = checked_geometry(width, cta_k, geometry, trace)
    stages = check_stages(width, stages, geometry)
    dev = p.q_int8.device
    flags, shift = kernel_flags(p), causal_shift(p)  # AttnFlags (params.cuh)
    tiles = -(-n_q // geometry.cta_q) * h_q * b
    options = (*environment_options(), *fp16_inner_options(p, width, geometry), *build_options)
    fn = load_function("attn_sm90.cu", kernel_instance(p, stages, geometry, causal_instance), ARCH, options=options)
    if tile_counter is None:
        tile_counter = torch.zeros(1, dtype=torch.int32, device=dev)  # the dynamic tile scheduler's (scheduler.cuh)
    return LaunchSpec(fn, (min(tiles, sm_count(dev)), 1, 1), (geometry.threads, 1, 1), "AttnSm90Params",
                      dict(**dict(zip(("q_map", "k_map", "v_map"), tensor_maps(p, geometry))),
                           q_scale=p.q_scale, k_scale=p.k_scale, v_scale=p.v_scale, out=out_hnd,
                           **strides("o", out_hnd), lse=lse, n_q=n_q, n_kv=p.n_kv, heads_q=h_q, heads_kv=h_kv,
                           batch=b, q_groups=p.q_scale.shape[-1], k_groups=p.k_scale.shape[-1], flags=flags,
                           causal_shift=shift, sm_scale_log2e=p.sm_scale * P.LOG2E, tile_counter=tile_counter,
                           trace=trace),
                      shared_mem=shared_memory_bytes(width, stages, geometry), name="attn_sm90_kernel")


def fp16_inner_options(p: PreparedAttention, width: int, geometry: Geometry) -> tuple[str, ...]:
    """The build option of the fp32+fp16 inner level for a call prepared with it, () otherwise; the geometry that
    takes P.V in two channel passes (three consumers at head_dim 128) has no such build."""
    if p.pv_accum != "fp32+fp16":
        return ()
    if geometry.consumers == 3 and width == 128:
        raise InputError(f"pv_accum: 'fp32+fp16' is built for the one-pass geometries; {geometry} at head_dim {width} "
                         "takes P.V in two channel passes: use cta_k=None (the preset's 128) at head_dim 128")
    return FP16_INNER_OPTIONS


def attention(q, k, v, causal=False, sm_scale=None, layout="HND", preset=PRESET, granularity="per_thread",
              pv_accum="fp32+fp32", return_lse=False, **options):
    """The sm_90a kernel behind :func:`sagelib.contract.attention`'s call (preset must be 'sm90').

    Besides the contract's options, ``stages`` picks the K/V ring depth (:func:`check_stages`);
    the contract's ``cta_k`` (None or 64) picks the kernel's geometry (:func:`geometry_for`).
    """
    check_flag("return_lse", return_lse)  # before anything is quantized
    options = checked_options(TARGET, preset, options, extra=("stages", "cta_k"))
    stages, cta_k = options.pop("stages", None), options.pop("cta_k", None)
    geometry_for(cta_k)  # refuse an unbuilt cta_k before quantizing anything
    prepared = prepare(q, k, v, causal=causal, sm_scale=sm_scale, layout=layout, granularity=granularity,
                       pv_accum=pv_accum, **options)
    return run_attention(prepared, return_lse=return_lse, stages=stages, cta_k=cta_k)
