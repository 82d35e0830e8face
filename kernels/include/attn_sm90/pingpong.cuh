// Ping-pong between the two consumer warpgroups: their tensor-core work alternates, so
// one warpgroup's softmax (exp2 unit) runs while the other's wgmma run.
//
// Each warpgroup issues its wgmma batch of a block (P.V of block j with Q.K^T of block
// j+1) only after the other warpgroup's previous batch: named barrier `mine` (256
// threads: this warpgroup syncs, the other one arrives) gates the issue, and an arrive
// on the other's barrier, once the batch has completed, hands the turn over (the
// SM90_TURN_IS_SOFTMAX build gates the softmax instead). Consumer 0 goes first:
// consumer 1 gives it one turn in advance, once per kernel. Both warpgroups take the
// same number of turns per tile, so the turn left over at the end of a tile opens the
// next one; tiles without key blocks take and pass nothing.
// Barrier 0 is __syncthreads; ids 1 and 2 belong to this protocol.
#pragma once
#include "../common.cuh"

#define SM90_PINGPONG_THREADS 256
#define SM90_PINGPONG_BARRIER0 1

struct PingPong {
  int mine, other;
  SAGE_DEVICE explicit PingPong(int consumer)
      : mine(SM90_PINGPONG_BARRIER0 + consumer), other(SM90_PINGPONG_BARRIER0 + 1 - consumer) {}

  SAGE_DEVICE void start(int consumer) const {
    if (consumer == 1) hand_over_to(SM90_PINGPONG_BARRIER0);
  }
  SAGE_DEVICE void wait_turn() const {
    asm volatile("bar.sync %0, %1;" ::"r"(mine), "n"(SM90_PINGPONG_THREADS) : "memory");
  }
  SAGE_DEVICE void pass_turn() const { hand_over_to(other); }

 private:
  SAGE_DEVICE static void hand_over_to(int barrier) {
    asm volatile("bar.arrive %0, %1;" ::"r"(barrier), "n"(SM90_PINGPONG_THREADS) : "memory");
  }
};
