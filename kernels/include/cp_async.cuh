// Asynchronous global -> shared copies (cp.async, sm_80+), 16 bytes at a time.
//
// A copy whose source lies outside the tensor is issued with src-size 0, which
// fills the 16 destination bytes with zeros: ragged tails never expose stale
// shared memory. The source address is then clamped to a valid one anyway.
// Used by attn_mma.cu's K/V stages. Each thread issues its own copies; cp_async_wait<n> waits for the
// calling thread's groups only, so a __syncthreads must follow before other threads read the tile.
// Targets: sm_80+ (built for sm_89, sm_90, sm_120a, sm_121a).
#pragma once
#include "common.cuh"

SAGE_DEVICE void cp_async_16(u32 smem, const void *gmem, bool valid) {
  const int bytes = valid ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(smem), "l"(gmem), "r"(bytes)
               : "memory");
}

SAGE_DEVICE void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int N>
SAGE_DEVICE void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}
