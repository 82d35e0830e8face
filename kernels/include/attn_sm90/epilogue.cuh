// Contract stage 7 for one consumer warpgroup of the sm_90a kernel: O / l, times the
// V channel scale, rounded to fp16 / bf16 and stored from the accumulator fragment;
// the optional natural-log lse = (log2(l) + m) / log2e (the smoothing correction
// q . km is added by the caller, in fp32).
//
// Fragment: o[i] is row 16w + l/4 + 8((i/2)%2), channel 8(i/4) + 2(l%4) + i%2, so a
// thread stores 32-bit pairs of channels. Rows that see no key (bottom-right causal
// with N_q > N_kv) are written as 0 with lse -inf, as the contract does; rows >= N_q
// are never stored.
#pragma once
#include "../convert.cuh"
#include "../epilogue.cuh"
#include "../online_softmax.cuh"

// The output goes through a per-warp staging tile in shared memory: each thread writes its 4-byte
// channel pairs there, and the warp then stores whole 16-byte chunks, 256 (D128) or 128 (D64)
// contiguous bytes per row, instead of 4-byte pieces scattered over 8 rows per instruction. Rows
// of the tile are padded by 16 bytes, so the eight rows a store instruction covers fall in
// different banks.
#define SM90_STAGE_ROW_BYTES(D) (2 * (D) + 16)
#define SM90_STAGE_BYTES(D) (16 * SM90_STAGE_ROW_BYTES(D))  // one warp's 16 rows

template <int D>
SAGE_DEVICE void sm90_store_output(const float (&o)[D / 2], const float (&m)[2], const float (&l_part)[2],
                                   const float *__restrict__ v_scale, u16 *__restrict__ out, i64 o_sn,
                                   float *__restrict__ lse, int row0, int n_q, int lane, bool out_bf16, bool causal,
                                   int shift, u8 *stage) {
  float2 vs[D / 8];
  load_channel_scales<D>(v_scale, lane, vs);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const int row = row0 + 8 * h;
    const RowFinish f = finish_row(l_part[h], m[h], causal, row, shift);
    u8 *stage_row = stage + (lane / 4 + 8 * h) * SM90_STAGE_ROW_BYTES(D) + 4 * (lane % 4);
#pragma unroll
    for (int j = 0; j < D / 8; ++j) {
      const float a = o[4 * j + 2 * h] * f.inv * vs[j].x;
      const float b = o[4 * j + 2 * h + 1] * f.inv * vs[j].y;
      *reinterpret_cast<u32 *>(stage_row + 16 * j) = out_bf16 ? pack2<true>(a, b) : pack2<false>(a, b);
    }
    if (row < n_q && lse != nullptr && lane % 4 == 0) lse[row] = f.lse;
  }
  constexpr int CHUNKS = 2 * D / 16;  // 16-byte chunks per row: 16 at D128, 8 at D64
  __syncwarp();
#pragma unroll
  for (int i = 0; i < 16 * CHUNKS / 32; ++i) {
    const int r = i * (32 / CHUNKS) + lane / CHUNKS, chunk = lane % CHUNKS;  // the warp's row r: row0 - lane / 4 + r
    const uint4 v = *reinterpret_cast<const uint4 *>(stage + r * SM90_STAGE_ROW_BYTES(D) + 16 * chunk);
    const int row = row0 - lane / 4 + r;
    if (row < n_q) *reinterpret_cast<uint4 *>(out + row * o_sn + 8 * chunk) = v;
  }
  __syncwarp();  // the staging tile is free again
}
