// The role-split geometry of the sm_90a attention kernel (Sm90Geometry<4, 128>, geometry.cuh;
// EXPERIMENT_LOG seq 65 proposed it): the consumers of mainloop.cuh split in two roles.
//
//   softmax warpgroups (1, 2)  own Q.K^T, S, the softmax and the row state of 64 query rows each;
//                              per block they write P (e4m3, in the P.V wgmma's A layout) and, per
//                              thread, alpha, m and l into a message slot of shared memory
//   P.V warpgroups (3, 4)      own O of the same 64 rows: P.V with P from shared memory in two
//                              64-channel passes (the inner level, 32 registers), the fold, the
//                              epilogue
//
// so the softmax's chain per block is its softmax and the next block's Q.K^T, not P.V and the fold.
// Pair k is softmax warpgroup k and P.V warpgroup k; they talk through SM90_PAIR_SLOTS message
// slots (full: the 4 softmax warps arrive, their threads each after fence.proxy.async so the P.V
// wgmma read what they wrote; empty: the 4 P.V warps arrive once P.V has read the slot). A message says which tile and
// block it carries; a tile with no key blocks sends one with blocks = 0 (its rows are written as
// the contract's blind rows), and SM90_NO_TILE ends the P.V warpgroup's walk.
// Thread t of a P.V warpgroup holds the same rows of O as thread t of its softmax warpgroup holds
// of S (the m64 accumulator layout, wgmma.cuh), so alpha, m and l pass thread to thread.
// The K/V ring: a stage is free once all 16 consumer warps have arrived (the softmax warps after
// Q.K^T, the P.V warps after P.V); the Q slot once the 8 softmax warps have.
#pragma once
#include "mainloop.cuh"

// 1: post the message before issuing the next block's Q.K^T (the proxy fence then has no wgmma in
// flight to wait behind); 0: issue first, so Q.K^T runs while P goes out (experiment).
#ifndef SM90_SPLIT_POST_FIRST
#define SM90_SPLIT_POST_FIRST 0
#endif
// 1: the two softmax warpgroups take turns over their softmax phase (pingpong.cuh), so each runs
// with the exp2 unit to itself (experiment).
#ifndef SM90_SPLIT_TURNS
#define SM90_SPLIT_TURNS 0
#endif
#define SM90_PAIR_SLOTS 2  // message slots per pair: block j+1's P is written while P.V reads block j's

// One message: P (64 rows x KEYS e4m3, K-major with the 128-byte swizzle: the P.V wgmma's A
// operand) and, per thread of the warpgroup, alpha[2], m[2], l[2] of its two rows after the block.
template <int KEYS>
struct alignas(1024) PairMessage {
  u8 p[SM90_WG_ROWS * KEYS];
  float stats[128][8];
};

template <int KEYS>
struct RoleChannels {
  PairMessage<KEYS> message[2][SM90_PAIR_SLOTS];
  RingBarriers<SM90_PAIR_SLOTS> slots[2];
  int header[2][SM90_PAIR_SLOTS][4];  // tile, block, blocks (written by thread 0, atomically)
};

static_assert(sizeof(RoleChannels<128>) == 50176, "sagelib/cuda/ops_sm90.py SPLIT_CHANNEL_BYTES mirrors this size");

// Byte offset of row r, byte column c (a multiple of 4) in a K-major tile of 128-byte rows with the
// 128-byte swizzle (16-byte chunks XORed with the row within its 8-row atom).
SAGE_DEVICE int sw128_offset(int row, int col) { return row * 128 + (((col / 16) ^ (row % 8)) * 16) + col % 16; }

// Writes this thread's P fragments (p[k][q]: k32 step k, A word q; wgmma_a8_row / wgmma_a8_col)
// into the message's P tile.
template <int KEYS>
SAGE_DEVICE void store_p(u8 *tile, const u32 (&p)[KEYS / 32][4], int thread) {
  static_assert(KEYS == 128, "P rows of 128 bytes (the 128-byte swizzle)");
#pragma unroll
  for (int k = 0; k < KEYS / 32; ++k)
#pragma unroll
    for (int q = 0; q < 4; ++q)
      *reinterpret_cast<u32 *>(tile + sw128_offset(wgmma_a8_row(thread, q), 32 * k + wgmma_a8_col(thread, q))) = p[k][q];
}

