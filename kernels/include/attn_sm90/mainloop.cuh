// The consumer warpgroups of the sm_90a attention kernel: contract stages 3-6 per key
// block, for 64 query rows each. A block is G::BLOCK_KEYS keys (geometry.cuh): 128 in the
// sm90 preset's geometry, 64 in the three-consumer one.
//
// Per block j (K and V^T in ring stage j, Q in the tile's Q slot):
//   S_j   = Q . K_j^T        D/32 int8 wgmma m64nKEYSk32 from shared memory (exact int32)
//   P_j   = softmax step     softmax.cuh, P as e4m3 A fragments in registers
//   inner = P_j . V_j        KEYS/32 e4m3 wgmma m64nDk32, P from registers, a fresh fp32
//                            accumulator over the block's keys (the two-level scheme)
//   O     = O * alpha + inner
// Schedule (one S buffer, ping-pong, both head dims): after block j's softmax the warpgroup
// waits for its turn (pingpong.cuh), issues P.V of block j and Q.K^T of block j+1 back to back,
// waits for both, hands the turn to the next consumer warpgroup (whose softmax ran meanwhile),
// releases the stage (its `empty` barrier, one arrive per warp) and folds.
// Ownership: each consumer warpgroup owns its 64 rows' S, P, O, m and l in registers; it reads
// K/V^T from the ring stage its `full` barrier guards and Q from the Q slot whose `full` barrier
// the producer completes, and releases the slot (`empty`) after its epilogue.
#pragma once
#include "../hopper/pipeline.cuh"
#include "../hopper/warpgroup_regs.cuh"
#include "../hopper/wgmma.cuh"
#include "epilogue.cuh"
#include "fp16_inner.cuh"
#include "params.cuh"
#include "pingpong.cuh"
#include "scheduler.cuh"
#include "softmax.cuh"
#include "trace.cuh"

#define SM90_CAUSAL ATTN_CAUSAL  // the flag bits of both attention kernels: AttnFlags (params.cuh)
#define SM90_PER_THREAD ATTN_PER_THREAD
#define SM90_OUT_BF16 ATTN_OUT_BF16
// Q slots go round in order and a consumer takes its next tile before this tile's epilogue, so the
// slot wait, the decode and the first scale loads hide behind the stores: that needs a second slot.
static_assert(SM90_Q_SLOTS >= 2, "the next tile is taken before the epilogue: two Q slots at least");

struct ConsumerArgs {
  const float *q_scale, *k_scale, *v_scale;
  u16 *out;
  i64 o_sb, o_sh, o_sn;
  float *lse;
  int n_q, n_kv, heads_kv, q_groups, k_groups, flags, shift;
  float sm_scale_log2e;
  u64 *trace;  // SM90_TRACE builds: the phase timestamps (trace.cuh); else unused
};

// Everything one block step needs besides the S buffers.
template <int D, int STAGES, typename Smem>
struct BlockContext {
  using G = typename Smem::Geometry;
  Smem &smem;
  RingPosition<STAGES> &ring;  // position of the block being computed
  const PingPong<G::CONSUMERS> &turns;
  u64 q_desc;                  // this warpgroup's 64 query rows in the Q slot: the A operand of Q.K^T
  // 16 zeroed bytes nothing reads: without them ptxas swaps two registers in thread 0's divisor setup of
  // the 64-key-step instances, and those instances' machine code is the one measured (sagelib kernels fingerprint).
  u32 unread[4];
  const float *k_scale;        // this thread's k scale of the first k group (of its (batch, kv head))
  int k_stride;                // floats between the k scales of consecutive k groups (4 or 1)
  float q_mult;
  float k_ahead;               // the k scale of the block being computed, loaded one block ahead
  int blocks, full_blocks;     // full_blocks: the leading blocks that hide no score from this warp
  int warp_row0, lane, n_kv, shift;  // warp_row0: the warp's first query row
  bool causal;
  Tracer trace;

