"""The template instantiations the launcher uses: what gets built, checked and cached.

One list per kernel file, so ``sagelib kernels check`` compiles exactly what
the host code in :mod:`sagelib.backends.kernels` launches.
"""

from __future__ import annotations


def _b(x: bool) -> str:
    return "true" if x else "false"


def quant_int8(head_dim: int, bf16: bool, cuda_flavour: bool) -> str:
    return f"quant_int8_kernel<{head_dim}, {_b(bf16)}, {_b(cuda_flavour)}>"


#: tokens per block of quant_qk.cu: its default, and the one a group tile of 128 tokens needs
QUANT_QK_DEFAULT_ROWS, QUANT_QK_TILE_ROWS = 64, 128


def quant_int8_options(rows: int) -> tuple[str, ...]:
    """The build options of quant_qk.cu for blocks of ``rows`` tokens (none for its default of 64)."""
    return () if rows == QUANT_QK_DEFAULT_ROWS else (f"-DQUANT_QK_ROWS={rows}",)


def quant_kv(head_dim: int, bf16: bool, cuda_flavour: bool) -> str:
    return f"quant_kv_kernel<{head_dim}, {_b(bf16)}, {_b(cuda_flavour)}>"


def attn_mma(head_dim: int, pv_fp16: bool) -> str:
    return f"attn_mma_kernel<{head_dim}, {_b(pv_fp16)}>"


#: the portable kernel's CTA: 4 warps of 32 query rows, 64-key steps (kernels/attn_mma.cu)
ATTN_MMA_THREADS, ATTN_MMA_CTA_Q, ATTN_MMA_CTA_K = 128, 128, 64


def attn_mma_shared_bytes(head_dim: int) -> int:
    """Dynamic shared memory of attn_mma_kernel<head_dim, ...> (AttnSmem<D>::TOTAL): the Q tile, two K stages and two
    V^T stages, one byte per element."""
    return ATTN_MMA_CTA_Q * head_dim + 2 * ATTN_MMA_CTA_K * head_dim + 2 * head_dim * ATTN_MMA_CTA_K


def attn_sm90(head_dim: int, stages: int, consumers: int = 2, block_keys: int = 128, causal_only: bool = False) -> str:
    # every argument spelled out, CAUSAL_ONLY too: the name is then the demangled one `sagelib kernels check` reports
    return f"attn_sm90_kernel<{head_dim}, {stages}, {consumers}, {block_keys}, {_b(causal_only)}>"


HEAD_DIMS = (64, 128)
#: K/V ring stages of each built sm_90a kernel, by (head_dim, consumers, block_keys)
#: (kernels/include/attn_sm90/geometry.cuh; a stage is 2 * block_keys * head_dim bytes). The sm90
#: preset runs three consumers at head_dim 64 and two at 128; three consumers stepping 64 keys
#: compute the preset with cta_k 64. Two consumers at head_dim 64 (the default until log seq 58)
#: stay buildable for comparison, not built by `sagelib kernels check`.
SM90_STAGES = {(128, 2, 128): 4, (64, 3, 128): 6, (64, 3, 64): 8, (128, 3, 64): 6}
SM90_COMPARISON_STAGES = {(64, 2, 128): 6}
#: geometries (head_dim, consumers, block_keys) with a second instance for causal calls (CAUSAL_ONLY): where a
#: tile's rows (64 * consumers) outnumber a block's keys, its first warpgroups see fewer blocks than the tile
SM90_CAUSAL_ONLY = {(64, 3, 128)}


def has_causal_instance(head_dim: int, consumers: int, block_keys: int) -> bool:
    """Whether the geometry has a causal-only instance (SM90_CAUSAL_ONLY)."""
    return (head_dim, consumers, block_keys) in SM90_CAUSAL_ONLY


def attn_sm90_built(head_dim: int, stages: int, consumers: int, block_keys: int) -> tuple[str, ...]:
    """Every instance of one geometry: the general one, and the causal-only one where SM90_CAUSAL_ONLY has it."""
    causal = has_causal_instance(head_dim, consumers, block_keys)
    return tuple(attn_sm90(head_dim, stages, consumers, block_keys, c) for c in ((False, True) if causal else (False,)))


