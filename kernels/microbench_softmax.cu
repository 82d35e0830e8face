// The Hopper kernel's softmax step alone (kernels/include/attn_sm90/softmax.cuh), to tell
// its own cost from what the attention kernel's surroundings add.
//
// Contract stages: 3-5 as the sm_90a kernel runs them (one 64 x 128 score tile per
// warpgroup, one block step per iteration), on synthetic INT32 scores.
// Geometry: one CTA per SM of `blockDim.x` threads (a multiple of 128: warpgroups); each
// warp runs `iters` block steps on its own fragment, its S pinned each iteration so the
// compiler recomputes everything; thread 0 records the CTA's SM clocks. With W warps
// per scheduler, cycles / iters is the time W concurrent warps take per tile step.
// Targets: every preset (the code is plain SASS; only the e4m3 pack needs sm_89+).
#include "attn_sm90/softmax.cuh"
#include "microbench_clock.cuh"

extern "C" __global__ void bench_sm90_softmax(int iters, unsigned long long *cycles, float *sink) {
  const int lane = threadIdx.x % 32;
  i32 s[Sm90Preset::S_REGS];
#pragma unroll
  for (int i = 0; i < Sm90Preset::S_REGS; ++i) s[i] = ((threadIdx.x * 131 + i * 977) % 4001) - 2000;
  float m[2] = {SAGE_MASK_SCORE, SAGE_MASK_SCORE}, l[2] = {0.0f, 0.0f};
  u32 acc = 0u;
  const BlockMask mask{0, 0, lane, 1 << 30, 0, false};
  const unsigned long long start = block_clock_start();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int i = 0; i < Sm90Preset::S_REGS; ++i) asm volatile("" : "+r"(s[i]));  // new scores, as far as the compiler knows
    float alpha[2];
    u32 p[Sm90Preset::PV_STEPS][4];
    sm90_online_softmax<false>(s, mask, 1e-3f, m, l, alpha, p);
#pragma unroll
    for (int k = 0; k < Sm90Preset::PV_STEPS; ++k)
#pragma unroll
      for (int w = 0; w < 4; ++w) acc ^= p[k][w];
  }
  block_clock_stop(start, cycles);
  sink[blockIdx.x * blockDim.x + threadIdx.x] = l[0] + l[1] + m[0] + __uint_as_float(acc & 0x3fffffffu);
}
