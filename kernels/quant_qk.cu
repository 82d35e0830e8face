// quant_qk.cu: INT8 quantization of Q (or of K without smoothing).
//
// Contract stage 2 (symmetric INT8, per_thread / per_warp groups, `triton` and
// `cuda` flavours), bit-exact to sagelib.contract.quantize_qk.
// Geometry: one block of QUANT_QK_ROWS * D / 32 threads per QUANT_QK_ROWS tokens of one (batch, head), each
// thread one 16-byte chunk of 4 rows (the quad layout of quant_int8.cuh): 4 loads
// in flight per thread issued before anything else, 8-byte streaming stores, one
// pass over the tensor, 64 registers at most. The group structure (GroupGeometry)
// is a runtime argument, so both presets share the binary.
// Ownership: thread tid owns its quad's 4 rows x 8 channels in registers; the tile's group amax lives in
// shared memory (QuantSmem), cleared by threads < QUANT_MAX_GROUPS before the first __syncthreads, raised by
// atomicMax and read after quantize_tile_int8's barrier.
// Why 64 rows: at the same threads per SM, twice the blocks of half the size ran faster than 128-token blocks:
// an SM refills in smaller steps and each block's barriers span half the warps. Every Q group tile (32 tokens
// on sm89, 16 on sm90) divides 64; K without smoothing under the sm90 preset (128-token groups) is built with
// -DQUANT_QK_ROWS=128. A one-shot grid beats a persistent one here: a fresh block issues its loads while its
// neighbours compute, and an SM quantizes at the rate its arithmetic issues, not the bytes in flight.
// Targets: sm_89, sm_90, sm_120a, sm_121a (plain CUDA, no tensor cores).
// Grid: (ceil(N / 128) * 128 / QUANT_QK_ROWS, H, B): whole 128-token tiles, as the scale groups count them.
// Beside Q, the launch can clear `zero_words` words at `zero` (grid-strided, after the loads are issued): the K/V
// quantizer's workspace and the attention kernel's tile counter, which run after it on the same stream, so an
// attention call needs no memset launch of its own (sagelib/backends/kernels/plans.py).
#include "params.cuh"
#include "quant_int8.cuh"

#ifndef QUANT_QK_ROWS
#define QUANT_QK_ROWS 64
#endif

template <int D, bool BF16, bool CUDA_FLAVOUR>
__global__ void __launch_bounds__(QuadLayout<D, QUANT_QK_ROWS>::THREADS,
                                  QUANT_QK_THREADS_PER_SM / QuadLayout<D, QUANT_QK_ROWS>::THREADS) quant_int8_kernel(
    const u16 *__restrict__ x, i64 x_sb, i64 x_sh, i64 x_sn,
    i8 *__restrict__ xq, i64 q_sb, i64 q_sh, i64 q_sn,
    float *__restrict__ scale, int n_tokens, int n_groups,
    int tile_shift, int per_tile_shift, int mod_mask, int div_shift, u32 *__restrict__ zero, int zero_words) {
  __shared__ QuantSmem sm;
  const int b = blockIdx.z, h = blockIdx.y, heads = gridDim.y;
  const int row0 = blockIdx.x * QUANT_QK_ROWS;
  u32x4 raw[4];
  load_quad<D, true>(raw, x + b * x_sb + h * x_sh, x_sn, n_tokens, row0, quant_tid());
  if (zero_words) {
    const int block = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    const int stride = gridDim.x * gridDim.y * gridDim.z * blockDim.x;
    for (int i = block * blockDim.x + threadIdx.x; i < zero_words; i += stride) zero[i] = 0u;
  }
  const GroupGeometry geo = {tile_shift, per_tile_shift, mod_mask, div_shift};
  if (threadIdx.x < QUANT_MAX_GROUPS) sm.amax[threadIdx.x] = 0u;
  __syncthreads();
  const float no_km[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  quantize_tile_int8<D, BF16, CUDA_FLAVOUR, false, QUANT_QK_ROWS>(
      raw, no_km, xq + b * q_sb + h * q_sh, q_sn, scale + ((i64)b * heads + h) * n_groups, n_tokens, row0, geo,
      n_groups, sm, quant_tid());
}
