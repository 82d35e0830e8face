// Register reallocation between warpgroups (setmaxnreg, sm_90a).
//
// A warp-specialised CTA starts with one register count for every thread (ptxas'
// allocation under __launch_bounds__). The producer warpgroup, which only issues TMA
// copies, gives registers back with warpgroup_regs_release<24..56>(); the consumer
// warpgroups then claim them with warpgroup_regs_claim<...>() (which waits until the
// pool has them). Every warp of the warpgroup must execute the same call. Counts are
// per thread, multiples of 8 in [24, 256]; the CTA's total must fit the SM's 64 K.
// No contract stage; no memory state. Every warp of a warpgroup executes the same call (warpgroup-
// collective). Target: sm_90a.
#pragma once
#include "../common.cuh"
#include "arch_guard.cuh"

template <u32 REGS>
SAGE_DEVICE void warpgroup_regs_claim() {
  static_assert(REGS % 8 == 0 && REGS >= 24 && REGS <= 256, "setmaxnreg: a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(REGS));
}

template <u32 REGS>
SAGE_DEVICE void warpgroup_regs_release() {
  static_assert(REGS % 8 == 0 && REGS >= 24 && REGS <= 256, "setmaxnreg: a multiple of 8 in [24, 256]");
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(REGS));
}

// The warpgroup (128 consecutive threads) this thread belongs to, uniform across the warp.
SAGE_DEVICE int warpgroup_index() { return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0); }
