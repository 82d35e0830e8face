// Contract stages 3-5 on one consumer warpgroup's 64 x KEYS score tile (sm_90a kernel;
// KEYS = 128 in the sm90 preset's geometry, 64 in the three-consumer one: geometry.cuh):
// INT32 scores -> log2-domain scores -> base-2 online softmax with the fp8 offset ->
// P as e4m3, already in the register A fragment of the P.V wgmma.
//
// Fragment (hopper/wgmma.cuh): thread t = 32w + l holds s[i], i < KEYS / 2, at row
// 16w + l/4 + 8h with h = (i/2) % 2 and key 8(i/4) + 2(l%4) + i%2 of the block. A row
// lives in the 4 lanes of a quad: the row max takes two xor-shuffles, the row sum is
// kept per lane and reduced once in the epilogue (alpha is the same across the quad).
//
// Scale groups (contract sm90 preset, per_thread): rows h = 0 and 1 of a thread are
// 8 apart, so they share one q group, and every key a thread holds has
// (key % 8) / 2 = l % 4, so one k group per block: one multiplier per thread,
// mult = q_scale * sm_scale * log2e * k_scale.
//
// P packing: A word q of k32 step k holds row h = q % 2 and, in its four bytes, the
// keys 16c + {2(l%4), 2(l%4)+1, 8+2(l%4), 9+2(l%4)} with c = 2k + q/2: the fragment
// reads them as columns 16c + 4(l%4) + b, so inside every 16 keys P's order is the
// contract's sm89 permutation [0,1,8,9,2,3,10,11,...], which is how the V quantizer
// writes V for this kernel. No shuffles.
#pragma once
#include "../convert.cuh"
#include "../online_softmax.cuh"
#include "ablation.cuh"
#include "geometry.cuh"


SAGE_DEVICE int sm90_s_row(int lane, int i) { return lane / 4 + 8 * ((i / 2) % 2); }  // + 16 * warp
SAGE_DEVICE int sm90_s_key(int lane, int i) { return 8 * (i / 4) + 2 * (lane % 4) + i % 2; }

// Which scores a block hides: keys >= n_kv and, when causal, keys > row + shift. The
// scores are read, never written: S may share the wgmma pipeline with the next block's
// scores in flight, and writing an accumulator register there would serialize it.
struct BlockMask {
  int key0, warp_row0, lane, n_kv, shift;
  bool causal;
  SAGE_DEVICE bool hides(int i) const {
    const int key = key0 + sm90_s_key(lane, i), row = warp_row0 + sm90_s_row(lane, i);
    return key >= n_kv || (causal && key > row + shift);
  }
};

// One key block in two steps: sm90_softmax_max updates m (running max minus the fp8
// offset) and gives alpha per row half; sm90_softmax_exp adds the block's P to the
// per-lane partial row sums (before fp8 rounding) and writes P's e4m3 A fragments (p[k]:
// P.V k32 step k, keys 32k..32k+31). With MASKED, hidden scores count as the sentinel
// (INT32 min) for the max and as -inf (exp2 argument: P exactly 0). S_REGS (the block's keys / 2) is deduced
// from the score array; P has S_REGS / 16 k32 steps.

// The INT32 maximum of each row half's S_REGS / 2 scores. sm90_softmax_max takes both halves'
// maxima (two chains of S_REGS / 4 VIMNMX3) before either half's conversion and quad shuffles:
// faster in the kernel than each half's chain followed by its own shuffles, or a shallower tree.
template <bool MASKED, int S_REGS>
SAGE_DEVICE void sm90_row_max(const i32 (&s)[S_REGS], const BlockMask &mask, i32 (&mx)[2]) {
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    mx[h] = SAGE_MASKED_S;
#pragma unroll
    for (int j = 0; j < S_REGS / 4; ++j)
#pragma unroll
      for (int e = 0; e < 2; ++e) {
        const int i = 4 * j + 2 * h + e;
        mx[h] = max(mx[h], MASKED && mask.hides(i) ? SAGE_MASKED_S : s[i]);
      }
  }
}

template <bool MASKED, int S_REGS>
SAGE_DEVICE void sm90_softmax_max(const i32 (&s)[S_REGS], const BlockMask &mask, float mult, float (&m)[2],
                                  float (&alpha)[2]) {
  i32 mx[2];
  sm90_row_max<MASKED>(s, mask, mx);
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    // fp32 rounding is monotone, so the max of the scaled scores is the scaled INT32 max.
    float row_max = __int2float_rn(mx[h]) * mult;
    if (MASKED && mx[h] == SAGE_MASKED_S) row_max = SAGE_NEG_INF;
    row_max = quad_max(row_max);
    const float m_new = fmaxf(m[h], row_max - SAGE_FP8_OFFSET);
    alpha[h] = fast_exp2(m[h] - m_new);
    m[h] = m_new;
  }
}

template <bool MASKED, int S_REGS>
SAGE_DEVICE void sm90_softmax_exp(const i32 (&s)[S_REGS], const BlockMask &mask, float mult, const float (&m)[2],
                                  float (&sum)[2], u32 (&p)[S_REGS / 16][4]) {
#pragma unroll
  for (int c = 0; c < S_REGS / 8; ++c)  // 16 keys: n-tiles 2c and 2c + 1
#pragma unroll
    for (int h = 0; h < 2; ++h) {  // row half
      float pv[4];
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        const int i = 4 * (2 * c + b / 2) + 2 * h + b % 2;
        const float score = SM90_ABLATE_CVT ? __int_as_float(s[i])
                            : __int2float_rn(s[i]);  // exact (|S| < 2^22): the contract's score
        float x = fmaf(score, mult, -m[h]);
        if (MASKED && mask.hides(i)) x = SAGE_NEG_INF;
        pv[b] = SM90_ABLATE_EXP2 ? fmaf(x, 1e-3f, 1.0f) : fast_exp2(x);
        sum[h] += pv[b];
      }
      p[c / 2][2 * (c % 2) + h] = SM90_ABLATE_PACK ? (__float_as_uint(pv[0]) ^ __float_as_uint(pv[2]))
                                                   : e4m3x4(pv[0], pv[1], pv[2], pv[3]);
    }
}

// The block's softmax step: l = l * alpha + the block's row sums.
template <bool MASKED, int S_REGS>
SAGE_DEVICE void sm90_online_softmax(const i32 (&s)[S_REGS], const BlockMask &mask, float mult, float (&m)[2],
                                     float (&l)[2], float (&alpha)[2], u32 (&p)[S_REGS / 16][4]) {
  sm90_softmax_max<MASKED>(s, mask, mult, m, alpha);
  float sum[2] = {0.0f, 0.0f};
  sm90_softmax_exp<MASKED>(s, mask, mult, m, sum, p);
#pragma unroll
  for (int h = 0; h < 2; ++h) l[h] = fmaf(l[h], alpha[h], sum[h]);
}