  // A 64-key block j is in k group j / 2 (geometry.cuh SM90_K_GROUP_KEYS).
  SAGE_DEVICE float load_k_scale(int j) const {
    return k_scale[k_stride * (j / (SM90_K_GROUP_KEYS / G::BLOCK_KEYS))];
  }
  // Block j's k scale; starts the load of block j+1's, so its latency hides behind this block
  // (the last block loads its own again: no branch).
  SAGE_DEVICE float take_k_scale(int j) {
    const float now = k_ahead;
    k_ahead = load_k_scale(min(j + 1, blocks - 1));
    return now;
  }
};

// The leading key blocks (of KEYS) that hide no score from a warp whose first row is warp_row0:
// all keys < n_kv and, when causal, every key <= warp_row0 + shift (block_softmax's unmasked path).
SAGE_DEVICE int unmasked_key_blocks(int keys, int n_kv, bool causal, int warp_row0, int shift) {
  const int in_range = n_kv / keys;
  return causal ? min(in_range, max(0, warp_row0 + shift + 1) / keys) : in_range;
}

// A tile taken from its Q slot (take_tile), with the loads its first block needs in flight. The
// walk's tile w is in Q slot w % SM90_Q_SLOTS (the slots go round in order).
struct TakenTile {
  int index, blocks;         // index: SM90_NO_TILE (not valid()) ends the walk
  float q_scale, k_scale0;   // this thread's q scale and block 0's k scale, loading: nothing waits for them here
};

// Where a tile puts this thread (scheduler.cuh's decode).
struct TilePlace {
  Tile tile;
  int q0, warp_row0, blocks;
  i64 bh, bhk;  // (batch, query head), (batch, kv head)
};

template <typename G>
SAGE_DEVICE TilePlace place_tile(const TileScheduler<G> &tiles, const ConsumerArgs &a, const FastDivisor &by_group,
                                 int index, int wg, int warp) {
  const Tile tile = tiles(index);
  const int q0 = tile.qblock * G::CTA_Q;
  return TilePlace{tile, q0, q0 + SM90_WG_ROWS * wg + 16 * warp,
                   visible_key_blocks(q0, G::CTA_Q, a.n_q, a.n_kv, a.flags & SM90_CAUSAL, a.shift, G::BLOCK_KEYS),
                   (i64)tile.batch * tiles.heads + tile.head, (i64)tile.batch * a.heads_kv + by_group.div(tile.head)};
}

// This thread's k scale of the first k group of its (batch, kv head): per_thread, lane % 4's group.
SAGE_DEVICE const float *thread_k_scales(const ConsumerArgs &a, i64 bhk, int lane) {
  return a.k_scale + bhk * a.k_groups + (a.flags & SM90_PER_THREAD ? lane % 4 : 0);
}

// Waits for the next Q slot and decodes its tile; starts the loads of the tile's q and first k scale.
template <typename Smem>
SAGE_DEVICE TakenTile take_tile(Smem &smem, RingPosition<SM90_Q_SLOTS> &q_at,
                                const TileScheduler<typename Smem::Geometry> &tiles, const ConsumerArgs &a,
                                const FastDivisor &by_group, int wg, int warp, int lane) {
  smem.q_slots.consumer_wait(q_at);
  const int slot = q_at.stage;
  q_at.advance();
  TakenTile t{__shfl_sync(0xffffffffu, lane == 0 ? atomicAdd(&smem.q_tile[slot], 0) : 0, 0), 0, 0.0f, 0.0f};
  if (tiles.valid(t.index)) {
    const TilePlace at = place_tile(tiles, a, by_group, t.index, wg, warp);
    t.blocks = at.blocks;
    if (t.blocks > 0) {
      const bool per_thread = a.flags & SM90_PER_THREAD;
      const int q_group = min(per_thread ? (at.warp_row0 / 16) * 8 + lane / 4 : at.warp_row0 / 16, a.q_groups - 1);
      t.q_scale = a.q_scale[at.bh * a.q_groups + q_group];
      t.k_scale0 = *thread_k_scales(a, at.bhk, lane);
    }
  }
  return t;
}

