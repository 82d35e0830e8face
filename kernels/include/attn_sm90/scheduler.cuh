// Tile scheduler of the sm_90a attention kernel: a persistent grid (one CTA per SM)
// walks the (batch, head, 128-row query block) tiles with a static stride.
//
// Tiles are numbered head-major, so the CTAs in flight at any moment share one or
// two heads' K and V in L2. Causal tiles are numbered heaviest first inside a head
// (the last query block sees the most keys), which evens out the strided walk.
// The producer and both consumer warpgroups walk the same sequence independently:
// no communication is needed to agree on the next tile.
#pragma once
#include "../common.cuh"
#include "geometry.cuh"

struct Tile {
  int qblock, head, batch;
};

struct TileScheduler {
  int q_blocks, heads, tiles;
  bool causal;

  SAGE_DEVICE TileScheduler(int n_q, int heads_q, int batch, bool causal_)
      : q_blocks(ceil_div(n_q, SM90_CTA_Q)), heads(heads_q), tiles(ceil_div(n_q, SM90_CTA_Q) * heads_q * batch),
        causal(causal_) {}

  SAGE_DEVICE int first() const { return blockIdx.x; }
  SAGE_DEVICE int next(int tile) const { return tile + gridDim.x; }
  SAGE_DEVICE bool valid(int tile) const { return tile < tiles; }

  SAGE_DEVICE Tile operator()(int tile) const {
    const int bh = tile / q_blocks, r = tile % q_blocks;
    return Tile{causal ? q_blocks - 1 - r : r, bh % heads, bh / heads};
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
