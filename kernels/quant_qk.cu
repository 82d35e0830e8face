// quant_qk.cu: INT8 quantization of Q (or of K without smoothing).
//
// Contract stage 2 (symmetric INT8, per_thread / per_warp groups, `triton` and
// `cuda` flavours), bit-exact to sagelib.contract.quantize_qk.
// Geometry: one block of QUANT_QK_ROWS * D / 32 threads per QUANT_QK_ROWS tokens of one (batch, head), each
// thread one 16-byte chunk of 4 rows (the quad layout of quant_int8.cuh): 4 loads
// in flight per thread issued before anything else, 8-byte streaming stores, one
// pass over the tensor, 64 registers at most. The group structure (GroupGeometry)
// is a runtime argument, so both presets share the binary.
// QUANT_QK_ROWS is 64: at the same threads per SM, twice the blocks of half the size ran 1.02-1.05x faster than
// blocks of 128 tokens at head_dim 128, 1.007x at 64 (log seq 174): an SM refills in smaller steps, and each
// block's barriers span half the warps. Every Q group tile (32 tokens on sm89, 16 on sm90) divides 64; K without
// smoothing under the sm90 preset (128-token groups) is built with -DQUANT_QK_ROWS=128.
// Targets: sm_89, sm_90, sm_120a, sm_121a (plain CUDA, no tensor cores).
// Grid: (ceil(N / 128) * 128 / QUANT_QK_ROWS, H, B): whole 128-token tiles, as the scale groups count them.
//
// Measured on the H200 and not kept (GPU time against this one-shot grid; the log records each):
//   persistent grid loading the next tile ahead (62-64 registers)   0.83-0.93x  (seq 132)
//   persistent grid walking the tiles, nothing ahead (40 registers)  0.85-0.91x  (seq 146)
//   (a fresh block issues its loads while its neighbours compute; a persistent block's loads wait behind its own
//   stores and barriers.) Register caps for more blocks per SM: quant_int8.cuh (seq 134).
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
    int tile_shift, int per_tile_shift, int mod_mask, int div_shift) {
  __shared__ QuantSmem sm;
  const int b = blockIdx.z, h = blockIdx.y, heads = gridDim.y;
  const int row0 = blockIdx.x * QUANT_QK_ROWS;
  u32x4 raw[4];
  load_quad<D, true>(raw, x + b * x_sb + h * x_sh, x_sn, n_tokens, row0, quant_tid());
  const GroupGeometry geo = {tile_shift, per_tile_shift, mod_mask, div_shift};
  if (threadIdx.x < QUANT_MAX_GROUPS) sm.amax[threadIdx.x] = 0u;
  __syncthreads();
  const float no_km[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  quantize_tile_int8<D, BF16, CUDA_FLAVOUR, false, QUANT_QK_ROWS>(
      raw, no_km, xq + b * q_sb + h * q_sh, q_sn, scale + ((i64)b * heads + h) * n_groups, n_tokens, row0, geo,
      n_groups, sm, quant_tid());
}

// QUANT_QK_BULK=1 (experiment, log seq 176; sm_90a, HND with contiguous rows): a persistent kernel for a few SMs.
// The premise of seq 74's reopening: quantizers running beside the attention kernel on the SMs it leaves free need
// ~60-90 GB/s per SM, and the one-shot blocks above moved ~44. Here one thread of each CTA keeps
// QUANT_QK_BULK_STAGES blocks of QUANT_QK_ROWS rows in flight as bulk copies (cp.async.bulk, 16 KB each at D128) into
// a shared-memory ring; every thread reads its quad from the ring and quantizes it with quantize_tile_int8, so the
// output bits are the one-shot kernel's. Block t of the grid takes blocks t, t + grid, ... of all heads.
#ifndef QUANT_QK_BULK
#define QUANT_QK_BULK 0
#endif
#if QUANT_QK_BULK
#include "hopper/tma.cuh"
#ifndef QUANT_QK_BULK_STAGES
#define QUANT_QK_BULK_STAGES 6
#endif

template <int D, bool BF16, bool CUDA_FLAVOUR>
__global__ void __launch_bounds__(QuadLayout<D, QUANT_QK_ROWS>::THREADS, 1) quant_int8_bulk_kernel(
    const u16 *__restrict__ x, i64 x_sb, i64 x_sh, i64 x_sn,
    i8 *__restrict__ xq, i64 q_sb, i64 q_sh, i64 q_sn,
    float *__restrict__ scale, int n_tokens, int n_groups,
    int tile_shift, int per_tile_shift, int mod_mask, int div_shift, int heads, int batch) {
  constexpr int STAGES = QUANT_QK_BULK_STAGES, ROW_BYTES = 2 * D, BLOCK_BYTES = QUANT_QK_ROWS * ROW_BYTES;
  extern __shared__ __align__(128) u8 ring[];
  __shared__ u64 full[STAGES];
  __shared__ QuantSmem sm;
  const int per_head = ceil_div(n_tokens, QUANT_ROWS) * (QUANT_ROWS / QUANT_QK_ROWS);  // whole 128-token tiles
  const int blocks = per_head * heads * batch;
  const u32 tid = quant_tid();
  auto issue = [&](int block, int stage) {
    const int bh = block / per_head, row0 = (block - bh * per_head) * QUANT_QK_ROWS, b = bh / heads;
    const int rows = max(0, min(QUANT_QK_ROWS, n_tokens - row0));  // 0: a padding block, scales only
    mbarrier_arrive_expect_tx(&full[stage], rows * ROW_BYTES);
    if (rows > 0)
      bulk_load(ring + stage * BLOCK_BYTES, x + b * x_sb + (bh - b * heads) * x_sh + row0 * x_sn, rows * ROW_BYTES,
                &full[stage]);
  };
  if (tid == 0) {
    for (int s = 0; s < STAGES; ++s) mbarrier_init(&full[s], 1);
    mbarrier_init_fence();
  }
  if (tid < QUANT_MAX_GROUPS) sm.amax[tid] = 0u;
  __syncthreads();
  if (tid == 0)
    for (int s = 0; s < STAGES && blockIdx.x + s * gridDim.x < blocks; ++s) issue(blockIdx.x + s * gridDim.x, s);
  const GroupGeometry geo = {tile_shift, per_tile_shift, mod_mask, div_shift};
  const float no_km[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  const int r = (int)QuadLayout<D>::row(tid);
  const u32 c = QuadLayout<D>::chunk(tid);
  int i = 0;
  for (int block = blockIdx.x; block < blocks; block += gridDim.x, ++i) {
    const int stage = i % STAGES;
    mbarrier_wait_parity(&full[stage], (i / STAGES) & 1);
    const int bh = block / per_head, row0 = (block - bh * per_head) * QUANT_QK_ROWS, b = bh / heads;
    const u8 *src = ring + stage * BLOCK_BYTES + r * ROW_BYTES + c * 16;
    u32x4 raw[4];
#pragma unroll
    for (int k = 0; k < 4; ++k)
      raw[k] = row0 + r + k < n_tokens ? *reinterpret_cast<const u32x4 *>(src + k * ROW_BYTES) : u32x4{0u, 0u, 0u, 0u};
    __syncthreads();  // the stage is read by every thread, and the previous block's scales too
    if (tid == 0 && block + STAGES * (int)gridDim.x < blocks) issue(block + STAGES * gridDim.x, stage);
    quantize_tile_int8<D, BF16, CUDA_FLAVOUR, false, QUANT_QK_ROWS>(
        raw, no_km, xq + b * q_sb + (bh - b * heads) * q_sh, q_sn, scale + (i64)bh * n_groups, n_tokens, row0, geo,
        n_groups, sm, tid);
  }
}
#endif
