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
// g and g + 8 of each 16, per_warp 16 rows). Scale and rounding are quant_int8.cuh's, so the
// int8 values and scales are quant_qk.cu's bit for bit.
#pragma once
#include "../hopper/pipeline.cuh"
#include "../hopper/tma.cuh"
#include "../quant_int8.cuh"
#include "geometry.cuh"

// Timing ablations of the fusion (wrong outputs): 1 stages Q but does not quantize it, 2 not even stages it.
#ifndef SM90_FUSED_Q_ABLATE
#define SM90_FUSED_Q_ABLATE 0
#endif

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
    if (SM90_FUSED_Q_ABLATE == 2) {
      mbarrier_arrive(&smem.q_staging.full[at.stage]);
    } else {
      mbarrier_arrive_expect_tx(&smem.q_staging.full[at.stage], sizeof(smem.q16[0]));
      tma_load_4d(smem.q16[at.stage], q16, &smem.q_staging.full[at.stage], 0, q0 + g * SM90_Q_GRANULE_ROWS, head,
                  batch);
    }
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

// One warp, lane l = row l of the granule `staged` (granule `granule` of its tile): the rows into the
// int8 tile `q8`, their groups' scales into `scales` (the tile's, indexed like quant_qk.cu's). A per_thread
// group is rows g and g + 8 of each 16 (lanes l and l ^ 8), a per_warp group all 16: a shuffle or four
// finish its amax, and every lane divides once, in parallel. Chunks are visited rotated by the row, so
// the 16-byte shared-memory accesses of a quarter-warp fall in different banks.
template <int D, bool BF16, bool CUDA_FLAVOUR, bool PER_THREAD>
SAGE_DEVICE void quantize_granule(const u16 *staged, u8 *q8, float *scales, int granule, int lane) {
  constexpr int CHUNKS = D / 8;  // 16-byte pieces of a 16-bit row
  const float no_smoothing[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  const u16 *row_in = staged + lane * D;
  float amax = 0.0f;
#pragma unroll 1
  for (int i = 0; i < CHUNKS; ++i) {
    const int c = (i + lane) % CHUNKS;
    amax = fmaxf(amax, row_amax<BF16, false>(*reinterpret_cast<const u32x4 *>(row_in + 8 * c), no_smoothing));
  }
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 8));
  if (!PER_THREAD) {
#pragma unroll
    for (int off = 1; off < 8; off <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
  }
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
  const int row = SM90_Q_GRANULE_ROWS * granule + lane;  // in the tile
  // (an atomic store, read back as one by the consumers: ordered by the slot's barrier, as hand_over_tile)
  if (PER_THREAD ? row % 16 < 8 : row % 16 == 0) atomicExch(&scales[PER_THREAD ? row / 16 * 8 + row % 8 : row / 16], scale);
  const int swizzle = D == 128 ? row % 8 : (row / 2) % 4;  // the TMA's 128 B / 64 B row swizzle
  u8 *row_out = q8 + row * D;
#pragma unroll 1
  for (int i = 0; i < CHUNKS; ++i) {
    const int c = (i + lane) % CHUNKS;
    const u32x2 q = quantize_row<BF16, CUDA_FLAVOUR, false>(*reinterpret_cast<const u32x4 *>(row_in + 8 * c),
                                                            no_smoothing, scale, mult);
    *reinterpret_cast<u32x2 *>(row_out + 16 * ((c / 2) ^ swizzle) + 8 * (c % 2)) = q;
  }
}

// Quantizing warp w (0..2): granules w, w + 3, ... of the walk, until the end mark.
template <int D, bool BF16, bool CUDA_FLAVOUR, bool PER_THREAD, typename Smem>
SAGE_DEVICE void quantize_q_walk(Smem &smem, int w) {
  const int lane = threadIdx.x % 32;
  RingPosition<SM90_Q_STAGING(D)> at;
  for (int i = 0; i < w; ++i) at.advance();
  for (;;) {
    mbarrier_wait_parity_suspended(&smem.q_staging.full[at.stage], at.parity);  // off every chain: sleep
    const int word = __shfl_sync(0xffffffffu, lane == 0 ? atomicAdd(&smem.q_granule[at.stage], 0) : 0, 0);
    if (word == SM90_Q_GRANULE_END) return;
    const int slot = word / 64, granule = word % 64;
    if (!SM90_FUSED_Q_ABLATE)
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