// O[64 x 64] (+)= P[64 x 32] . V[32 x 64]  with P from shared memory (both operands K-major).
template <bool ACCUMULATE>
SAGE_DEVICE void wgmma_m64n64k32_f32_e4m3_e4m3_ss(float (&o)[32], u64 desc_p, u64 desc_vt) {
  SAGE_WGMMA(ACCUMULATE, "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 ",
             SAGE_ACC32_OPERANDS ", %32, %33, keep, 1, 1;", 34, SAGE_IO32, o, SAGE_INOUT_F32, SAGE_OUT_F32,
             "l"(desc_p), "l"(desc_vt));
}

// inner = P . V for the 64 channels of V^T rows [64 * part, 64 * part + 64): KEYS / 32 k32 steps.
template <int KEYS>
SAGE_DEVICE void issue_pv_from_smem(float (&inner)[32], const u8 *p_tile, const u8 *v_rows) {
  const u64 desc_p = wgmma_desc_k_major<128>(p_tile), desc_v = wgmma_desc_k_major<KEYS>(v_rows);
  wgmma_fence();
#pragma unroll
  for (int k = 0; k < KEYS / 32; ++k) {
    if (k == 0) wgmma_m64n64k32_f32_e4m3_e4m3_ss<false>(inner, desc_p, desc_v);
    else wgmma_m64n64k32_f32_e4m3_e4m3_ss<true>(inner, wgmma_desc_advance(desc_p, 32 * k),
                                                wgmma_desc_advance(desc_v, 32 * k));
  }
  wgmma_commit();
}

// Reads a header word written by another warpgroup (one lane, atomically, then broadcast: the
// slot's mbarrier orders it; the atomics keep racecheck, which does not model that, quiet).
SAGE_DEVICE int read_shared_word(int *word, int lane) {
  return __shfl_sync(0xffffffffu, lane == 0 ? atomicAdd(word, 0) : 0, 0);
}

// Completes the message in slot `at` (the caller waited for the slot and wrote P, if any): this
// thread's alpha, m and l, the header, then every thread's arrival on the slot's `full` barrier,
// after fence.proxy.async, because the P.V wgmma read P through the async proxy.
template <int KEYS>
SAGE_DEVICE void post_message(RoleChannels<KEYS> &ch, int pair, RingPosition<SM90_PAIR_SLOTS> &at, int t, int tile,
                              int j, int blocks, const float (&alpha)[2], const float (&m)[2], const float (&l)[2]) {
  float *stats = ch.message[pair][at.stage].stats[t];
  stats[0] = alpha[0], stats[1] = alpha[1], stats[2] = m[0], stats[3] = m[1], stats[4] = l[0], stats[5] = l[1];
  if (t == 0) {
    int *header = ch.header[pair][at.stage];
    atomicExch(&header[0], tile), atomicExch(&header[1], j), atomicExch(&header[2], blocks);
  }
  fence_proxy_async();
  warp_release(&ch.slots[pair].full[at.stage]);  // __syncwarp orders the lanes' writes before lane 0's arrive
  at.advance();
}

