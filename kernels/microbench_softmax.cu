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
#include "microbench_clock.cuh"
#include "microbench_softmax_step.cuh"

extern "C" __global__ void bench_sm90_softmax(int iters, unsigned long long *cycles, float *sink) {
  const unsigned long long start = block_clock_start();
  const float kept = sm90_softmax_steps(iters);
  block_clock_stop(start, cycles);
  sink[blockIdx.x * blockDim.x + threadIdx.x] = kept;
}
