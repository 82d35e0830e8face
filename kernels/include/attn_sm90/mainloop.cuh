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
// Default schedule (serial + ping-pong, both head dims): after block j's softmax the
// warpgroup waits for its turn, issues P.V of block j and Q.K^T of block j+1 back to back,
// waits for both, hands the turn to the next consumer warpgroup (whose softmax ran
// meanwhile), releases the stage and folds. The alternatives below stay buildable for
// experiments; notes/kernels.md has what each measured.
#pragma once
#include "../hopper/pipeline.cuh"
#include "../hopper/warpgroup_regs.cuh"
#include "../hopper/wgmma.cuh"
#include "epilogue.cuh"
#include "pingpong.cuh"
#include "scheduler.cuh"
#include "softmax.cuh"
#include "trace.cuh"

#define SM90_CAUSAL 1
#define SM90_PER_THREAD 2
#define SM90_OUT_BF16 4
// Schedules. A second S buffer fits in the consumers' registers at head_dim 64 only
// (ownership.fit), but measured slower there than the serial schedule with ping-pong
// (scripts/sweep_sm90.py on the H200: 489.6 against 498.6 TOPS kernel-only at N 16384),
// so both head dims run serial + ping-pong by default. The alternatives stay buildable:
// -DSM90_D64_OVERLAP=1, -DSM90_SERIAL_PINGPONG=0, -DSM90_PASS_AFTER_WAIT=0,
// -DSM90_Q_IN_REGISTERS=1. Deferring P.V past the next softmax (Q.K^T of block j+1 issued
// first and waited for alone, FlashAttention-3's in-warpgroup overlap with one S buffer)
// measured slower at every shape and was removed (EXPERIMENT_LOG seq 26; tree b6c6e62).
// Folding block j into O inside block j+1's softmax (between its max and exp passes) measured
// slower at D128 and equal at D64, and was removed (seq 27; tree 3316a63).
// Quantizing Q in the consumers at each tile start (the entry fusion, 16-bit Q through a staging
// tile) gave the same bits and 0.99-1.01x end to end, and was removed (seq 51; tree cdb850d).
// Streaming block j+1's Q.K^T into block j's softmax (n64 or n32 pieces issued into the score
// registers the exp pass has consumed) cost the softmax ~250-300 cycles per piece and measured
// 0.80-0.93x, and was removed (seq 56; tree 4762e59). Issuing the batch's Q.K^T before its P.V
// shortened the fold by what it added to the wait (0.99-1.00x) and was removed (seq 62; tree cb64006).
// Splitting the consumers into softmax and P.V warpgroups (P handed over through shared memory,
// Sm90Geometry<4, 128>) gave the same bits at 0.61-0.75x and was removed (seq 66; tree 3d28825).
// Issuing the next tile's first Q.K^T in the tile's last wgmma batch kept the next tile's state
// live through every block and measured 0.86-0.96x; it was not committed (seq 70). Issuing it after the
// tile's blocks, before the tile's stores, gave the same bits at 0.97-1.02x (D128 non-causal gained up to
// 2%, causal and D64 lost: seq 154; tree 041f9cb has SM90_DEFER_EPILOGUE) and was removed.
#ifndef SM90_D64_OVERLAP
#define SM90_D64_OVERLAP 0
#endif
#ifndef SM90_SERIAL_PINGPONG
#define SM90_SERIAL_PINGPONG 1
#endif
// The turn passes once this warpgroup's batch has completed (not merely been issued): the
// tensor cores may interleave two queued batches, which would keep both warpgroups in
// step (softmax together, wgmma together) instead of alternating.
#ifndef SM90_PASS_AFTER_WAIT
#define SM90_PASS_AFTER_WAIT 1
#endif
// What the turn covers: the softmax (the exp2 unit is what the two warpgroups would
// otherwise share: their wgmma then alternate by themselves), or the wgmma batch.
#ifndef SM90_TURN_IS_SOFTMAX
#define SM90_TURN_IS_SOFTMAX 0
#endif
#ifndef SM90_Q_IN_REGISTERS
#define SM90_Q_IN_REGISTERS 0
#endif
#define SM90_OVERLAP_QK(D) ((D) == 64 && SM90_D64_OVERLAP)
#define SM90_PINGPONG(D) (!SM90_OVERLAP_QK(D) && SM90_SERIAL_PINGPONG)
// The tile change (EXPERIMENT_LOG seq 68): a consumer decodes its tiles with multiplicative
// division, and with a second Q slot it takes the next tile (the slot wait, the decode, the
// loads of its q and first k scale) before the current tile's epilogue, whose stores then
// cover those latencies. SM90_VSCALE_SMEM=1 has the producer copy each tile's V channel scales
// into its Q slot (the slot is then released after the epilogue instead of after the last
// Q.K^T); 0 reads them from global memory in the epilogue (geometry.cuh).
#define SM90_TAKE_EARLY (SM90_Q_SLOTS > 1)
// A consumer warpgroup whose 64 rows all lie at or past N_q (in a head's last tile when N_q is not a
// multiple of the tile's rows) computes nothing with SM90_PASS_IDLE=1 (the default): it takes each
// block's stage and turn only to hand them on (pass_blocks); its epilogue stores no row. 0: it computes
// rows it never stores. Kernel only, same bits (EXPERIMENT_LOG seq 152): D64 (192-row tiles) N16384
// 1.016x, causal 1.031x, B8 N4096 1.023x, B32 N1024 1.058x, B16 N1000 1.050x; D128 N1088 1.010x,
// N4099 1.015x; shapes whose N_q is a multiple of the tile unchanged. Skipping the idle epilogue as well
// measured the same and cost the D128 comparison geometry 56 bytes of spills.
// In a causal tile of 192 rows on 128-key blocks (head_dim 64) the tile's block count follows its last row,
// so the first warpgroups compute a last block whose scores they all mask. Passing those blocks the same way
// gave causal D64 1.00-1.08x, but the code it adds cost non-causal D64 N16384 0.985x (seq 156; tree 1410d0c
// has SM90_PASS_MASKED), so it lives in an instance of its own, built for causal calls (CAUSAL_ONLY). Against the
// general instance, same bits (seq 159): causal D64 N16384 1.008x, B8 N4096 1.035x, B32 N1024 1.097x, B16 N1000
// 1.093x, Nq1024 Nkv4096 1.021x.
#ifndef SM90_PASS_IDLE
#define SM90_PASS_IDLE 1
#endif

