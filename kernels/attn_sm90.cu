// attn_sm90.cu: the Hopper (sm_90a) 8-bit attention kernel, SageAttention2's numerics
// in the contract's sm90 preset, built as a warp-specialised persistent kernel.
//
// Contract stages 3-7: INT8 Q.K^T by wgmma (exact int32), per_thread or per_warp q/k
// scales (16-row q tiles, 128-key k blocks), base-2 online softmax with the fp8 offset,
// e4m3 P.V by wgmma with P from registers, two-level accumulation (fp32 inner per
// 128-key block, then fp32), the epilogue. Inputs come from quant_qk.cu / quant_kv.cu
// (sm90 geometry; V^T zero-padded to 128 keys and permuted in 16s like the sm89 preset,
// which lets P feed the P.V wgmma without shuffles: attn_sm90/softmax.cuh).
//
// Who owns what:
//   warpgroup 0   producer: one thread, TMA copies of Q (per tile) and of K / V^T into a
//                 STAGES-deep ring on mbarriers (attn_sm90/producer.cuh); gives its
//                 registers to the consumers (setmaxnreg)
//   warpgroups 1..CONSUMERS  consumers: 64 query rows each; S, P, O, the row state in
//                 registers (attn_sm90/mainloop.cuh, softmax.cuh, epilogue.cuh), taking
//                 turns on the tensor cores (attn_sm90/pingpong.cuh)
//   the grid      persistent, one CTA per SM, tiles taken from a global counter
//                 (attn_sm90/scheduler.cuh), handed to the consumers with their Q and V
//                 channel scales; a consumer takes its next tile before its epilogue
// Geometries (attn_sm90/geometry.cuh): the sm90 preset's 128-key step with two consumers at
// head_dim 128 and three at head_dim 64; three consumers stepping 64 keys (the preset with
// cta_k = 64).
// Barriers: the ring's `full` (producer: expect_tx + TMA bytes) and `empty` (one arrive per
// consumer warp) per stage; the same pair per Q slot (its Q, V channel scales and tile index);
// named barriers 1..CONSUMERS for the tensor-core turns (pingpong.cuh).
// Shared memory: SM90_Q_SLOTS x Q (CTA_Q x D: the next tile's Q loads while this tile
// runs), STAGES x (K BLOCK_KEYS x D + V^T D x BLOCK_KEYS), 1024-byte
// aligned, K-major with the hardware swizzle of the row width (128 B rows: 128 B, 64 B: 64 B);
// then SM90_Q_SLOTS x D fp32 V channel scales, a 16-row output staging tile per consumer warp,
// the barriers and the slots' tile indices.
#include "attn_sm90/mainloop.cuh"
#include "attn_sm90/producer.cuh"
#include "hopper/warpgroup_regs.cuh"

template <int D, int STAGES, typename G>
struct Sm90Smem {
  using Geometry = G;
  u8 q[SM90_Q_SLOTS][G::CTA_Q * D];
  u8 k[STAGES][G::BLOCK_KEYS * D];
  u8 v[STAGES][D * G::BLOCK_KEYS];
  float v_scale[SM90_Q_SLOTS][D];  // each Q slot's tile's V channel scales (its epilogue's), copied with its Q
  u8 o_stage[G::CONSUMER_WARPS][SM90_STAGE_BYTES(D)];  // each consumer warp's output rows on their way out
  RingBarriers<STAGES> ring;
  RingBarriers<SM90_Q_SLOTS> q_slots;
  int q_tile[SM90_Q_SLOTS];  // the tile whose Q each slot holds (scheduler.cuh), written by the producer
  TileDivisors divisors;    // the tile decode's, in the geometries that keep them here (scheduler.cuh)
};

// Dynamic shared memory is requested with this much slack, so the tiles can start on
// a 1024-byte boundary (the swizzle atoms are counted from there).
#define SM90_SMEM_ALIGN 1024

// CAUSAL_ONLY: an instance for causal calls alone (the host launches it only with the causal flag), where a
// warpgroup computes just the key blocks its own rows see (mainloop.cuh consume); false serves every call.
template <int D, int STAGES, int CONSUMERS, int BLOCK_KEYS, bool CAUSAL_ONLY = false>
__global__ void __launch_bounds__(Sm90Geometry<CONSUMERS, BLOCK_KEYS>::THREADS, 1) attn_sm90_kernel(
    const __grid_constant__ TensorMap q_map, const __grid_constant__ TensorMap k_map,
    const __grid_constant__ TensorMap v_map, const float *__restrict__ q_scale, const float *__restrict__ k_scale,
    const float *__restrict__ v_scale, u16 *__restrict__ out, i64 o_sb, i64 o_sh, i64 o_sn, float *__restrict__ lse,
    int n_q, int n_kv, int heads_q, int heads_kv, int batch, int q_groups, int k_groups, int flags, int causal_shift,
    float sm_scale_log2e, int *tile_counter, u64 *trace) {
  using G = Sm90Geometry<CONSUMERS, BLOCK_KEYS>;
  static_assert(D == 64 || D == 128, "head_dim 64 or 128");
  static_assert(D == 64 || CONSUMERS == 2 || BLOCK_KEYS == 64, "three consumers with 128-key steps: head_dim 64 only");
  extern __shared__ u8 smem_raw[];
  const u32 pad = (SM90_SMEM_ALIGN - smem_address(smem_raw) % SM90_SMEM_ALIGN) % SM90_SMEM_ALIGN;
  Sm90Smem<D, STAGES, G> &smem = *reinterpret_cast<Sm90Smem<D, STAGES, G> *>(smem_raw + pad);
  const bool causal = flags & SM90_CAUSAL;
  if (threadIdx.x == 0) {
    smem.ring.init(G::CONSUMER_WARPS);
    smem.q_slots.init(G::CONSUMER_WARPS);
    if constexpr (TileScheduler<G>::SHARED_DIVISORS)
      smem.divisors = TileScheduler<G>(n_q, n_kv, D, heads_q, heads_kv, batch, causal, smem.divisors).compute_divisors();
    mbarrier_init_fence();
  }
  __syncthreads();
  const TileScheduler<G> tiles(n_q, n_kv, D, heads_q, heads_kv, batch, causal, smem.divisors);
  if (warpgroup_index() == 0) {
    warpgroup_regs_release<SM90_PRODUCER_REGS>();
    if (threadIdx.x == 0)
      produce<D, STAGES>(AttnMaps{&q_map, &k_map, &v_map}, v_scale, smem, tiles, tile_counter, heads_kv, n_q, n_kv,
                         causal, causal_shift, trace);
    return;
  }
  warpgroup_regs_claim<G::CONSUMER_REGS>();
  consume<D, STAGES, CAUSAL_ONLY>(smem, tiles,
                     ConsumerArgs{q_scale, k_scale, v_scale, out, o_sb, o_sh, o_sn, lse, n_q, n_kv, heads_kv, q_groups,
                                  k_groups, flags, causal_shift, sm_scale_log2e, trace});
}