// Softmax warpgroup `pair`: tiles from the Q slots as mainloop.cuh's consumers take them; per block the
// softmax, then the next block's Q.K^T, then the message.
template <int D, int STAGES, typename Smem>
SAGE_DEVICE void softmax_role(Smem &smem, RoleChannels<Smem::Geometry::BLOCK_KEYS> &ch,
                              const TileScheduler<typename Smem::Geometry> &tiles, const ConsumerArgs &a, int pair) {
  using G = typename Smem::Geometry;
  constexpr int KEYS = G::BLOCK_KEYS, S_REGS = G::S_REGS;
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  const bool causal = a.flags & SM90_CAUSAL, per_thread = a.flags & SM90_PER_THREAD;
  const int group = tiles.heads / a.heads_kv;
  RingPosition<STAGES> ring;
  RingPosition<SM90_Q_SLOTS> q_at;
  RingPosition<SM90_PAIR_SLOTS> out_at;
  const PingPong<2> turns(pair);  // SM90_SPLIT_TURNS: the two softmax warpgroups' softmaxes alternate
  if (SM90_SPLIT_TURNS) turns.start(pair);
  bool first_tile = true;
  for (;;) {
    smem.q_slots.consumer_wait(q_at);
    const int slot = q_at.stage;
    q_at.advance();
    u64 *q_empty = &smem.q_slots.empty[slot];
    const int ti = read_shared_word(&smem.q_tile[slot], lane);
    float m[2] = {SAGE_MASK_SCORE, SAGE_MASK_SCORE}, l[2] = {0.0f, 0.0f}, alpha[2] = {0.0f, 0.0f};
    if (!tiles.valid(ti)) {
      ch.slots[pair].producer_wait(out_at);
      post_message(ch, pair, out_at, t, SM90_NO_TILE, 0, 0, alpha, m, l);
      return;
    }
    const Tile tile = tiles(ti);
    const int q0 = tile.qblock * G::CTA_Q, hk = tile.head / group;
    const int warp_row0 = q0 + SM90_WG_ROWS * pair + 16 * warp;
    const int blocks = visible_key_blocks(q0, G::CTA_Q, a.n_q, a.n_kv, causal, a.shift, KEYS);
    const i64 bh = (i64)tile.batch * tiles.heads + tile.head, bhk = (i64)tile.batch * a.heads_kv + hk;
    if (blocks == 0) {
      warp_release(q_empty);
      ch.slots[pair].producer_wait(out_at);
      post_message(ch, pair, out_at, t, ti, 0, 0, alpha, m, l);
      continue;
    }
    const int q_group = min(per_thread ? (warp_row0 / 16) * 8 + lane / 4 : warp_row0 / 16, a.q_groups - 1);
    const u64 q_desc = wgmma_desc_k_major<D>(smem.q[slot] + SM90_WG_ROWS * pair * D);
    const float *k_scale = a.k_scale + bhk * a.k_groups + (per_thread ? lane % 4 : 0);
    const int k_stride = per_thread ? 4 : 1;
    const float q_mult = a.q_scale[bh * a.q_groups + q_group] * a.sm_scale_log2e;
    const int full_blocks = unmasked_key_blocks(KEYS, a.n_kv, causal, warp_row0, a.shift);
    const QOperand<D> q{q_desc, {}};
    const Tracer trace{SM90_TRACE && a.trace != nullptr && blockIdx.x == 0 && pair == 0 && first_tile
                           ? a.trace + warp * SM90_TRACE_BLOCKS * SM90_TRACE_POINTS : nullptr};
    first_tile = false;
    i32 s[S_REGS];
    smem.ring.consumer_wait(ring);
    issue_scores<D>(s, q, smem.k[ring.stage]);
    float k_ahead = k_scale[0];  // block j's k scale, loaded one block ahead (its latency off the chain)
    wgmma_wait<0>();
    wgmma_pin(s);
    for (int j = 0; j < blocks; ++j) {
      trace.stamp(j, TRACE_START);
      const float k_mult = k_ahead;
      k_ahead = k_scale[k_stride * (min(j + 1, blocks - 1) / (SM90_K_GROUP_KEYS / KEYS))];
      warp_release(&smem.ring.empty[ring.stage]);  // this warpgroup's Q.K^T of block j has read K
      ring.advance();
      const BlockMask mask{j * KEYS, warp_row0, lane, a.n_kv, a.shift, causal};
      u32 p[S_REGS / 16][4];
      if (SM90_SPLIT_TURNS) turns.wait_turn();
      if (j >= full_blocks) sm90_online_softmax<true>(s, mask, q_mult * k_mult, m, l, alpha, p);
      else sm90_online_softmax<false>(s, mask, q_mult * k_mult, m, l, alpha, p);
      if (SM90_SPLIT_TURNS) turns.pass_turn();
      trace.stamp(j, TRACE_SOFTMAX_DONE);
      const bool has_next = j + 1 < blocks;
      if (has_next && !SM90_SPLIT_POST_FIRST) {  // S is consumed: its registers take the next block's scores
        smem.ring.consumer_wait(ring);
        issue_scores<D>(s, q, smem.k[ring.stage]);
      }
      trace.stamp(j, TRACE_TURN);
      ch.slots[pair].producer_wait(out_at);
      trace.stamp(j, TRACE_ISSUED);
      store_p<KEYS>(ch.message[pair][out_at.stage].p, p, t);
      post_message(ch, pair, out_at, t, ti, j, blocks, alpha, m, l);
      if (has_next && SM90_SPLIT_POST_FIRST) {
        smem.ring.consumer_wait(ring);
        issue_scores<D>(s, q, smem.k[ring.stage]);
      }
      trace.stamp(j, TRACE_COMPLETE);
      wgmma_wait<0>();  // unconditional: a wait on a divergent path serialises every wgmma (ptxas C7518)
      wgmma_pin(s);
      trace.stamp(j, TRACE_FOLDED);
    }
    warp_release(q_empty);  // every Q.K^T of this tile has completed
  }
}