// S = Q . K^T over the block's S_REGS * 2 keys.
template <int D, int S_REGS>
SAGE_DEVICE void issue_scores(i32 (&s)[S_REGS], u64 q_desc, const u8 *k_tile) {
  const u64 desc_k = wgmma_desc_k_major<D>(k_tile);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < D / 32; ++kk) {
    const u64 k_step = wgmma_desc_advance(desc_k, 32 * kk);
    const u64 q_step = wgmma_desc_advance(q_desc, 32 * kk);
    if (kk == 0) wgmma_qk_step<S_REGS, false>(s, q_step, k_step);
    else wgmma_qk_step<S_REGS, true>(s, q_step, k_step);
  }
  wgmma_commit();
}

// Stage 4-5 of block j on its completed scores: the softmax step, P as A fragments.
template <int D, int STAGES, typename Smem, int S_REGS>
SAGE_DEVICE void block_softmax(const BlockContext<D, STAGES, Smem> &c, int j, float k_mult, const i32 (&s)[S_REGS],
                               float (&m)[2], float (&l)[2], float (&alpha)[2], u32 (&p)[S_REGS / 16][4]) {
  const float mult = c.q_mult * k_mult;
  const BlockMask mask{j * 2 * S_REGS, c.warp_row0, c.lane, c.n_kv, c.shift, c.causal};
  if (j >= c.full_blocks) {
    sm90_online_softmax<true>(s, mask, mult, m, l, alpha, p);
  } else {
    sm90_online_softmax<false>(s, mask, mult, m, l, alpha, p);
  }
}

// inner = P . V (PV_STEPS k32 steps, a fresh accumulator: the block's inner level). V^T's
// rows are the block's 32 * PV_STEPS keys (64 or 128 bytes, the swizzle of that width).
template <int D, int PV_STEPS>
SAGE_DEVICE void issue_pv(float (&inner)[D / 2], const u32 (&p)[PV_STEPS][4], const u8 *v_tile) {
  const u64 desc_v = wgmma_desc_k_major<32 * PV_STEPS>(v_tile);
  wgmma_fence();
#pragma unroll
  for (int k = 0; k < PV_STEPS; ++k) {
    if (k == 0) wgmma_pv_step<D, false>(inner, p[k], desc_v);
    else wgmma_pv_step<D, true>(inner, p[k], wgmma_desc_advance(desc_v, 32 * k));
  }
  wgmma_commit();
}

// O = O * alpha + inner: the outer fp32 level of the two-level accumulation, for the channels of
// part PART of PARTS (sm90_pv_parts): O's registers [PART * N, PART * N + N) with N = D / 2 / PARTS
// hold channels [PART * D / PARTS, ...), in the same fragment order as the part's accumulator.
template <int D, int PARTS = 1, int PART = 0>
SAGE_DEVICE void fold_block(float (&o)[D / 2], const float (&alpha)[2], const float (&inner)[D / 2 / PARTS]) {
  constexpr int N = D / 2 / PARTS;
#pragma unroll
  for (int i = 0; i < N; ++i) o[PART * N + i] = fmaf(o[PART * N + i], alpha[(i / 2) % 2], inner[i]);
}

// One S buffer (the default): block j's completed scores are in `s`; after the softmax,
// P.V of block j and Q.K^T of block j+1 go to the tensor cores back to back, and the other
// consumer warpgroup's softmax runs meanwhile. A block step is two halves, so that the
// tile's last batch (another Q operand, or no Q.K^T) is a copy of the short second half
// outside the loop rather than a branch inside it: the loop body stays the size it was
// (a larger one runs slower). The trace stamps cost nothing
// unless SM90_TRACE is set.