struct ConsumerArgs {
  const float *q_scale, *k_scale, *v_scale;
  u16 *out;
  i64 o_sb, o_sh, o_sn;
  float *lse;
  int n_q, n_kv, heads_kv, q_groups, k_groups, flags, shift;
  float sm_scale_log2e;
  u64 *trace;  // SM90_TRACE builds: the phase timestamps (trace.cuh); else unused
};

// This warpgroup's 64 query rows as the A operand of Q.K^T: a descriptor of the tile in
// shared memory, or (SM90_Q_IN_REGISTERS) its A fragments loaded once per tile, which
// spares the tensor cores re-reading Q from shared memory every block.
template <int D>
struct QOperand {
  u64 desc;
  u32 frag[SM90_Q_IN_REGISTERS ? D / 32 : 1][4];

  // Loads the fragments from the TMA tile (rows of D bytes, the hardware swizzle of D).
  SAGE_DEVICE void load(const u8 *tile, int thread) {
    if (!SM90_Q_IN_REGISTERS) return;
#pragma unroll
    for (int kk = 0; kk < D / 32; ++kk)
#pragma unroll
      for (int w = 0; w < 4; ++w) {
        const int row = wgmma_a8_row(thread, w), col = 32 * kk + wgmma_a8_col(thread, w);
        const int chunk = (col / 16) ^ (D == 128 ? row % 8 : (row / 2) % 4);
        frag[SM90_Q_IN_REGISTERS ? kk : 0][w] = *reinterpret_cast<const u32 *>(tile + row * D + 16 * chunk + col % 16);
      }
  }
};

