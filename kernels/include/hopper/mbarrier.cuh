// Shared-memory mbarriers (sm_90): the handshake between a TMA producer and its consumers.
//
// An mbarrier is a 64-bit word in shared memory with a phase bit. A phase completes
// when the expected number of arrivals has happened AND every byte announced with
// expect_tx has landed (the TMA engine counts bytes down as it writes). Waiters name
// the parity of the phase they wait for: the first completion is parity 0, the next 1,
// and so on; a ring of stages flips its parity each time it wraps around.
//
// Usage (one stage): one thread inits with the arrival count, fence, __syncthreads;
// the producer calls arrive_expect_tx(bytes) then issues the copies on the barrier;
// consumers spin in mbarrier_wait_parity(bar, parity).
// No contract stage by itself; the barrier guards a shared stage's bytes between the thread that
// arrives (TMA issuer) and every waiting warp. Target: sm_90a (the parity waits exist on sm_90).
#pragma once
#include "../common.cuh"
#include "arch_guard.cuh"

SAGE_DEVICE u32 smem_address(const void *ptr) { return static_cast<u32>(__cvta_generic_to_shared(ptr)); }

// Sets up a barrier that completes a phase after `arrivals` arrivals (plus the announced bytes).
SAGE_DEVICE void mbarrier_init(u64 *bar, u32 arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_address(bar)), "r"(arrivals) : "memory");
}

// Makes initialized barriers visible to the async proxy (the TMA engine) before first use.
SAGE_DEVICE void mbarrier_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory"); }

// One arrival (a consumer releasing a stage).
SAGE_DEVICE void mbarrier_arrive(u64 *bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_address(bar)) : "memory");
}

// One arrival that also announces `bytes` of transactions the phase must wait for.
SAGE_DEVICE void mbarrier_arrive_expect_tx(u64 *bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(smem_address(bar)), "r"(bytes)
               : "memory");
}

// True once the phase of the given parity has completed (a bounded hardware wait, not a spin).
SAGE_DEVICE bool mbarrier_try_wait_parity(u64 *bar, u32 parity) {
  u32 done;
  asm volatile(
      "{\n"
      "  .reg .pred complete;\n"
      "  mbarrier.try_wait.parity.shared::cta.b64 complete, [%1], %2;\n"
      "  selp.u32 %0, 1, 0, complete;\n"
      "}\n"
      : "=r"(done)
      : "r"(smem_address(bar)), "r"(parity)
      : "memory");
  return done != 0;
}

// Blocks until the phase of the given parity has completed.
SAGE_DEVICE void mbarrier_wait_parity(u64 *bar, u32 parity) {
  while (!mbarrier_try_wait_parity(bar, parity)) {
  }
}