// Block j's first half: the softmax, P as A fragments; returns the block's ring stage.
template <int D, int STAGES, typename Smem, int S_REGS>
SAGE_DEVICE int block_step_softmax(BlockContext<D, STAGES, Smem> &c, int j, const i32 (&s)[S_REGS], float (&m)[2],
                                   float (&l)[2], float (&alpha)[2], u32 (&p)[S_REGS / 16][4]) {
  c.trace.stamp(j, TRACE_START);
  const float k_mult = c.take_k_scale(j);
  const int stage = c.ring.stage;
  c.ring.advance();
  block_softmax(c, j, k_mult, s, m, l, alpha, p);
  c.trace.stamp(j, TRACE_SOFTMAX_DONE);
  return stage;
}

// The start and the end of a block's wgmma batch, whatever its inner level. Start: the next ring stage is full
// (when there is a next block) and it is this warpgroup's turn. End: the last wait, the turn handed on, the
// registers the batch wrote pinned, the block's stage released, then the last fold (`fold`).
template <int D, int STAGES, typename Smem>
SAGE_DEVICE void start_batch(BlockContext<D, STAGES, Smem> &c, int j, bool has_next) {
  if (has_next) c.smem.ring.consumer_wait(c.ring);
  c.turns.wait_turn();
  c.trace.stamp(j, TRACE_TURN);
}
template <int D, int STAGES, typename Smem, typename Inner, int S_REGS, typename Fold>
SAGE_DEVICE void finish_batch(BlockContext<D, STAGES, Smem> &c, int j, int stage, Inner &inner, i32 (&s)[S_REGS],
                              Fold fold) {
  c.trace.stamp(j, TRACE_ISSUED);
  wgmma_wait<0>();
  c.trace.stamp(j, TRACE_COMPLETE);
  c.turns.pass_turn();
  wgmma_pin(inner);
  wgmma_pin(s);
  warp_release(&c.smem.ring.empty[stage]);
  fold();
  c.trace.stamp(j, TRACE_FOLDED);
}

// block_step_batch with the fp32+fp16 inner level (fp16_inner.cuh): the block's 64-key partials (two for a
// 128-key block, each in its own f16 registers) and the next block's Q.K^T go to the tensor cores back to back; after
// the wait the partials join O in key order. The partials take the registers of the fp32 inner level.
template <int D, int STAGES, typename Smem, int S_REGS>
SAGE_DEVICE void block_step_batch_f16(BlockContext<D, STAGES, Smem> &c, int j, int stage, const float (&alpha)[2],
                                      const u32 (&p)[S_REGS / 16][4], i32 (&s)[S_REGS], float (&o)[D / 2],
                                      bool has_next, u64 q_desc) {
  constexpr int PV_STEPS = S_REGS / 16;
  constexpr int STEPS = PV_STEPS < SM90_F16_PARTIAL_STEPS ? PV_STEPS : SM90_F16_PARTIAL_STEPS;
  constexpr int PARTIALS = PV_STEPS / STEPS;
  static_assert(PARTIALS * STEPS == PV_STEPS && PARTIALS <= 2, "a block is one or two 64-key partials");
  u32 partial[PARTIALS][D / 4];
  start_batch(c, j, has_next);
  const u8 *v_tile = c.smem.v[stage];
  issue_pv_f16<D, PV_STEPS, 0, STEPS>(partial[0], p, v_tile);
  if constexpr (PARTIALS == 2) issue_pv_f16<D, PV_STEPS, STEPS, STEPS>(partial[1], p, v_tile);
  if (has_next) issue_scores<D>(s, q_desc, c.smem.k[c.ring.stage]);
  finish_batch(c, j, stage, partial[0], s, [&] {
    join_partial<D, true>(o, alpha, partial[0]);
    if constexpr (PARTIALS == 2) {
      wgmma_pin(partial[1]);
      join_partial<D, false>(o, alpha, partial[1]);
    }
  });
}

