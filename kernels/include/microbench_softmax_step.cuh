// The loop the softmax microbenchmarks time (microbench_softmax.cu, microbench_softmax_beside.cu):
// `iters` steps of the Hopper kernel's softmax (attn_sm90/softmax.cuh) on one 64 x 128 score tile
// per warpgroup, this thread's synthetic INT32 scores pinned each step so that the compiler
// recomputes everything. Returns a value of every step's output, for the caller's sink.
#pragma once
#include "attn_sm90/softmax.cuh"

SAGE_DEVICE float sm90_softmax_steps(int iters) {
  const int lane = threadIdx.x % 32;
  i32 s[Sm90Preset::S_REGS];
#pragma unroll
  for (int i = 0; i < Sm90Preset::S_REGS; ++i) s[i] = ((threadIdx.x * 131 + i * 977) % 4001) - 2000;
  float m[2] = {SAGE_ROW_MAX_INIT, SAGE_ROW_MAX_INIT}, l[2] = {0.0f, 0.0f};
  u32 acc = 0u;
  const BlockMask mask{0, 0, lane, 1 << 30, 0, false};
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int i = 0; i < Sm90Preset::S_REGS; ++i) asm volatile("" : "+r"(s[i]));  // new scores, for the compiler
    float alpha[2];
    u32 p[Sm90Preset::PV_STEPS][4];
    sm90_online_softmax<false>(s, mask, 1e-3f, m, l, alpha, p);
#pragma unroll
    for (int k = 0; k < Sm90Preset::PV_STEPS; ++k)
#pragma unroll
      for (int w = 0; w < 4; ++w) acc ^= p[k][w];
  }
  return l[0] + l[1] + m[0] + __uint_as_float(acc & 0x3fffffffu);
}
