// The entry fusion (-DSM90_FUSED_Q=1): contract stage 2 for Q inside the kernel, on the
// producer warpgroup's warps 1..3, which otherwise only give their registers away.
//
// The producer thread copies each tile's 16-bit Q in granules of SM90_Q_GRANULE_ROWS rows
// (no swizzle, rows of 2D bytes) into a small staging ring, naming each granule's Q slot
// and place in smem.q_granule. Granule k of the walk goes to quantizing warp k % 3, which
// writes its rows as int8 into the slot's tile (the layout the TMA gives the unfused
// kernel: 16-byte chunks swizzled by row) and their scales into smem.q_scales, fences the
// writes for the async proxy (wgmma reads the tile) and arrives on the slot's `full`
// barrier. That barrier completes when the producer's arrival (with the V channel scales'
// bytes) and every granule's are in, so the consumers wait for their Q exactly as before,
// and the quantization runs beside the current tile instead of on its chain (seq 51
// put it on the consumers and lost the whole gain).
//
// One granule holds whole q groups of both granularities (the sm90 preset: per_thread rows
// g and g + 8 of each 16, per_warp 16 rows). A group's lanes each take 16-byte chunks, its
// amax is reduced over those lanes, and scale and rounding are quant_int8.cuh's, so the
// int8 values and scales are quant_qk.cu's bit for bit.
#pragma once
#include "../hopper/pipeline.cuh"
#include "../hopper/tma.cuh"
#include "../quant_int8.cuh"
#include "geometry.cuh"

#define SM90_Q_TRITON 8            // flags bit: the triton flavour's rounding (else cuda)
#define SM90_Q_GRANULE_ROWS 32     // query rows per staged granule
#define SM90_Q_QUANT_WARPS 3       // the producer warpgroup's warps 1..3
#define SM90_Q_GRANULE_END (-1)    // smem.q_granule: the walk is over
// Staged granules (8 KB / 4 KB each): one per quantizing warp, so each warp always waits on its own
// stage and can never run a phase ahead of a granule another warp has not taken yet.
#define SM90_Q_STAGING(D) SM90_Q_QUANT_WARPS

// smem.q_granule's word: the Q slot and the granule's index in its tile.
SAGE_DEVICE int granule_word(int slot, int granule) { return slot * 64 + granule; }

// The producer thread: the granules of the tile at rows [q0, q0 + CTA_Q) of (batch, head).
template <int D, typename Smem>
SAGE_DEVICE void stage_q_tile(const TensorMap *q16, Smem &smem, RingPosition<SM90_Q_STAGING(D)> &at, int slot,
                              int q0, int head, int batch) {
  using G = typename Smem::Geometry;
#pragma unroll 1
  for (int g = 0; g < G::CTA_Q / SM90_Q_GRANULE_ROWS; ++g) {
    smem.q_staging.producer_wait(at);
    atomicExch(&smem.q_granule[at.stage], granule_word(slot, g));  // ordered by the full barrier, as hand_over_tile
    mbarrier_arrive_expect_tx(&smem.q_staging.full[at.stage], sizeof(smem.q16[0]));
    tma_load_4d(smem.q16[at.stage], q16, &smem.q_staging.full[at.stage], 0, q0 + g * SM90_Q_GRANULE_ROWS, head,
                batch);
    at.advance();
  }
}

// The producer thread, after the last tile: one end mark per quantizing warp.
template <int D, typename Smem>
SAGE_DEVICE void end_q_staging(Smem &smem, RingPosition<SM90_Q_STAGING(D)> &at) {
#pragma unroll 1
  for (int w = 0; w < SM90_Q_QUANT_WARPS; ++w) {
    smem.q_staging.producer_wait(at);
    atomicExch(&smem.q_granule[at.stage], SM90_Q_GRANULE_END);
    mbarrier_arrive(&smem.q_staging.full[at.stage]);
    at.advance();
  }
}

// Row (in the granule) and first channel of chunk `c` of group `g` of a granule.
template <int D, bool PER_THREAD>
SAGE_DEVICE int2 granule_chunk(int g, int c) {
  constexpr int ROW_CHUNKS = D / 8;
  const int row = PER_THREAD ? 16 * (g / 8) + g % 8 + 8 * (c / ROW_CHUNKS) : 16 * g + c / ROW_CHUNKS;
  return make_int2(row, 8 * (c % ROW_CHUNKS));
}