// P.V warpgroup `pair`: the messages of its softmax warpgroup in order; O per tile; the epilogue.
template <int D, int STAGES, typename Smem>
SAGE_DEVICE void pv_role(Smem &smem, RoleChannels<Smem::Geometry::BLOCK_KEYS> &ch,
                         const TileScheduler<typename Smem::Geometry> &tiles, const ConsumerArgs &a, int pair) {
  using G = typename Smem::Geometry;
  constexpr int KEYS = G::BLOCK_KEYS;
  static_assert(D == 128, "the role split is built for head_dim 128");
  const int t = threadIdx.x % 128, warp = t / 32, lane = t % 32;
  const bool causal = a.flags & SM90_CAUSAL;
  const int group = tiles.heads / a.heads_kv;
  RingPosition<STAGES> ring;
  RingPosition<SM90_PAIR_SLOTS> in_at;
  float o[D / 2];
  int traced_tile = -1;  // SM90_TRACE builds: CTA 0's first tile, P.V warpgroup 0 (trace rows 4-7)
  for (;;) {
    ch.slots[pair].consumer_wait(in_at);
    int *header = ch.header[pair][in_at.stage];
    const int ti = read_shared_word(&header[0], lane);
    if (!tiles.valid(ti)) return;
    const int j = read_shared_word(&header[1], lane), blocks = read_shared_word(&header[2], lane);
    const float *stats = ch.message[pair][in_at.stage].stats[t];
    const float alpha[2] = {stats[0], stats[1]}, m[2] = {stats[2], stats[3]}, l[2] = {stats[4], stats[5]};
    if (j == 0) {
#pragma unroll
      for (int i = 0; i < D / 2; ++i) o[i] = 0.0f;
    }
    if (traced_tile < 0) traced_tile = ti;
    const Tracer trace{SM90_TRACE && a.trace != nullptr && blockIdx.x == 0 && pair == 0 && ti == traced_tile
                           ? a.trace + (4 + warp) * SM90_TRACE_BLOCKS * SM90_TRACE_POINTS : nullptr};
    trace.stamp(j, TRACE_START);
    if (blocks > 0) {
      smem.ring.consumer_wait(ring);
      trace.stamp(j, TRACE_SOFTMAX_DONE);
      const u8 *p_tile = ch.message[pair][in_at.stage].p, *v_tile = smem.v[ring.stage];
      float inner[32];
      issue_pv_from_smem<KEYS>(inner, p_tile, v_tile);
      wgmma_wait<0>();
      wgmma_pin(inner);
      trace.stamp(j, TRACE_TURN);
      fold_block<D, 2, 0>(o, alpha, inner);
      issue_pv_from_smem<KEYS>(inner, p_tile, v_tile + D / 2 * KEYS);
      trace.stamp(j, TRACE_ISSUED);
      wgmma_wait<0>();
      wgmma_pin(inner);
      trace.stamp(j, TRACE_COMPLETE);
      warp_release(&smem.ring.empty[ring.stage]);
      ring.advance();
      fold_block<D, 2, 1>(o, alpha, inner);
    }
    warp_release(&ch.slots[pair].empty[in_at.stage]);
    trace.stamp(j, TRACE_FOLDED);
    in_at.advance();
    if (j + 1 >= blocks) {  // the tile's last message (or its only one, blocks = 0): O is final
      const Tile tile = tiles(ti);
      const int q0 = tile.qblock * G::CTA_Q, hk = tile.head / group;
      const int row0 = q0 + SM90_WG_ROWS * pair + 16 * warp + lane / 4;
      const i64 bh = (i64)tile.batch * tiles.heads + tile.head, bhk = (i64)tile.batch * a.heads_kv + hk;
      sm90_store_output<D>(o, m, l, a.v_scale + bhk * D, a.out + tile.batch * a.o_sb + tile.head * a.o_sh, a.o_sn,
                           a.lse != nullptr ? a.lse + bh * a.n_q : nullptr, row0, a.n_q, lane,
                           a.flags & SM90_OUT_BF16, causal, a.shift);
    }
  }
}
