// Contract stage 7: O / l, times the V channel scale, rounded to fp16 / bf16, and
// the optional natural-log lse = (log2(l) + m) / log2e (the K-smoothing
// correction q . km is added by the caller, in fp32).
//
// Rows that see no key (bottom-right causal with N_q > N_kv) are written as 0
// with lse -inf, as the contract does. Rows >= N_q are never stored.
// Ownership: each thread stores the rows and channels its accumulator fragment holds (mma.sync or
// wgmma layout) straight from registers; no shared memory, no barrier. Used by attn_mma.cu and
// attn_sm90.cu: targets sm_89, sm_90, sm_90a, sm_120a, sm_121a.
#pragma once
#include "common.cuh"
#include "convert.cuh"
#include "online_softmax.cuh"

// The channel scales a lane multiplies: channels 8j + 2(lane % 4) and +1, for every j
// (both the mma.sync and the wgmma accumulator fragments give a lane these channels).
template <int D>
SAGE_DEVICE void load_channel_scales(const float *__restrict__ v_scale, int lane, float2 (&vs)[D / 8]) {
#pragma unroll
  for (int j = 0; j < D / 8; ++j) vs[j] = *reinterpret_cast<const float2 *>(v_scale + 8 * j + 2 * (lane % 4));
}

// One row's normalisation from the lane's partial row sum (reduced over the quad here):
// 1 / l and the natural-log lse, or 0 and -inf for a row that sees no key.
struct RowFinish {
  float inv, lse;
};
SAGE_DEVICE RowFinish finish_row(float l_part, float m, bool causal, int row, int shift) {
  const float l = quad_sum(l_part);
  const bool blind = causal && row + shift < 0;
  return {blind ? 0.0f : 1.0f / l, blind ? __int_as_float(0xff800000) : (log2f(l) + m) / SAGE_LOG2E};
}

template <int D>
SAGE_DEVICE void store_output(const float (&o)[2][D / 8][4], const float (&m)[2][2], const float (&l_part)[2][2],
                              const float *__restrict__ v_scale, u16 *__restrict__ out, i64 o_sn,
                              float *__restrict__ lse, int row0, int n_q, int lane, bool out_bf16, bool causal,
                              int shift) {
  float2 vs[D / 8];
  load_channel_scales<D>(v_scale, lane, vs);
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int row = row0 + 16 * t + lane / 4 + 8 * half;
      const RowFinish f = finish_row(l_part[t][half], m[t][half], causal, row, shift);
      if (row < n_q) {
        u16 *dst = out + row * o_sn + 2 * (lane % 4);
#pragma unroll
        for (int j = 0; j < D / 8; ++j) {
          const float a = o[t][j][2 * half] * f.inv * vs[j].x;
          const float b = o[t][j][2 * half + 1] * f.inv * vs[j].y;
          *reinterpret_cast<u32 *>(dst + 8 * j) = out_bf16 ? pack2<true>(a, b) : pack2<false>(a, b);
        }
        if (lse != nullptr && lane % 4 == 0) lse[row] = f.lse;
      }
    }
}