// One warp: the granule's rows `staged` (granule `granule` of its tile) into the int8 tile `q8`
// and its groups' scales into `scales` (the tile's, indexed like quant_qk.cu's within the tile).
template <int D, bool BF16, bool CUDA_FLAVOUR, bool PER_THREAD>
SAGE_DEVICE void quantize_granule(const u16 *staged, u8 *q8, float *scales, int granule, int lane) {
  constexpr int GROUP_CHUNKS = (PER_THREAD ? 2 : 16) * D / 8;         // 16-byte chunks per group
  constexpr int GROUP_LANES = GROUP_CHUNKS < 32 ? GROUP_CHUNKS : 32;  // lanes that share a group
  constexpr int LANE_CHUNKS = GROUP_CHUNKS / GROUP_LANES;
  constexpr int GROUPS = SM90_Q_GRANULE_ROWS * D / 8 / GROUP_CHUNKS;  // per granule: 16 or 2
  constexpr int WARP_GROUPS = 32 / GROUP_LANES;                       // groups the warp takes at once
  const float no_smoothing[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  const int in_group = lane % GROUP_LANES;
#pragma unroll 1
  for (int g0 = 0; g0 < GROUPS; g0 += WARP_GROUPS) {
    const int g = g0 + lane / GROUP_LANES;
    float amax = 0.0f;
#pragma unroll 1
    for (int j = 0; j < LANE_CHUNKS; ++j) {
      const int2 at = granule_chunk<D, PER_THREAD>(g, in_group + GROUP_LANES * j);
      amax = fmaxf(amax, row_amax<BF16, false>(*reinterpret_cast<const u32x4 *>(staged + at.x * D + at.y),
                                               no_smoothing));
    }
#pragma unroll
    for (int off = 1; off < GROUP_LANES; off <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    const float inv127 = __uint_as_float(0x3c010204u);  // fl32(1 / 127), as quantize_tile_int8
    float scale, mult;
    if (CUDA_FLAVOUR) {
      amax = fmaxf(amax, 1e-7f);
      scale = __fmul_rn(amax, inv127);
      mult = __fdiv_rn(127.0f, amax);
    } else {
      scale = __fadd_rn(__fmul_rn(amax, inv127), 1e-7f);
      mult = __fdiv_rn(1.0f, scale);
    }
    if (in_group == 0) scales[GROUPS * granule + g] = scale;
#pragma unroll 1
    for (int j = 0; j < LANE_CHUNKS; ++j) {
      const int2 at = granule_chunk<D, PER_THREAD>(g, in_group + GROUP_LANES * j);
      const u32x2 q = quantize_row<BF16, CUDA_FLAVOUR, false>(
          *reinterpret_cast<const u32x4 *>(staged + at.x * D + at.y), no_smoothing, scale, mult);
      const int row = SM90_Q_GRANULE_ROWS * granule + at.x;
      const int swizzle = D == 128 ? row % 8 : (row / 2) % 4;  // the TMA's 128 B / 64 B row swizzle
      *reinterpret_cast<u32x2 *>(q8 + row * D + 16 * ((at.y / 16) ^ swizzle) + at.y % 16) = q;
    }
  }
}

// Quantizing warp w (0..2): granules w, w + 3, ... of the walk, until the end mark.
template <int D, bool BF16, bool CUDA_FLAVOUR, bool PER_THREAD, typename Smem>
SAGE_DEVICE void quantize_q_walk(Smem &smem, int w) {
  const int lane = threadIdx.x % 32;
  RingPosition<SM90_Q_STAGING(D)> at;
  for (int i = 0; i < w; ++i) at.advance();
  for (;;) {
    smem.q_staging.consumer_wait(at);
    const int word = __shfl_sync(0xffffffffu, lane == 0 ? atomicAdd(&smem.q_granule[at.stage], 0) : 0, 0);
    if (word == SM90_Q_GRANULE_END) return;
    const int slot = word / 64, granule = word % 64;
    quantize_granule<D, BF16, CUDA_FLAVOUR, PER_THREAD>(smem.q16[at.stage], smem.q[slot], smem.q_scales[slot],
                                                         granule, lane);
    fence_proxy_async();  // the int8 rows are read by wgmma (the async proxy)
    warp_release(&smem.q_staging.empty[at.stage]);
    if (lane == 0) mbarrier_arrive(&smem.q_slots.full[slot]);
    for (int i = 0; i < SM90_Q_QUANT_WARPS; ++i) at.advance();
  }
}

template <int D, typename Smem>
SAGE_DEVICE void quantize_q(Smem &smem, int w, bool bf16, bool cuda_flavour, bool per_thread) {
  if (bf16) {
    if (cuda_flavour) {
      if (per_thread) quantize_q_walk<D, true, true, true>(smem, w);
      else quantize_q_walk<D, true, true, false>(smem, w);
    } else {
      if (per_thread) quantize_q_walk<D, true, false, true>(smem, w);
      else quantize_q_walk<D, true, false, false>(smem, w);
    }
  } else {
    if (cuda_flavour) {
      if (per_thread) quantize_q_walk<D, false, true, true>(smem, w);
      else quantize_q_walk<D, false, true, false>(smem, w);
    } else {
      if (per_thread) quantize_q_walk<D, false, false, true>(smem, w);
      else quantize_q_walk<D, false, false, false>(smem, w);
    }
  }
}