// Block j's second half: the wgmma batch (P.V of block j; with has_next, Q.K^T of the next
// ring stage with Q operand `q` into `s`), its wait, the stage's release and the fold.
template <int D, int STAGES, typename Smem, int S_REGS>
SAGE_DEVICE void block_step_batch(BlockContext<D, STAGES, Smem> &c, int j, int stage, const float (&alpha)[2],
                                  const u32 (&p)[S_REGS / 16][4], i32 (&s)[S_REGS], float (&o)[D / 2], bool has_next,
                                  u64 q_desc) {
  constexpr int PARTS = sm90_pv_parts<typename Smem::Geometry, D>();
  if constexpr (SM90_PV_F16 && PARTS == 1) {
    block_step_batch_f16(c, j, stage, alpha, p, s, o, has_next, q_desc);
    return;
  }
  float inner[D / 2 / PARTS];
  start_batch(c, j, has_next);
  if (SM90_ABLATE_PV) {
#pragma unroll
    for (int i = 0; i < D / 2 / PARTS; ++i) inner[i] = 0.0f;
  } else {
    issue_pv<D / PARTS>(inner, p, c.smem.v[stage]);
  }
  if (has_next && !SM90_ABLATE_QK) issue_scores<D>(s, q_desc, c.smem.k[c.ring.stage]);
  if constexpr (PARTS == 2) {  // the first half completes (before the scores), folds, frees inner
    if (has_next && !SM90_ABLATE_QK) wgmma_wait<1>();
    else wgmma_wait<0>();
    wgmma_pin(inner);
    fold_block<D, 2, 0>(o, alpha, inner);
    if (!SM90_ABLATE_PV) issue_pv<D / 2>(inner, p, c.smem.v[stage] + D / 2 * Smem::Geometry::BLOCK_KEYS);
  }
  finish_batch(c, j, stage, inner, s, [&] { fold_block<D, PARTS, PARTS - 1>(o, alpha, inner); });
}

// Every block of a tile.
template <int D, int STAGES, typename Smem, int S_REGS>
SAGE_DEVICE void consume_blocks_serial(BlockContext<D, STAGES, Smem> &c, i32 (&s)[S_REGS], float (&o)[D / 2],
                                       float (&m)[2], float (&l)[2]) {
  for (int j = 0;; ++j) {
    float alpha[2];
    u32 p[S_REGS / 16][4];
    const int stage = block_step_softmax(c, j, s, m, l, alpha, p);
    if (j + 1 == c.blocks) {
      block_step_batch(c, j, stage, alpha, p, s, o, false, c.q_desc);
      return;
    }
    block_step_batch(c, j, stage, alpha, p, s, o, true, c.q_desc);
  }
}

// A tile's blocks for a warpgroup with no query row in range: each block's stage is waited for and
// released, and its turn taken and passed, so the producer and the other consumers see what they
// would see from a computing warpgroup. A stage is released only once it is full: a release ahead of
// the fill would count toward the stage's previous use.
template <int D, int STAGES, typename Smem>
SAGE_DEVICE void pass_blocks(Smem &smem, RingPosition<STAGES> &ring, const PingPong<Smem::Geometry::CONSUMERS> &turns,
                             int blocks) {
  for (int j = 0; j < blocks; ++j) {
    smem.ring.consumer_wait(ring);
    turns.wait_turn();
    turns.pass_turn();
    warp_release(&smem.ring.empty[ring.stage]);
    ring.advance();
  }
}

