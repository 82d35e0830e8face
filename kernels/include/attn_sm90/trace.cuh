// Phase timestamps of the consumer loop, for SM90_TRACE builds only (scripts/profile_sm90.py
// --trace): lane 0 of every consumer warp of CTA 0 records clock64() at each phase of the
// first SM90_TRACE_BLOCKS key blocks of its first tile, so the timeline of the two
// warpgroups (softmax, waiting for the turn, wgmma in flight) can be read directly.
// Layout: trace[warp (0..7)][block][point], u64 SM clock cycles. Off (no code) by default.
#pragma once
#include "../common.cuh"

#ifndef SM90_TRACE
#define SM90_TRACE 0
#endif
#define SM90_TRACE_BLOCKS 64
#define SM90_TRACE_POINTS 6

enum TracePoint : int {
  TRACE_START = 0,         // block step entered (scores of the block issued earlier)
  TRACE_SOFTMAX_DONE = 1,  // P packed
  TRACE_TURN = 2,          // ping-pong turn obtained (and the next K stage present)
  TRACE_ISSUED = 3,        // P.V and the next Q.K^T issued
  TRACE_COMPLETE = 4,      // both completed (wgmma wait returned)
  TRACE_FOLDED = 5,        // O updated, stage released
};

struct Tracer {
  u64 *slot;  // this warp's [block][point] rows, or null when not recording
  SAGE_DEVICE void stamp(int block, TracePoint point) const {
    if (SM90_TRACE && slot != nullptr && block < SM90_TRACE_BLOCKS && threadIdx.x % 32 == 0)
      slot[block * SM90_TRACE_POINTS + point] = clock64();
  }
};
