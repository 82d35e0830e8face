// Turns on the tensor cores between the consumer warpgroups of the sm_90a attention kernel
// (contract stages 3 and 6: each block's Q.K^T and P.V wgmma batch), so that one warpgroup's
// softmax (the exp2 unit) runs while another's wgmma run.
//
// Ownership: each consumer warpgroup owns one named barrier, TURN_BARRIER0 + its index. A
// warpgroup issues its batch (P.V of block j with Q.K^T of block j+1) only after bar.sync on its
// own barrier (256 threads: its 128 sync, the previous warpgroup's 128 arrived), and hands the
// turn on with bar.arrive on the next warpgroup's barrier once its batch has completed (passing
// it at issue would let the tensor cores interleave two queued batches and put the warpgroups in
// step). The turn goes round 0, 1, ..., CONSUMERS - 1, 0, ...; the last consumer gives consumer 0
// its first turn, once per kernel. An arrive is never pending twice on one barrier: a warpgroup
// gets its next turn only after every other one has taken its own. All warpgroups take the same
// number of turns per tile, so the turn left over at the end of a tile opens the next one; tiles
// without key blocks take and pass nothing.
#pragma once
#include "../common.cuh"

// Named barrier ids of the kernel (barrier 0 is __syncthreads).
enum Sm90NamedBarrier : int {
  SM90_BARRIER_SYNCTHREADS = 0,  // __syncthreads: the barrier initialisation at kernel start
  SM90_BARRIER_TURN0 = 1,        // consumer c's tensor-core turn is SM90_BARRIER_TURN0 + c (c < CONSUMERS <= 3)
};
#define SM90_PINGPONG_THREADS 256  // a turn barrier's count: the waiting warpgroup and the one handing over

template <int CONSUMERS>
struct PingPong {
  int mine, next;  // this warpgroup's turn barrier, and the one it hands the turn to
  SAGE_DEVICE explicit PingPong(int consumer)
      : mine(SM90_BARRIER_TURN0 + consumer),
        next(CONSUMERS == 2 ? SM90_BARRIER_TURN0 + 1 - consumer
                            : SM90_BARRIER_TURN0 + (consumer + 1 == CONSUMERS ? 0 : consumer + 1)) {}

  SAGE_DEVICE void start(int consumer) const {
    if (consumer == CONSUMERS - 1) hand_over_to(SM90_BARRIER_TURN0);
  }
  SAGE_DEVICE void wait_turn() const {
    asm volatile("bar.sync %0, %1;" ::"r"(mine), "n"(SM90_PINGPONG_THREADS) : "memory");
  }
  SAGE_DEVICE void pass_turn() const { hand_over_to(next); }

 private:
  SAGE_DEVICE static void hand_over_to(int barrier) {
    asm volatile("bar.arrive %0, %1;" ::"r"(barrier), "n"(SM90_PINGPONG_THREADS) : "memory");
  }
};
