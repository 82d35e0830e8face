// The producer warp of the sm_90a attention kernel: one elected thread issues every
// TMA copy; the other 127 threads of warpgroup 0 only give their registers away.
//
// Per tile: its G::CTA_Q query rows and its D V channel scales once (into a Q slot, released
// by the consumers after their epilogue), then for each visible key block one ring stage holding the
// block's G::BLOCK_KEYS keys of K (keys x D, K-major) and V^T (D x keys), announced to the
// stage's `full` barrier as one transaction count. Rows past N arrive as zeros and
// still count in the box's bytes, so the count is the full box every time.
// GQA: the K/V maps are indexed with the query head's kv head.
// Ownership: the producer thread owns the tile walk (scheduler.cuh), the ring's `full` barriers
// (expect_tx + TMA completion) and the Q slots' `full` barriers; it waits on the consumers'
// `empty` arrivals (one per consumer warp) before reusing a stage or a slot.
#pragma once
#include "../hopper/pipeline.cuh"
#include "../hopper/tma.cuh"
#include "ablation.cuh"
#include "scheduler.cuh"
#include "trace.cuh"

struct AttnMaps {
  const TensorMap *q;  // int8 [B * H_q, N_q, D], box CTA_Q x D
  const TensorMap *k;  // int8 [B, H_kv, N_kv, D], box BLOCK_KEYS x D
  const TensorMap *v;  // e4m3 [B, H_kv, D, N_pad] (V^T, keys permuted in 16s), box D x BLOCK_KEYS
};

// The tile index goes through shared memory as an atomic store, read back as an atomic by
// one lane per consumer warp (mainloop.cuh): the Q slot's mbarriers order the two (arrive
// releases, the wait acquires), and compute-sanitizer's racecheck, which does not model
// mbarrier ordering for plain shared-memory accesses, then has nothing to report.
template <typename Smem>
SAGE_DEVICE void hand_over_tile(Smem &smem, int slot, int tile) {
  atomicExch(&smem.q_tile[slot], tile);
}

// Every tile goes through a Q slot (the slots in turn), its index in smem.q_tile: with its V
// channel scales (the epilogue's) and its Q when it has key blocks (blind rows: the consumers
// write zeros), and SM90_NO_TILE after the last one, which ends the consumers' walk. With two
// slots the next tile's Q, and then its first K/V stages, load while the consumers finish this tile.
template <int D, int STAGES, typename Smem>
SAGE_DEVICE void produce(const AttnMaps &maps, const float *__restrict__ v_scale, Smem &smem,
                         const TileScheduler<typename Smem::Geometry> &tiles, int *tile_counter, int heads_kv, int n_q,
                         int n_kv, bool causal, int shift, u64 *trace) {
  using G = typename Smem::Geometry;
  tma_prefetch_descriptor(maps.q);
  tma_prefetch_descriptor(maps.k);
  tma_prefetch_descriptor(maps.v);
  RingPosition<STAGES> ring;
  RingPosition<SM90_Q_SLOTS> q_at;
  int kv_loads_left = STAGES;  // SM90_ABLATE_KV_LOADS: the ring's first fill only
  const TileTracer tile_trace = tile_tracer(trace_rows(trace, SM90_TRACE_PRODUCER));
  for (int t = tiles.first(), walked = 0;; q_at.advance(), ++walked) {
    smem.q_slots.producer_wait(q_at);  // the consumers are done with this slot's last tile
    tile_trace.stamp(walked, PRODUCER_SLOT_FREE);
    const int slot = q_at.stage;
    u64 *q_full = &smem.q_slots.full[slot];
    if (!tiles.valid(t)) {
      hand_over_tile(smem, slot, SM90_NO_TILE);
      mbarrier_arrive(q_full);
      return;
    }
    const int next = tiles.take_next(tile_counter);  // in flight while this tile loads
    const Tile tile = tiles(t);
    const int q0 = tile.qblock * G::CTA_Q;
    const int blocks = visible_key_blocks(q0, G::CTA_Q, n_q, n_kv, causal, shift, G::BLOCK_KEYS);
    const int hk = tiles.kv_head(tile.head);
    hand_over_tile(smem, slot, t);
    const u32 scale_bytes = sizeof(smem.v_scale[0]);
    mbarrier_arrive_expect_tx(q_full, scale_bytes + (blocks > 0 ? sizeof(smem.q[0]) : 0));
    bulk_load(smem.v_scale[slot], v_scale + ((i64)tile.batch * heads_kv + hk) * D, scale_bytes, q_full);
    if (blocks > 0) tma_load_3d(smem.q[slot], maps.q, q_full, 0, q0, tile.batch * tiles.heads + tile.head);
    tile_trace.stamp(walked, PRODUCER_Q_ISSUED);
    for (int j = 0; j < blocks; ++j) {
      smem.ring.producer_wait(ring);
      if (SM90_ABLATE_KV_LOADS && kv_loads_left == 0) {
        mbarrier_arrive(&smem.ring.full[ring.stage]);
        ring.advance();
        continue;
      }
      kv_loads_left -= SM90_ABLATE_KV_LOADS;
      mbarrier_arrive_expect_tx(&smem.ring.full[ring.stage], sizeof(smem.k[0]) + sizeof(smem.v[0]));
      tma_load_4d(smem.k[ring.stage], maps.k, &smem.ring.full[ring.stage], 0, j * G::BLOCK_KEYS, hk, tile.batch);
      tma_load_4d(smem.v[ring.stage], maps.v, &smem.ring.full[ring.stage], j * G::BLOCK_KEYS, 0, hk, tile.batch);
      ring.advance();
      if (j == 0) tile_trace.stamp(walked, PRODUCER_FIRST_KV);
    }
    tile_trace.stamp(walked, PRODUCER_LAST_KV);
    t = next;
  }
}
