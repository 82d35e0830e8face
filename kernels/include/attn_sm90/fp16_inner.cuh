// The fp32+fp16 inner level of the sm_90a kernel (build option SM90_PV_F16=1): P.V into an f16 accumulator of
// at most 64 keys (FP16_PARTIAL_KEYS: with V at 2.25 no partial can overflow), joined into the fp32 O after each.
//
// Contract stage 6, fp32+fp16 on the sm90 preset: a 128-key block is two fp16 partials, keys 0-63 and 64-127,
// each rounded to fp16 after every k32 step and added to O in key order: O = O * alpha + partial 0, then
// O += partial 1 (the kernel joins the first with one fmaf, the contract with a product and a sum: the same to
// within the parity bars, not bit for bit).
// Registers: one f16 accumulator per partial (D / 4 per thread: 32 at D=128), both in flight with the next block's
// Q.K^T, so the level takes the fp32 inner level's registers (64 at D=128). A build with one accumulator, the second
// partial issued after the first was joined (32 registers), ran at the same speed at D=128 and 4-6% slower at D=64
// (log seq 201-202; tree c8448fb has it): the level costs instructions (two conversions and an add per O element per
// partial), not registers.
// Ownership as mainloop.cuh: each consumer warpgroup owns its 64 rows' O, P and partials in registers.
// Only the one-pass geometries (sm90_pv_parts 1) take it; the launcher refuses it for the rotation geometry.
// Status (2026-12-02): matches its contract twin on the H200 (tests/test_cuda_sm90.py); 0.90x the default's speed at
// D=128, 0.95-0.98x at D=64 (backend cuda-sm90-fp16-inner).
#pragma once
#include "../convert.cuh"
#include "../hopper/wgmma.cuh"

#ifndef SM90_PV_F16
#define SM90_PV_F16 0
#endif

// k32 steps per fp16 partial (64 keys, NUMERICAL_CONTRACT.md FP16_PARTIAL_KEYS)
#define SM90_F16_PARTIAL_STEPS 2

// partial = P . V over the block's k32 steps [FIRST, FIRST + STEPS), a fresh f16 accumulator. V^T's rows are the
// block's 32 * PV_STEPS keys (the swizzle of that width), step s starting 32 * s bytes in.
template <int D, int PV_STEPS, int FIRST, int STEPS>
SAGE_DEVICE void issue_pv_f16(u32 (&partial)[D / 4], const u32 (&p)[PV_STEPS][4], const u8 *v_tile) {
  static_assert(FIRST + STEPS <= PV_STEPS, "steps of the block");
  const u64 desc_v = wgmma_desc_k_major<32 * PV_STEPS>(v_tile);
  wgmma_fence();
#pragma unroll
  for (int k = 0; k < STEPS; ++k) {
    const u64 step = wgmma_desc_advance(desc_v, 32 * (FIRST + k));
    if (k == 0) wgmma_pv_step_f16<D, false>(partial, p[FIRST], step);
    else wgmma_pv_step_f16<D, true>(partial, p[FIRST + k], step);
  }
  wgmma_commit();
}

// O = O * alpha + partial (RESCALE: the block's first partial) or O += partial. Register j of the partial holds O's
// elements 2j and 2j + 1 (wgmma.cuh), whose row half is (2j / 2) % 2 = j % 2: alpha[j % 2].
template <int D, bool RESCALE>
SAGE_DEVICE void join_partial(float (&o)[D / 2], const float (&alpha)[2], const u32 (&partial)[D / 4]) {
#pragma unroll
  for (int j = 0; j < D / 4; ++j) {
    float lo, hi;
    half2_bits_to_float2(partial[j], lo, hi);
    if (RESCALE) {
      o[2 * j] = fmaf(o[2 * j], alpha[j % 2], lo);
      o[2 * j + 1] = fmaf(o[2 * j + 1], alpha[j % 2], hi);
    } else {
      o[2 * j] += lo;
      o[2 * j + 1] += hi;
    }
  }
}