// CAUSAL_ONLY (the instance serves causal calls alone): a warpgroup computes only the key blocks its own
// 64 rows see and passes the tile's later ones.
template <int D, int STAGES, bool CAUSAL_ONLY, typename Smem>
SAGE_DEVICE void consume(Smem &smem, const TileScheduler<typename Smem::Geometry> &tiles, const ConsumerArgs &a) {
  using G = typename Smem::Geometry;
  const int wg = warpgroup_index() - 1;  // 0 .. G::CONSUMERS - 1
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  const bool causal = a.flags & SM90_CAUSAL;
  const FastDivisor group_here(TileScheduler<G>::SHARED_DIVISORS ? 1 : tiles.heads / a.heads_kv);
  const FastDivisor &by_group = TileScheduler<G>::SHARED_DIVISORS ? tiles.by().group : group_here;
  RingPosition<STAGES> ring;
  RingPosition<SM90_Q_SLOTS> q_at;
  const PingPong<G::CONSUMERS> turns(wg);
  turns.start(wg);
  u64 *const trace_warp = wg < 2 ? trace_rows(a.trace, 4 * wg + warp) : nullptr;  // the buffer holds two warpgroups
  const TileTracer tile_trace = tile_tracer(trace_warp);
  // The producer hands over each tile (its index, its Q and channel scales) through the Q slots in turn.
  const auto take = [&](int walked) {
    tile_trace.stamp(walked, TILE_WAIT);
    const TakenTile taken = take_tile(smem, q_at, tiles, a, by_group, wg, warp, lane);
    tile_trace.stamp(walked, TILE_TAKEN);
    return taken;
  };
  TakenTile next = take(0);
  for (int walked = 0; tiles.valid(next.index); ++walked) {
    const TakenTile cur = next;
    const int slot = walked % SM90_Q_SLOTS;  // the slots go round in order
    const TilePlace at = place_tile(tiles, a, by_group, cur.index, wg, warp);
    u64 *const q_empty = &smem.q_slots.empty[slot];
    float o[D / 2], m[2], l[2];
#pragma unroll
    for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
#pragma unroll
    for (int h = 0; h < 2; ++h) { m[h] = SAGE_ROW_MAX_INIT; l[h] = 0.0f; }

    const bool idle = at.q0 + SM90_WG_ROWS * wg >= a.n_q;
    const int own_blocks = CAUSAL_ONLY ? visible_key_blocks(at.q0 + SM90_WG_ROWS * wg, SM90_WG_ROWS, a.n_q, a.n_kv,
                                                            true, a.shift, G::BLOCK_KEYS)
                                       : cur.blocks;
    if (cur.blocks > 0 && (idle || own_blocks == 0)) {
      pass_blocks<D>(smem, ring, turns, cur.blocks);
    } else if (cur.blocks > 0) {
      const u8 *q_tile = smem.q[slot] + SM90_WG_ROWS * wg * D;
      BlockContext<D, STAGES, Smem> c{smem, ring, turns, wgmma_desc_k_major<D>(q_tile), {},
                                      thread_k_scales(a, at.bhk, lane), a.flags & SM90_PER_THREAD ? 4 : 1,
                                      cur.q_scale * a.sm_scale_log2e, cur.k_scale0, own_blocks,
                                      unmasked_key_blocks(G::BLOCK_KEYS, a.n_kv, causal, at.warp_row0, a.shift),
                                      at.warp_row0, lane, a.n_kv, a.shift, causal,
                                      Tracer{walked == 0 ? trace_warp : nullptr}};
      i32 sa[G::S_REGS];
      smem.ring.consumer_wait(ring);
      issue_scores<D>(sa, c.q_desc, smem.k[ring.stage]);
      wgmma_wait<0>();
      wgmma_pin(sa);
      tile_trace.stamp(walked, TILE_FIRST_SCORES);
      consume_blocks_serial(c, sa, o, m, l);
      if (CAUSAL_ONLY && own_blocks < cur.blocks) pass_blocks<D>(smem, ring, turns, cur.blocks - own_blocks);
      tile_trace.stamp(walked, TILE_BLOCKS_DONE);
    }
    next = take(walked + 1);  // another slot: its latencies go under the epilogue
    sm90_store_output<D>(o, m, l, smem.v_scale[slot],
                         a.out + at.tile.batch * a.o_sb + at.tile.head * a.o_sh, a.o_sn,
                         a.lse != nullptr ? a.lse + at.bh * a.n_q : nullptr, at.warp_row0 + lane / 4, a.n_q, lane,
                         a.flags & SM90_OUT_BF16, causal, a.shift, smem.o_stage[4 * wg + warp]);
    warp_release(q_empty);  // its Q and channel scales are read
    tile_trace.stamp(walked, TILE_STORED);
  }
}
