// The entry fusion (-DSM90_FUSED_Q=1, an experiment): contract stage 2 for Q inside the
// kernel. The producer copies the tile's fp16 / bf16 Q (rows of 2D bytes, no swizzle) into a
// staging buffer; each consumer warpgroup quantizes its own 64 rows into the Q slot's int8
// tile (the layout the TMA would have written: 16-byte chunks swizzled by row), fences the
// writes for the async proxy and syncs its 128 threads before its first Q.K^T reads them.
//
// Thread t = 32w + l of a consumer warpgroup owns rows 16w + l/4 and 16w + l/4 + 8 (one
// per_thread q group of the sm90 preset: rows g and g + 8 of each 16) and the quarter
// l % 4 of their channels. A group's amax is reduced over the quad (per_thread) or the warp
// (per_warp: 16 rows). Scale and rounding are quant_int8.cuh's, so the int8 values and
// scales are the separate quantizer's, bit for bit.
#pragma once
#include "../hopper/tma.cuh"
#include "../quant_int8.cuh"

#ifndef SM90_FUSED_Q
#define SM90_FUSED_Q 0  // 1: Q arrives as fp16 / bf16 and the consumers quantize it
#endif

#define SM90_Q_TRITON 8  // flags bit: the triton flavour's rounding (else cuda)

// The named barrier a consumer warpgroup syncs its 128 threads on after writing its Q rows
// (ids 1 .. CONSUMERS are pingpong.cuh's).
#define SM90_Q_ENTRY_BARRIER0 8

template <int D, bool BF16, bool CUDA_FLAVOUR>
SAGE_DEVICE float quantize_q_rows(const u16 *q16, u8 *q8, int wg, int warp, int lane, bool per_thread) {
  constexpr int CHUNKS = D / 32;  // 8-channel pieces of a row in this thread's quarter
  const int g = lane / 4, quarter = lane % 4;
  const int row0 = 64 * wg + 16 * warp + g;  // and row0 + 8
  const float km[8] = {0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f};
  u32x4 raw[2][CHUNKS];
  int piece[CHUNKS];  // which 8-channel piece of the quarter raw[.][i] holds: rotated by row, no bank conflicts
#pragma unroll
  for (int i = 0; i < CHUNKS; ++i) piece[i] = (i + g) % CHUNKS;
  float amax = 0.0f;
#pragma unroll
  for (int h = 0; h < 2; ++h)
#pragma unroll
    for (int i = 0; i < CHUNKS; ++i) {
      raw[h][i] = *reinterpret_cast<const u32x4 *>(q16 + (row0 + 8 * h) * D + quarter * (D / 4) + 8 * piece[i]);
      amax = fmaxf(amax, row_amax<BF16, false>(raw[h][i], km));
    }
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  if (!per_thread) {
#pragma unroll
    for (int off = 4; off < 32; off <<= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
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
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + 8 * h;
    const int swizzle = D == 128 ? row % 8 : (row / 2) % 4;  // the TMA's 128 B / 64 B row swizzle
#pragma unroll
    for (int i = 0; i < CHUNKS; ++i) {
      const u32x2 q = quantize_row<BF16, CUDA_FLAVOUR, false>(raw[h][i], km, scale, mult);
      const int col = quarter * (D / 4) + 8 * piece[i];
      *reinterpret_cast<u32x2 *>(q8 + row * D + 16 * ((col / 16) ^ swizzle) + col % 16) = q;
    }
  }
  fence_proxy_async();  // the int8 rows are read by wgmma (the async proxy)
  return scale;
}

// After every thread of the warpgroup has written its rows.
SAGE_DEVICE void q_entry_sync(int wg) {
  asm volatile("bar.sync %0, 128;" ::"r"(SM90_Q_ENTRY_BARRIER0 + wg) : "memory");
}
