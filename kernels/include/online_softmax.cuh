// Contract stages 3-4 on one warp's 32 x 64 score tile: INT32 scores -> log2-domain
// scores -> base-2 online softmax with the fp8 offset -> P in registers.
//
// Per lane (see ptx_mma.cuh): m-tile t (rows 16t..16t+15 of the warp), n-tile j
// (keys 8j..8j+7 of the block); s[t][j][2*half + e] is row 16t + lane/4 + 8*half,
// key 8j + 2*(lane%4) + e. A row lives in the 4 lanes of a quad, so row max needs
// two xor-shuffles; the row sum is kept per lane and reduced once at the end
// (alpha is identical across the quad).
//
// Scores: s = S_int * mult, mult = q_scale * k_scale * sm_scale * log2e. S_int is
// converted exactly with the 1.5 * 2^23 bias trick (|S_int| <= 127*127*128 < 2^22):
// one IADD and one FADD instead of I2F, which shares the MUFU-rate pipe with ex2. Folding the FADD into
// the exp pass's FFMA (as attn_sm90/softmax.cuh does at head_dim 64) removed ~60 instructions per block
// but did not run faster here, so this path keeps the separate FADD.
// Ownership: each warp owns its 32 rows' m and l; nothing here touches shared memory or needs a barrier
// (the quad's xor-shuffles are warp-synchronous). Targets: sm_89, sm_90, sm_120a, sm_121a (attn_mma.cu).
#pragma once
#include "common.cuh"
#include "convert.cuh"

#define SAGE_MASKED_S (-(1 << 30))  // sentinel for a masked INT32 score
#define SAGE_I2F_BIAS 0x4B400000    // bits of 1.5 * 2^23
#define SAGE_I2F_BIAS_F 12582912.0f

SAGE_DEVICE float exact_int_to_float(i32 s) { return __int_as_float(s + SAGE_I2F_BIAS) - SAGE_I2F_BIAS_F; }

SAGE_DEVICE float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}

SAGE_DEVICE float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}

// Hide keys >= n_kv and, when causal, keys > row + shift (shift = N_kv - N_q for
// bottom-right alignment, 0 for top-left), by writing the sentinel into S.
SAGE_DEVICE void mask_scores(i32 (&s)[2][8][4], int key0, int row0, int lane, int n_kv, bool causal, int shift) {
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int key = key0 + 8 * j + 2 * (lane % 4) + (i % 2);
        const int row = row0 + 16 * t + lane / 4 + 8 * (i / 2);
        if (key >= n_kv || (causal && key > row + shift)) s[t][j][i] = SAGE_MASKED_S;
      }
}

// One key block of the online softmax. In: s (INT32 scores), m (running max,
// stored minus the fp8 offset), l (per-lane partial row sums). Out: p (fp32,
// exp2(s - m_new), in (0, 448]), alpha per row, updated m and l.
template <bool MASKED>
SAGE_DEVICE void online_softmax_block(const i32 (&s)[2][8][4], float mult, float (&m)[2][2], float (&l)[2][2],
                                      float (&alpha)[2][2], float (&p)[2][8][4]) {
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      i32 mx = s[t][0][2 * half];
#pragma unroll
      for (int j = 0; j < 8; ++j) mx = max(mx, max(s[t][j][2 * half], s[t][j][2 * half + 1]));
      // The lane's max in the scaled domain, then across the quad: with per_thread
      // K scales each lane of a quad has its own mult, so INT32 maxima do not compare.
      float row_max = exact_int_to_float(mx) * mult;
      if (MASKED && mx == SAGE_MASKED_S) row_max = SAGE_NEG_INF;
      row_max = quad_max(row_max);
      const float m_new = fmaxf(m[t][half], row_max - SAGE_FP8_OFFSET);
      alpha[t][half] = fast_exp2(m[t][half] - m_new);
      m[t][half] = m_new;
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < 8; ++j)
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const i32 si = s[t][j][2 * half + e];
          float x = fmaf(exact_int_to_float(si), mult, -m_new);
          if (MASKED && si == SAGE_MASKED_S) x = SAGE_NEG_INF;
          const float pv = fast_exp2(x);
          p[t][j][2 * half + e] = pv;
          sum += pv;
        }
      l[t][half] = fmaf(l[t][half], alpha[t][half], sum);  // the sum uses P before fp8 rounding
    }
}

// P (fp32) -> e4m3 A fragments of the two k32 steps of the P.V product. The
// accumulator order of keys inside each 16 is [0,1,8,9,2,3,10,11,...], which
// is why V is stored permuted (contract section 5): no shuffles are needed.
SAGE_DEVICE void pack_p_fragments(const float (&p)[2][8][4], u32 (&pa)[2][2][4]) {
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) {
      const int j = 4 * ks;
      pa[t][ks][0] = e4m3x4(p[t][j][0], p[t][j][1], p[t][j + 1][0], p[t][j + 1][1]);
      pa[t][ks][1] = e4m3x4(p[t][j][2], p[t][j][3], p[t][j + 1][2], p[t][j + 1][3]);
      pa[t][ks][2] = e4m3x4(p[t][j + 2][0], p[t][j + 2][1], p[t][j + 3][0], p[t][j + 3][1]);
      pa[t][ks][3] = e4m3x4(p[t][j + 2][2], p[t][j + 2][3], p[t][j + 3][2], p[t][j + 3][3]);
    }
}

// P as the A fragments of the f16 m16n8k16 (pv_block_widened, sm_90): the values of
// pack_p_fragments, rounded to e4m3 and widened to f16 in one step. k16 step kq covers the
// score n-tiles 2kq and 2kq+1: the accumulator layout of two n8 tiles is the A layout of k16.
SAGE_DEVICE void pack_p_fragments_f16(const float (&p)[2][8][4], u32 (&pw)[2][4][4]) {
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int kq = 0; kq < 4; ++kq)
#pragma unroll
      for (int r = 0; r < 4; ++r) {
        const float *tile = p[t][2 * kq + r / 2];
        pw[t][kq][r] = e4m3_rounded_f16x2(tile[2 * (r % 2)], tile[2 * (r % 2) + 1]);
      }
}
