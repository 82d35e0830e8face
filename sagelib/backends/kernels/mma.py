"""The portable attention kernel (``kernels/attn_mma.cu``, mma.sync) as a torch function.

:func:`attention` is the twin of :func:`sagelib.contract.attention` under the sm89 preset; :func:`prepare`
and :func:`run_attention` split it into quantization and the kernel alone (for kernel-only timing).
"""

from __future__ import annotations

from sagelib.backends.kernels.operands import (
    KernelTarget,
    PreparedAttention,
    causal_shift,
    checked_options,
    finish_outputs,
    kernel_flags,
    output_buffers,
    strides,
)
from sagelib.backends.kernels.quantizers import prepare_for
from sagelib.contract import presets as P
from sagelib.contract.arguments import check_flag
from sagelib.cuda import instances
from sagelib.cuda.build import load_function
from sagelib.cuda.prepared import LaunchSpec, run_spec

ATTN_THREADS, ATTN_CTA_Q = instances.ATTN_MMA_THREADS, instances.ATTN_MMA_CTA_Q  #: 4 warps x 32 query rows


#: The attention kernel's geometry is the contract's sm89 preset (WARPQ 32, BLKK = CTA_K = 64).
ATTN_PRESET = "sm89"


ATTN_PV_ACCUM = ("fp32+fp32", "fp32+fp16")


def prepare(q, k, v, *, causal=False, sm_scale=None, layout="HND", granularity="per_thread",
            pv_accum="fp32+fp32", flavour=None, smooth_k=True, causal_alignment="bottom_right",
            check_finite=True) -> PreparedAttention:
    """Validate and quantize (stages 1, 2, 5) for :func:`run_attention`."""
    return prepare_for(MMA_TARGET, q, k, v, causal=causal,
                       sm_scale=sm_scale, layout=layout, granularity=granularity, pv_accum=pv_accum, flavour=flavour,
                       smooth_k=smooth_k, causal_alignment=causal_alignment, check_finite=check_finite)


MMA_TARGET = KernelTarget(ATTN_PRESET, ATTN_PV_ACCUM, "the mma.sync kernel")


def run_attention(p: PreparedAttention, return_lse: bool = False, build_options: tuple[str, ...] = ()):
    """Stages 3-7: the mma.sync kernel (kernels/attn_mma.cu) on prepared operands.

    ``build_options`` are extra NVRTC macro options for experiments: the -D switch of a variant added to
    kernels/attn_mma.cu for the experiment (the default build has none).
    """
    out, out_hnd, lse = output_buffers(p, return_lse)
    run_spec(attention_spec(p, out_hnd, lse, build_options))
    return finish_outputs(p, out, lse)


def attention_spec(p: PreparedAttention, out_hnd, lse, build_options: tuple[str, ...] = ()) -> LaunchSpec:
    """The attention launch of :func:`run_attention` writing ``out_hnd`` (and ``lse`` unless None)."""
    b, h_q, n_q, width = p.q_int8.shape
    h_kv = p.k_int8.shape[1]
    flags, shift = kernel_flags(p), causal_shift(p)
    fn = load_function("attn_mma.cu", instances.attn_mma(width, p.pv_accum == "fp32+fp16"), options=build_options)
    return LaunchSpec(fn, (-(-n_q // ATTN_CTA_Q), h_q, b), (ATTN_THREADS, 1, 1), "AttnMmaParams",
                      dict(q=p.q_int8, **strides("q", p.q_int8), k=p.k_int8, **strides("k", p.k_int8), v=p.v_fp8,
                           q_scale=p.q_scale, k_scale=p.k_scale, v_scale=p.v_scale, out=out_hnd,
                           **strides("o", out_hnd), lse=lse, n_q=n_q, n_kv=p.n_kv, n_pad=p.v_fp8.shape[-1],
                           heads_q=h_q, heads_kv=h_kv, q_groups=p.q_scale.shape[-1], k_groups=p.k_scale.shape[-1],
                           flags=flags, causal_shift=shift, sm_scale_log2e=p.sm_scale * P.LOG2E),
                      shared_mem=instances.attn_mma_shared_bytes(width), name="attn_mma_kernel")


def attention(q, k, v, causal=False, sm_scale=None, layout="HND", preset="sm89", granularity="per_thread",
              pv_accum="fp32+fp32", return_lse=False, **options):
    """Our kernels behind :func:`sagelib.contract.attention`'s call (preset must be 'sm89')."""
    check_flag("return_lse", return_lse)  # before anything is quantized
    options = checked_options(MMA_TARGET, preset, options)
    prepared = prepare(q, k, v, causal=causal, sm_scale=sm_scale, layout=layout, granularity=granularity,
                       pv_accum=pv_accum, **options)
    return run_attention(prepared, return_lse=return_lse)
