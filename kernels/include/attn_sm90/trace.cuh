// Phase timestamps of CTA 0, for SM90_TRACE builds only (`sagelib profile sm90 --trace`):
// - lane 0 of every warp of the first two consumer warpgroups records clock64() at each phase
//   of the first SM90_TRACE_BLOCKS key blocks of its first tile, so the timeline of the two
//   warpgroups (softmax, waiting for the turn, wgmma in flight) can be read directly;
// - the same lanes record the first SM90_TRACE_TILES tiles of the walk (waiting for the Q
//   slot, the prologue, the key blocks, the epilogue), and the producer thread its side of
//   each tile, so the cost of a tile change can be read beside a block's.
// Layout: trace[warp][row][point], u64 SM clock cycles; warps 0..7 are the consumers' and
// SM90_TRACE_PRODUCER the producer's; rows [0, SM90_TRACE_BLOCKS) are blocks, the next
// SM90_TRACE_TILES rows tiles. Off (no code) by default.
#pragma once
#include "../common.cuh"

#ifndef SM90_TRACE
#define SM90_TRACE 0
#endif
#define SM90_TRACE_BLOCKS 64
#define SM90_TRACE_TILES 32
#define SM90_TRACE_ROWS (SM90_TRACE_BLOCKS + SM90_TRACE_TILES)
#define SM90_TRACE_POINTS 6
#define SM90_TRACE_PRODUCER 8  // the producer thread's warp slot (after the 8 consumer warps')

enum TracePoint : int {
  TRACE_START = 0,         // block step entered (scores of the block issued earlier)
  TRACE_SOFTMAX_DONE = 1,  // P packed
  TRACE_TURN = 2,          // ping-pong turn obtained (and the next K stage present)
  TRACE_ISSUED = 3,        // P.V and the next Q.K^T issued
  TRACE_COMPLETE = 4,      // both completed (wgmma wait returned)
  TRACE_FOLDED = 5,        // O updated, stage released
};

// A consumer warp's tile t (the t-th of its walk). With a second Q slot the tile is taken
// before tile t-1's epilogue (mainloop.cuh SM90_TAKE_EARLY), so its first two points come
// before tile t-1's last.
enum TilePoint : int {
  TILE_WAIT = 0,           // before the wait for the tile's Q slot
  TILE_TAKEN = 1,          // slot full, tile decoded, its scale loads issued
  TILE_FIRST_SCORES = 2,   // the first block's Q.K^T completed
  TILE_BLOCKS_DONE = 3,    // every block folded
  TILE_STORED = 4,         // output stored
};
// The producer's tile t:
enum ProducerPoint : int {
  PRODUCER_SLOT_FREE = 0,  // the Q slot was released by the consumers
  PRODUCER_Q_ISSUED = 1,   // the tile's Q copy issued
  PRODUCER_FIRST_KV = 2,   // the first ring stage of the tile was free and its K/V copy issued
  PRODUCER_LAST_KV = 3,    // the last K/V copy of the tile issued
};

// ROWS rows of points from `slot` on, stamped by lane 0 of a warp (or the producer thread).
template <int ROWS>
struct RowTracer {
  u64 *slot;  // the first row, or null when not recording
  SAGE_DEVICE void stamp(int row, int point) const {
    if (SM90_TRACE && slot != nullptr && row < ROWS && threadIdx.x % 32 == 0)
      slot[row * SM90_TRACE_POINTS + point] = clock64();
  }
};
using Tracer = RowTracer<SM90_TRACE_BLOCKS>;     // a warp's key blocks: [block][TracePoint]
using TileTracer = RowTracer<SM90_TRACE_TILES>;  // a tile walk, row SM90_TRACE_BLOCKS + t: [tile][TilePoint]

// Warp slot `warp` of the trace buffer (null unless SM90_TRACE and recording in CTA 0).
SAGE_DEVICE u64 *trace_rows(u64 *trace, int warp) {
  return SM90_TRACE && trace != nullptr && blockIdx.x == 0 ? trace + warp * SM90_TRACE_ROWS * SM90_TRACE_POINTS
                                                           : nullptr;
}

// The tile walk's rows of a warp slot (trace_rows), after its block rows.
SAGE_DEVICE TileTracer tile_tracer(u64 *rows) {
  return TileTracer{rows != nullptr ? rows + SM90_TRACE_BLOCKS * SM90_TRACE_POINTS : nullptr};
}

