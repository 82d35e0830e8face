// Geometry of the sm_90a attention kernel: how many consumer warpgroups a CTA has and
// how many keys one step of the online softmax (one K/V ring stage) covers.
//
// A CTA is one producer warpgroup (one thread issues the TMA copies) and CONSUMERS
// consumer warpgroups of 64 query rows each, so a tile is 64 * CONSUMERS query rows.
// setmaxnreg moves registers from the producer (24 per thread) to the consumers, within
// the CTA's launch pool: __launch_bounds__(THREADS, 1) lets ptxas give each thread 65,536 /
// THREADS registers in multiples of 8, and a kernel with setmaxnreg takes them all, so 384
// threads get 168 x 384 = 64,512 and 512 threads 128 x 512 = 65,536. A setmaxnreg.inc beyond
// what the pool holds never returns (a producer of 32 with two consumers of 240 hangs the GPU),
// so CONSUMER_REGS is counted from the pool:
//   Sm90Geometry<2, 128>  the contract's sm90 preset (128-key steps) at head_dim 128: 128 x 24 + 2 x 128 x 240 = 64,512
//   Sm90Geometry<3, 64>   the three-consumer rotation of notebook 01 (the sm90 preset with
//                         cta_k = 64): 128 x 24 + 3 x 128 x 160 = 64,512. Per thread at head_dim
//                         64: S 32 + inner 32 + O 32 + P 8 registers; at 128, with P.V in two
//                         halves (sm90_pv_parts): S 32 + inner 32 + O 64 + P 8.
//   Sm90Geometry<3, 128>  the sm90 preset at head_dim 64 (only there: at 128 it would need 222 registers):
//                         S 64 + inner 32 + O 32 + P 16 of 160; three softmax warps per scheduler
//                         (faster than two consumers at head_dim 64).
#pragma once

#define SM90_WG_ROWS 64  // query rows per consumer warpgroup
// Q tiles in shared memory: the next tile's loads while this one runs. Each Q slot also holds its
// tile's V channel scales for the epilogue (mainloop.cuh, producer.cuh).
#define SM90_Q_SLOTS 2
#define SM90_PRODUCER_REGS 24
#define SM90_SM_REGS 65536     // the register file setmaxnreg shares out
#define SM90_K_GROUP_KEYS 128  // keys per k-scale group: the sm90 preset's blkk, whatever the step

template <int CONSUMERS_, int BLOCK_KEYS_>
struct Sm90Geometry {
  static_assert((CONSUMERS_ == 2 && BLOCK_KEYS_ == 128) || CONSUMERS_ == 3,
                "built geometries: 2 consumers x 128-key steps, 3 consumers x 64- or 128-key steps");
  static constexpr int CONSUMERS = CONSUMERS_;
  static constexpr int BLOCK_KEYS = BLOCK_KEYS_;            // keys per ring stage = the traversal block (cta_k)
  static constexpr int THREADS = 128 * (CONSUMERS + 1);
  static constexpr int CTA_Q = SM90_WG_ROWS * CONSUMERS;    // query rows per tile
  static constexpr int CONSUMER_WARPS = 4 * CONSUMERS;      // arrivals that release a stage or the Q slot
  static constexpr int LAUNCH_POOL = SM90_SM_REGS / THREADS / 8 * 8 * THREADS;  // registers the launch gives the CTA
  // what the producer leaves, shared by the consumers in setmaxnreg's multiples of 8: 240 or 160
  static constexpr int CONSUMER_REGS = (LAUNCH_POOL - 128 * SM90_PRODUCER_REGS) / (128 * CONSUMERS) / 8 * 8;
  static constexpr int S_REGS = BLOCK_KEYS / 2;             // the 64 x BLOCK_KEYS int32 scores over a warpgroup
  static constexpr int PV_STEPS = BLOCK_KEYS / 32;          // k32 steps of P.V per block (4 A words each)
};

using Sm90Preset = Sm90Geometry<2, 128>;

// P.V over the head dim in this many parts, one after the other, so the block's inner accumulator
// (fp32, D / 2 / parts registers per thread) fits the consumer's registers: three consumers at
// head_dim 128 take P.V in two n64 halves (O 64 + inner 32 + S 32 + P 8 registers).
template <typename G, int D>
__host__ __device__ constexpr int sm90_pv_parts() {
  return G::CONSUMERS == 3 && D == 128 ? 2 : 1;
}
