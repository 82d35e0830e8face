// Turns between the consumer warpgroups: their tensor-core work takes turns, so the
// others' softmax (exp2 unit) runs while one warpgroup's wgmma run.
//
// Each warpgroup issues its wgmma batch of a block (P.V of block j with Q.K^T of block
// j+1) only after the previous warpgroup's batch: named barrier `mine` (256 threads: this
// warpgroup syncs, the previous one arrives) gates the issue, and an arrive on the next
// warpgroup's barrier, once the batch has completed, hands the turn over (the
// SM90_TURN_IS_SOFTMAX build gates the softmax instead). The turn goes round the
// CONSUMERS warpgroups in order, 0, 1, ..., CONSUMERS - 1, 0, ...; consumer 0 goes first:
// the last consumer gives it one turn in advance, once per kernel. An arrive is never
// pending twice on one barrier: a warpgroup gets its next turn only after every other one
// has taken its own. All warpgroups take the same number of turns per tile, so the turn
// left over at the end of a tile opens the next one; tiles without key blocks take and
// pass nothing.
// Barrier 0 is __syncthreads; ids 1 .. CONSUMERS belong to this protocol.
#pragma once
#include "../common.cuh"

#define SM90_PINGPONG_THREADS 256
#define SM90_PINGPONG_BARRIER0 1

template <int CONSUMERS>
struct PingPong {
  int mine, next;
  SAGE_DEVICE explicit PingPong(int consumer)
      : mine(SM90_PINGPONG_BARRIER0 + consumer),
        next(CONSUMERS == 2 ? SM90_PINGPONG_BARRIER0 + 1 - consumer
                            : SM90_PINGPONG_BARRIER0 + (consumer + 1 == CONSUMERS ? 0 : consumer + 1)) {}

  SAGE_DEVICE void start(int consumer) const {
    if (consumer == CONSUMERS - 1) hand_over_to(SM90_PINGPONG_BARRIER0);
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
