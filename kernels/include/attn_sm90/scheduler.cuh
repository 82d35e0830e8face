// Tile scheduler of the sm_90a attention kernel: a persistent grid (one CTA per SM)
// takes (batch, head, G::CTA_Q-row query block) tiles from a global counter as it finishes
// them (dynamic, greedy): a CTA's first tile is its block index, every later one the
// counter's next value (offset by the grid size).
//
// Tiles are numbered head-major, so the CTAs in flight at any moment share few heads' K
// and V in L2. Causal tiles (the last query block sees the most keys) are numbered
// heaviest first across a window of heads (SM90_L2_WINDOW_BYTES). Taken greedily in that
// order, causal work spreads to within ~1% of even in a model of the issue's shapes; the
// former static stride left 5% at N 16384 B 2 and 26% at N 1024 B 32 idle (its CTAs
// drew unequal sums of tile lengths).
// Only the producer thread takes tiles; it hands each one to the consumer warpgroups in
// shared memory with the tile's Q (producer.cuh, SM90_NO_TILE ends the walk).
#pragma once
#include "../common.cuh"
#include "geometry.cuh"

#define SM90_NO_TILE 0x7fffffff  // handed over after the last tile: not valid()

// Division by a divisor fixed for the launch, as a multiply-high and a shift: the consumers
// decode a tile on their own path, where a runtime division is an I2F + MUFU.RCP chain on the
// exp2 unit. Every thread computes the divisors at the start and holds them in registers, except
// in the cta_k = 64 geometry: there they stayed live through the key loop and its head_dim-128
// consumers spilled (79 local accesses per block, 413 against 798 TOPS), so thread 0 writes them
// to shared memory instead (shared memory everywhere, or kernel parameters, are slower). For 0 <= n < 2^31
// and d = divisor > 1 with p = ceil(log2 d): multiplier = ceil(2^(31+p) / d) < 2^32, and
// n * multiplier / 2^(31+p) exceeds n / d by less than n / 2^(31+p) < 1 / d, which cannot
// carry the quotient past the next integer.
struct FastDivisor {
  u32 divisor, multiplier, shift;
  SAGE_DEVICE explicit FastDivisor(int d) : divisor(d), multiplier(0), shift(0) {
    if (d > 1) {
      const u32 p = 32 - __clz(d - 1);
      multiplier = static_cast<u32>(((1ull << (31 + p)) + d - 1) / d);
      shift = p - 1;
    }
  }
  SAGE_DEVICE int div(int n) const { return divisor == 1 ? n : static_cast<int>(__umulhi(n, multiplier) >> shift); }
};
// The decode's divisors: query blocks per head, query heads, pairs per causal window, tiles per
// full causal window, query heads per kv head (TileScheduler::compute_divisors).
struct TileDivisors {
  FastDivisor q_blocks, heads, window, span, group;
};

struct Tile {
  int qblock, head, batch;
};

// Causal tiles are ordered heaviest first across a window of (batch, head) pairs whose K and
// V fit in this many bytes of L2 together (the H200 has 50 MB), head-major window by window:
// nearly longest-processing-time-first balance without spreading the CTAs over every head.
// A pair's K and V take 2 * n_kv * head_dim bytes; the window is the whole pairs that fit
// strictly below the budget (hence the + 1 in the constructor: 4 MB pairs give 5, not 6).
#define SM90_L2_WINDOW_BYTES (24 << 20)

template <typename G>
struct TileScheduler {
  int q_blocks, heads, pairs, tiles, window;  // pairs: (batch, head) pairs; window: pairs per causal window
  bool causal;
  // Where the divisors live: shared memory (written by thread 0 before the first __syncthreads) for
  // the 64-key-step geometry, this object's registers for the others.
  static constexpr bool SHARED_DIVISORS = G::BLOCK_KEYS == 64;
  int group;  // query heads per kv head
  const TileDivisors &shared_divisors;
  TileDivisors own_divisors;

  SAGE_DEVICE TileScheduler(int n_q, int n_kv, int head_dim, int heads_q, int heads_kv, int batch, bool causal_,
                            const TileDivisors &divisors)
      : q_blocks(ceil_div(n_q, G::CTA_Q)), heads(heads_q), pairs(heads_q * batch), tiles(q_blocks * pairs),
        window(max(1, min(pairs, (int)(SM90_L2_WINDOW_BYTES / (2ll * n_kv * head_dim + 1))))),
        causal(causal_), group(heads_q / heads_kv), shared_divisors(divisors), own_divisors(compute_divisors()) {}
  SAGE_DEVICE TileDivisors compute_divisors() const {
    return TileDivisors{FastDivisor(q_blocks), FastDivisor(heads), FastDivisor(window), FastDivisor(window * q_blocks),
                        FastDivisor(group)};
  }
  // The kv head of query head `head`, for the producer: with the divisors in registers, a hardware
  // division (the producer thread is off the consumers' path and keeps its registers for them).
  SAGE_DEVICE int kv_head(int head) const { return SHARED_DIVISORS ? by().group.div(head) : head / group; }
  SAGE_DEVICE const TileDivisors &by() const { return SHARED_DIVISORS ? shared_divisors : own_divisors; }

  SAGE_DEVICE int first() const { return blockIdx.x; }
  // The tile after this CTA's current one: the counter (zeroed per launch) counts the tiles
  // handed out beyond the grid's first ones.
  SAGE_DEVICE int take_next(int *counter) const { return gridDim.x + atomicAdd(counter, 1); }
  SAGE_DEVICE bool valid(int tile) const { return tile < tiles; }

  SAGE_DEVICE Tile operator()(int tile) const {
    int bh, qblock;
    if (causal) {  // window w holds pairs [w * window, ...): rank r of every pair, then rank r + 1
      const int w = by().span.div(tile), in_window = tile - w * static_cast<int>(by().span.divisor);
      const int here = min(window, pairs - w * window);  // the last window may be short
      const int rank = here == window ? by().window.div(in_window) : in_window / here;
      bh = w * window + in_window - rank * here;
      qblock = q_blocks - 1 - rank;
    } else {
      bh = by().q_blocks.div(tile);
      qblock = tile - bh * q_blocks;
    }
    const int batch = by().heads.div(bh);
    return Tile{qblock, bh - batch * heads, batch};
  }
};

// Key blocks (of `block_keys`) that rows [q0, q0 + rows) of a tile see: all of them, or
// when causal, those up to the last row's diagonal (bottom-right: key <= row + shift).
SAGE_DEVICE int visible_key_blocks(int q0, int rows, int n_q, int n_kv, bool causal, int shift, int block_keys) {
  const int blocks = ceil_div(n_kv, block_keys);
  if (!causal) return blocks;
  const int last_visible = min(q0 + rows, n_q) - 1 + shift;
  return last_visible < 0 ? 0 : min(blocks, last_visible / block_keys + 1);
}
