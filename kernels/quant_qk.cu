// quant_qk.cu: INT8 quantization of Q (or of K without smoothing).
//
// Contract stages: 2 (symmetric INT8, per_thread / per_warp / per_block groups,
// `triton` and `cuda` flavours), bit-exact to sagelib.contract.quantize_qk.
// Geometry: one block of QUANT_THREADS = 256 threads per 128 tokens of one
// (batch, head); 16-byte loads, 8-byte stores, one pass over the tensor; the
// group structure (GroupGeometry) is a runtime argument, so both presets
// (sm90: WARPQ 16, sm89: WARPQ 32) share the binary.
// Targets: sm_89, sm_90, sm_120a, sm_121a (plain CUDA, no tensor cores).
// Grid: (ceil(N / 128), H, B).
#include "quant_int8.cuh"

template <int D, bool BF16, bool CUDA_FLAVOUR>
__global__ void __launch_bounds__(QUANT_THREADS) quant_int8_kernel(
    const u16 *__restrict__ x, i64 x_sb, i64 x_sh, i64 x_sn,
    i8 *__restrict__ xq, i64 q_sb, i64 q_sh, i64 q_sn,
    float *__restrict__ scale, int n_tokens, int n_groups,
    int tile, int per_tile, int mod, int div) {
  __shared__ QuantSmem sm;
  const int b = blockIdx.z, h = blockIdx.y, heads = gridDim.y;
  const GroupGeometry geo = {tile, per_tile, mod, div};
  quantize_chunk_int8<D, BF16, CUDA_FLAVOUR, false>(
      x + b * x_sb + h * x_sh, x_sn, xq + b * q_sb + h * q_sh, q_sn,
      scale + ((i64)b * heads + h) * n_groups, n_tokens, blockIdx.x * QUANT_ROWS, geo, n_groups, nullptr, sm);
}