// Everything one block step needs besides the S buffers.
template <int D, int STAGES, typename Smem>
struct BlockContext {
  using G = typename Smem::Geometry;
  Smem &smem;
  RingPosition<STAGES> &ring;  // position of the block being computed
  const PingPong<G::CONSUMERS> &turns;
  QOperand<D> q;
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
SAGE_DEVICE void issue_scores(i32 (&s)[S_REGS], const QOperand<D> &q, const u8 *k_tile) {
  const u64 desc_k = wgmma_desc_k_major<D>(k_tile);
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < D / 32; ++kk) {
    const u64 k_step = wgmma_desc_advance(desc_k, 32 * kk);
    if constexpr (SM90_Q_IN_REGISTERS) {
      static_assert(S_REGS == 64, "SM90_Q_IN_REGISTERS: built for 128-key blocks only");
      const u32 (&q_step)[4] = q.frag[SM90_Q_IN_REGISTERS ? kk : 0];
      if (kk == 0) wgmma_m64n128k32_s32_s8_s8_rs<false>(s, q_step, k_step);
      else wgmma_m64n128k32_s32_s8_s8_rs<true>(s, q_step, k_step);
    } else {
      const u64 q_step = wgmma_desc_advance(q.desc, 32 * kk);
      if (kk == 0) wgmma_qk_step<S_REGS, false>(s, q_step, k_step);
      else wgmma_qk_step<S_REGS, true>(s, q_step, k_step);
    }
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
    sm90_online_softmax<true, sm90_cvt_fold(D)>(s, mask, mult, m, l, alpha, p);
  } else {
    sm90_online_softmax<false, sm90_cvt_fold(D)>(s, mask, mult, m, l, alpha, p);
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

// Two S buffers (-DSM90_D64_OVERLAP=1, head_dim 64 only: at 128 they do not fit): block j's
// scores are in `cur`; block j+1's are issued into `next` before this block's softmax, so
// the tensor cores work while the same warpgroup's exp2 does.
template <int D, int STAGES, typename Smem, int S_REGS>
SAGE_DEVICE void consume_block_overlapped(BlockContext<D, STAGES, Smem> &c, int j, i32 (&cur)[S_REGS],
                                          i32 (&next)[S_REGS], float (&o)[D / 2], float (&m)[2], float (&l)[2]) {
  const float k_mult = c.take_k_scale(j);
  const int stage = c.ring.stage;
  const bool has_next = j + 1 < c.blocks;
  c.ring.advance();
  if (has_next) {
    c.smem.ring.consumer_wait(c.ring);
    issue_scores<D>(next, c.q, c.smem.k[c.ring.stage]);
    wgmma_wait<1>();
  } else {
    wgmma_wait<0>();
  }
  wgmma_pin(cur);
  float alpha[2];
  u32 p[S_REGS / 16][4];
  block_softmax(c, j, k_mult, cur, m, l, alpha, p);
  float inner[D / 2];
  issue_pv<D>(inner, p, c.smem.v[stage]);
  wgmma_wait<0>();
  wgmma_pin(inner);
  warp_release(&c.smem.ring.empty[stage]);
  fold_block<D>(o, alpha, inner);
}

// One S buffer (the default): block j's completed scores are in `s`; after the softmax,
// P.V of block j and Q.K^T of block j+1 go to the tensor cores back to back, and the other
// consumer warpgroup's softmax runs meanwhile. A block step is two halves, so that the
// tile's last batch (another Q operand, or no Q.K^T) is a copy of the short second half
// outside the loop rather than a branch inside it: the loop body stays the size it was
// (a larger one measured 0.86-0.94x everywhere, log seq 70). The trace stamps cost nothing
// unless SM90_TRACE is set.

// Block j's first half: the softmax, P as A fragments; returns the block's ring stage.
template <int D, int STAGES, typename Smem, int S_REGS>
SAGE_DEVICE int block_step_softmax(BlockContext<D, STAGES, Smem> &c, int j, const i32 (&s)[S_REGS], float (&m)[2],
                                   float (&l)[2], float (&alpha)[2], u32 (&p)[S_REGS / 16][4]) {
  c.trace.stamp(j, TRACE_START);
  const float k_mult = c.take_k_scale(j);
  const int stage = c.ring.stage;
  c.ring.advance();
  if (SM90_PINGPONG(D) && SM90_TURN_IS_SOFTMAX) c.turns.wait_turn();
  block_softmax(c, j, k_mult, s, m, l, alpha, p);
  if (SM90_PINGPONG(D) && SM90_TURN_IS_SOFTMAX) c.turns.pass_turn();
  c.trace.stamp(j, TRACE_SOFTMAX_DONE);
  return stage;
}

// Block j's second half: the wgmma batch (P.V of block j; with has_next, Q.K^T of the next
// ring stage with Q operand `q` into `s`), its wait, the stage's release and the fold.
template <int D, int STAGES, typename Smem, int S_REGS>
SAGE_DEVICE void block_step_batch(BlockContext<D, STAGES, Smem> &c, int j, int stage, const float (&alpha)[2],
                                  const u32 (&p)[S_REGS / 16][4], i32 (&s)[S_REGS], float (&o)[D / 2], bool has_next,
                                  const QOperand<D> &q) {
  constexpr int PARTS = sm90_pv_parts<typename Smem::Geometry, D>();
  float inner[D / 2 / PARTS];
  if (has_next) c.smem.ring.consumer_wait(c.ring);
  if (SM90_PINGPONG(D) && !SM90_TURN_IS_SOFTMAX) c.turns.wait_turn();
  c.trace.stamp(j, TRACE_TURN);
  if (SM90_ABLATE_PV) {
#pragma unroll
    for (int i = 0; i < D / 2 / PARTS; ++i) inner[i] = 0.0f;
  } else {
    issue_pv<D / PARTS>(inner, p, c.smem.v[stage]);
  }
  if (has_next && !SM90_ABLATE_QK) issue_scores<D>(s, q, c.smem.k[c.ring.stage]);
  if constexpr (PARTS == 2) {  // the first half completes (before the scores), folds, frees inner
    if (has_next && !SM90_ABLATE_QK) wgmma_wait<1>();
    else wgmma_wait<0>();
    wgmma_pin(inner);
    fold_block<D, 2, 0>(o, alpha, inner);
    if (!SM90_ABLATE_PV) issue_pv<D / 2>(inner, p, c.smem.v[stage] + D / 2 * Smem::Geometry::BLOCK_KEYS);
  }
  c.trace.stamp(j, TRACE_ISSUED);
  if (SM90_PINGPONG(D) && !SM90_TURN_IS_SOFTMAX && !SM90_PASS_AFTER_WAIT) c.turns.pass_turn();
  wgmma_wait<0>();
  c.trace.stamp(j, TRACE_COMPLETE);
  if (SM90_PINGPONG(D) && !SM90_TURN_IS_SOFTMAX && SM90_PASS_AFTER_WAIT) c.turns.pass_turn();
  wgmma_pin(inner);
  wgmma_pin(s);
  warp_release(&c.smem.ring.empty[stage]);
  fold_block<D, PARTS, PARTS - 1>(o, alpha, inner);
  c.trace.stamp(j, TRACE_FOLDED);
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
      block_step_batch(c, j, stage, alpha, p, s, o, false, c.q);
      return;
    }
    block_step_batch(c, j, stage, alpha, p, s, o, true, c.q);
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
    if (SM90_PINGPONG(D)) {
      turns.wait_turn();
      turns.pass_turn();
    }
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
  if (SM90_PINGPONG(D)) turns.start(wg);
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
    for (int h = 0; h < 2; ++h) { m[h] = SAGE_MASK_SCORE; l[h] = 0.0f; }

    const bool idle = SM90_PASS_IDLE && at.q0 + SM90_WG_ROWS * wg >= a.n_q;
    const int own_blocks = CAUSAL_ONLY ? visible_key_blocks(at.q0 + SM90_WG_ROWS * wg, SM90_WG_ROWS, a.n_q, a.n_kv,
                                                            true, a.shift, G::BLOCK_KEYS)
                                       : cur.blocks;
    if (cur.blocks > 0 && (idle || own_blocks == 0)) {
      pass_blocks<D>(smem, ring, turns, cur.blocks);
    } else if (cur.blocks > 0) {
      const u8 *q_tile = smem.q[slot] + SM90_WG_ROWS * wg * D;
      BlockContext<D, STAGES, Smem> c{smem, ring, turns, QOperand<D>{wgmma_desc_k_major<D>(q_tile), {}},
                                      thread_k_scales(a, at.bhk, lane), a.flags & SM90_PER_THREAD ? 4 : 1,
                                      cur.q_scale * a.sm_scale_log2e, cur.k_scale0, own_blocks,
                                      unmasked_key_blocks(G::BLOCK_KEYS, a.n_kv, causal, at.warp_row0, a.shift),
                                      at.warp_row0, lane, a.n_kv, a.shift, causal,
                                      Tracer{walked == 0 ? trace_warp : nullptr}};
      c.q.load(q_tile, t);
      i32 sa[G::S_REGS];
      smem.ring.consumer_wait(ring);
      issue_scores<D>(sa, c.q, smem.k[ring.stage]);
      if constexpr (SM90_OVERLAP_QK(D)) {
        i32 sb[G::S_REGS];
        for (int j = 0; j < own_blocks; j += 2) {
          consume_block_overlapped(c, j, sa, sb, o, m, l);
          if (j + 1 < own_blocks) consume_block_overlapped(c, j + 1, sb, sa, o, m, l);
        }
      } else {
        wgmma_wait<0>();
        wgmma_pin(sa);
        tile_trace.stamp(walked, TILE_FIRST_SCORES);
        consume_blocks_serial(c, sa, o, m, l);
      }
      if (CAUSAL_ONLY && own_blocks < cur.blocks) pass_blocks<D>(smem, ring, turns, cur.blocks - own_blocks);
      tile_trace.stamp(walked, TILE_BLOCKS_DONE);
    }
    if (!SM90_VSCALE_SMEM) warp_release(q_empty);  // every Q.K^T of this tile has completed
    if (SM90_TAKE_EARLY) next = take(walked + 1);  // another slot: its latencies go under the epilogue
    sm90_store_output<D>(o, m, l, SM90_VSCALE_SMEM ? smem.v_scale[slot] : a.v_scale + at.bhk * D,
                         a.out + at.tile.batch * a.o_sb + at.tile.head * a.o_sh, a.o_sn,
                         a.lse != nullptr ? a.lse + at.bh * a.n_q : nullptr, at.warp_row0 + lane / 4, a.n_q, lane,
                         a.flags & SM90_OUT_BF16, causal, a.shift, smem.o_stage[4 * wg + warp]);
    if (SM90_VSCALE_SMEM) warp_release(q_empty);  // its Q and channel scales are read
    tile_trace.stamp(walked, TILE_STORED);
    if (!SM90_TAKE_EARLY) next = take(walked + 1);
  }
}