INSTANCES: dict[str, tuple[str, ...]] = {
    "quant_qk.cu": tuple(quant_int8(d, bf, cf) for d in HEAD_DIMS for bf in (False, True) for cf in (False, True)),
    "quant_kv.cu": tuple(quant_kv(d, bf, cf) for d in HEAD_DIMS for bf in (False, True) for cf in (False, True)),
    "attn_mma.cu": tuple(attn_mma(d, f16) for d in HEAD_DIMS for f16 in (False, True)),
    # Phase 1 unit microbenchmarks (sagelib.measure.microbench); extern "C", so the names are plain
    "microbench.cu": ("bench_ex2", "bench_cvt_s32_f32", "bench_magic_s32_f32", "bench_ex2_and_cvt",
                      "bench_cvt_e4m3x2", "bench_mma_sync_s8", "bench_mma_sync_e4m3", "bench_mma_sync_e4m3_f16acc",
                      "bench_mma_sync_f16"),
    "microbench_wgmma.cu": ("bench_wgmma_s8", "bench_wgmma_e4m3"),
    # the Hopper kernel's softmax step alone (sagelib study softmax)
    "microbench_softmax.cu": ("bench_sm90_softmax",),
    # ... and beside another warpgroup's wgmma batches and fold (sagelib study softmax --beside)
    "microbench_softmax_beside.cu": ("bench_sm90_softmax_beside", "bench_sm90_two_softmaxes_beside"),
    # Hopper building blocks (TMA, mbarrier, setmaxnreg, wgmma layouts), checked by tests/test_hopper_smoke.py
    "attn_sm90.cu": tuple(name for (d, c, keys), stages in SM90_STAGES.items()
                          for name in attn_sm90_built(d, stages, c, keys)),
    "hopper_smoke.cu": ("hopper_tma_swizzle_2d", "hopper_qk_s8", "hopper_pv_e4m3_d64", "hopper_pv_e4m3_d128"),
}

#: Dynamic shared memory per block of the instances that launch with some (the others use static shared memory
#: only, which ptxas reports); `sagelib kernels check` adds it to ptxas' figure before the per-block limit. The sm_90a
#: kernel's is checked by its launcher against the H200's 227 KB (sagelib.backends.kernels.sm90.check_stages).
DYNAMIC_SHARED_BYTES: dict[str, int] = {attn_mma(d, f16): attn_mma_shared_bytes(d) for d in HEAD_DIMS
                                        for f16 in (False, True)}

#: Builds beyond each file's default that the launcher makes, as extra nvcc options: K without smoothing under the
#: sm90 preset has 128-token groups, so quant_qk.cu runs it with 128-token blocks (sagelib.backends.kernels.quantizers.quantize_int8).
#: `sagelib kernels check` and `kernels build` cover every instance of the file in each of them too.
#: attn_sm90.cu with the fp32+fp16 inner level (SM90_PV_F16, sagelib.backends.kernels.sm90.FP16_INNER_OPTIONS; the
#: rotation geometry at head_dim 128, which takes P.V in two channel passes, ignores it and keeps the default's code).
SM90_FP16_INNER_OPTIONS = ("-DSM90_PV_F16=1",)
VARIANTS: dict[str, tuple[tuple[str, ...], ...]] = {"quant_qk.cu": (quant_int8_options(QUANT_QK_TILE_ROWS),),
                                                    "attn_sm90.cu": (SM90_FP16_INNER_OPTIONS,)}


def builds(file: str) -> tuple[tuple[str, ...], ...]:
    """The option sets ``file`` is built with: the default (no options) first, then its VARIANTS."""
    return ((), *VARIANTS.get(file, ()))


#: Kernel files that only exist for some architectures (wgmma needs sm_90a); others build for every preset.
ONLY_ARCHS: dict[str, tuple[str, ...]] = {"microbench_wgmma.cu": ("sm_90a",), "hopper_smoke.cu": ("sm_90a",),
                                       "attn_sm90.cu": ("sm_90a",), "microbench_softmax_beside.cu": ("sm_90a",)}
