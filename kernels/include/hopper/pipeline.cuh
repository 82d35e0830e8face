// The producer/consumer ring of shared-memory stages (sm_90a), on mbarrier pairs.
//
// Stage s has a `full` barrier (1 arrival: the producer's arrive_expect_tx, plus the
// bytes its TMA copies deliver) and an `empty` barrier (one arrival per consumer warp
// once it no longer reads the stage). Both sides walk the stages in the same order
// with a RingPosition; the phase parity flips each time the position wraps.
//
// Parity convention (mbarrier.cuh): waiting for parity p returns once the phase of
// parity p has completed. Consumers wait `full` with the position's parity; the
// producer waits `empty` with the opposite one, so its first pass over a fresh ring
// does not block (no consumer has released anything yet, and nothing needs it to).
// Ownership: the producer (one elected thread) owns the full barriers' arrivals; each consumer warp
// owns one arrival on every empty barrier. Used by attn_sm90.cu for Q, K and V^T stages (stages 3 and 6).
// Target: sm_90a.
#pragma once
#include "mbarrier.cuh"

template <int STAGES>
struct RingPosition {
  int stage = 0;
  u32 parity = 0;
  SAGE_DEVICE void advance() {
    if (++stage == STAGES) {
      stage = 0;
      parity ^= 1u;
    }
  }
};

// A one-slot handshake (the query tile): the same two barriers without a ring.
struct SlotBarriers {
  u64 full;
  u64 empty;
};

template <int STAGES>
struct RingBarriers {
  u64 full[STAGES];
  u64 empty[STAGES];

  SAGE_DEVICE void init(u32 consumer_arrivals) {
#pragma unroll
    for (int s = 0; s < STAGES; ++s) {
      mbarrier_init(&full[s], 1);
      mbarrier_init(&empty[s], consumer_arrivals);
    }
  }
  SAGE_DEVICE void consumer_wait(const RingPosition<STAGES> &at) { mbarrier_wait_parity(&full[at.stage], at.parity); }
  SAGE_DEVICE void producer_wait(const RingPosition<STAGES> &at) {
    mbarrier_wait_parity(&empty[at.stage], at.parity ^ 1u);
  }
};

// One arrival per warp (lane 0, after the warp converged): the `empty` side's unit.
SAGE_DEVICE void warp_release(u64 *empty) {
  __syncwarp();
  if (threadIdx.x % 32 == 0) mbarrier_arrive(empty);
}
