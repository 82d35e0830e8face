// attn_mma.cu: the portable 8-bit attention kernel (mma.sync), SageAttention2's numerics.
//
// Contract stages: 3 (INT8 Q.K^T, exact int32, log2-domain scores with per-lane
// q/k scales, causal masking top-left or bottom-right, ragged tails masked),
// 4 (base-2 online softmax, fp32 state, fp8 offset 8.807, row sum before fp8
// rounding), 5 for P (e4m3 RNE satfinite), 6 (two-level P.V accumulation:
// fp32+fp32 or fp32+fp16 inner level per CTA_K block), 7 (epilogue.cuh).
// Inputs come from quant_qk.cu / quant_kv.cu with the contract's `sm89` preset:
// Q groups per WARPQ = 32 rows, K groups per BLKK = WARPK = 64 keys, V e4m3
// [B, H_kv, D, N_pad] permuted in 16s.
// Geometry: 4 warps, CTA_Q = 128 query rows (32 per warp: two m16 tiles), CTA_K = 64
// keys per step; Q held in registers; K and V tiles double-buffered in shared
// memory by cp.async (zero-filled past N), XOR-swizzled 16-byte chunks read with
// ldmatrix. GQA through the kv-head index; HND / NHD through strides.
// Targets: sm_89, sm_90, sm_120a, sm_121a (mma.sync m16n8k32 s8 and e4m3). sm_90 has no
// e4m3 mma.sync: there P.V is f16 m16n8k16 on operands widened in the source
// (pv_block_widened: ptxas' own widening of each e4m3 mma.sync is slower). sm_120a / sm_121a
// run the D = 128 key loop register-lean (lean_key_loop).
// Ownership: warp w owns query rows 32w..32w+31 of the CTA: their Q fragments, scores, online-softmax
// state (m, l per row, reduced over the 4 lanes of a quad) and O accumulators stay in its registers.
// Shared memory holds the Q tile (read once into registers) and the two K and two V stages, filled by
// every thread's cp.async. Sync: after the prologue's copies (Q, then K/V block 0), cp_async_wait<1> +
// __syncthreads make the Q tile visible before it is read into registers; at the top of each key block
// cp_async_wait<0> + __syncthreads make block blk visible to all warps and free block blk-1's stage for
// the next block's copies. Nothing else crosses warps.
// Grid: (ceil(N_q / 128), H_q, B); block 128; dynamic shared memory AttnSmem<D>::TOTAL.
#include "common.cuh"
#include "convert.cuh"
#include "cp_async.cuh"
#include "epilogue.cuh"
#include "online_softmax.cuh"
#include "params.cuh"
#include "ptx_mma.cuh"
#include "swizzle.cuh"

#define ATTN_THREADS 128
#define CTA_Q 128
#define WARP_Q 32
#define CTA_K 64

// sm_120a / sm_121a build the D = 128 instances with the register-lean key loop (lean_key_loop): at the
// 255-register cap, 128 of them O, ptxas (nvcc 13.0) spills a few long-lived values of the default loop
// there and none of the lean one's (`sagelib kernels check` holds that). Both compute the same values
// with the same operations in the same order; only what stays live across the key loop differs.
// -DATTN_LEAN=1 builds the lean loop for sm_89 / sm_90 as well (on sm_90 without the widened P.V): how
// a GPU test holds it to the contract where no sm_120 card is at hand.
#ifndef ATTN_LEAN
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
#define ATTN_LEAN 1
#else
#define ATTN_LEAN 0
#endif
#endif

// sm_90 widens P.V's e4m3 operands to f16 (see the header): every warp widens the V fragments
// it loads (pv_block_widened). Why per warp: widening V once per CTA into a shared f16 tile, and
// 16-row warps, both ran slower on the H200.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 900 && !ATTN_LEAN
#define ATTN_WIDEN_PV 1
#else
#define ATTN_WIDEN_PV 0
#endif

// The lean key loop (ATTN_LEAN, D = 128 only; D = 64 has registers to spare): Q.K^T's k32 steps run as a
// rolled loop, so one step's Q and K fragments are in flight, not all four; the Q fragment addresses
// are formed in each key block (unhoisted) instead of four of them held across the loop; P.V folds
// each m-tile's two n-tiles in turn; and the epilogue reads its block and thread indices afresh
// (fresh_index), so none of them is held across the loop either.
template <int D>
SAGE_DEVICE constexpr bool lean_key_loop() {
  return ATTN_LEAN && D == 128;
}

// x through an opaque register move (a volatile asm stays where it is written): the compiler can
// neither merge it with an earlier copy nor hoist what is computed from it out of the enclosing loop.
SAGE_DEVICE u32 unhoisted(u32 x) {
  u32 y;
  asm volatile("mov.b32 %0, %1;" : "=r"(y) : "r"(x));
  return y;
}

// The block and thread indices read afresh from the special registers, for the lean epilogue: asm
// volatile, so never merged with the prologue's reads.
struct FreshIndex {
  u32 x, y, z, tid;
};
SAGE_DEVICE FreshIndex fresh_index() {
  FreshIndex i;
  asm volatile("mov.u32 %0, %%ctaid.x;" : "=r"(i.x));
  asm volatile("mov.u32 %0, %%ctaid.y;" : "=r"(i.y));
  asm volatile("mov.u32 %0, %%ctaid.z;" : "=r"(i.z));
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(i.tid));
  return i;
}

// The leading key blocks that hide no score from a warp run through a loop of their own, with no
// mask and no branch between Q.K^T, softmax and P.V (attention_step<..., MASKED = false>). On the
// H200 that measured 3% faster for <128, fp32 inner>, 3% for <64, fp32> and 13% for <64, fp16>,
// but 3.5% slower for <128, fp16 inner>, which keeps one loop with the mask chosen per block.
// Measured on sm_90 only, so the other targets keep one loop too.
template <int D, bool PV_F16>
SAGE_DEVICE constexpr bool split_loops() {
  return ATTN_WIDEN_PV && !(D == 128 && PV_F16);
}

// The widened P.V walks the block's k steps outermost, four accumulator chains (two m-tiles x two
// n-tiles) in flight instead of two or three, for <128, fp32+fp32> on sm_90, where it is faster; the
// other instances ran level or slower that way and keep the jp-outer order.
template <int D, bool PV_F16>
SAGE_DEVICE constexpr bool pv_kq_outer() {
  return D == 128 && !PV_F16;
}

// The flag bits: AttnFlags (params.cuh).

// Q tile, then two K stages, then two V stages.
template <int D>
struct AttnSmem {
  static constexpr int Q_BYTES = CTA_Q * D;
  static constexpr int K_BYTES = CTA_K * D;
  static constexpr int V_BYTES = D * CTA_K;
  static constexpr int TOTAL = Q_BYTES + 2 * K_BYTES + 2 * V_BYTES;
};

template <int D>
SAGE_DEVICE void load_kv_block(u32 sk, u32 sv, const i8 *k, i64 k_sn, const u8 *v, int n_pad, int n_kv, int block,
                               int tid) {
  // Thread tid copies chunk tid % KC of rows tid / KC + i * ROWS_PER_PASS. Every
  // pass moves the row by a multiple of 16, which keeps the swizzle pattern, so
  // one lane offset plus a constant addresses every pass.
  constexpr int KC = D / 16;  // 16-byte chunks per K row
  constexpr int K_ROWS_PER_PASS = ATTN_THREADS / KC;
  const int key0 = block * CTA_K;
  const int kr = tid / KC, kc = tid % KC;
  const u32 k_lane = sk + swizzled_offset<D>(kr, kc);
#pragma unroll
  for (int i = 0; i < CTA_K / K_ROWS_PER_PASS; ++i) {
    const int key = key0 + kr + i * K_ROWS_PER_PASS;
    const bool valid = key < n_kv;
    cp_async_16(k_lane + i * K_ROWS_PER_PASS * D, k + (valid ? (i64)key * k_sn : 0) + kc * 16, valid);
  }
  constexpr int V_ROWS_PER_PASS = ATTN_THREADS / 4;  // V^T tile: D rows of 64 bytes
  const int vr = tid / 4, vc = tid % 4;
  const u32 v_lane = sv + swizzled_offset<64>(vr, vc);
  const u8 *v_src = v + (i64)vr * n_pad + key0 + vc * 16;
#pragma unroll
  for (int i = 0; i < D / V_ROWS_PER_PASS; ++i)
    cp_async_16(v_lane + i * V_ROWS_PER_PASS * 64, v_src + (i64)i * V_ROWS_PER_PASS * n_pad, true);
}

// Per-lane ldmatrix offsets. Lane i addresses row 8 * (matrix / 2 or % 2) + i % 8
// of matrix i / 8. Moving by 16 rows keeps the swizzle pattern and moving by two
// chunks flips one slot bit, so (lane offset ^ (kstep << 5)) + 16 * m * ROW_BYTES
// addresses every fragment: no per-fragment swizzle arithmetic (which the
// compiler would otherwise hoist out of the key loop into dozens of registers).
template <int D>
SAGE_DEVICE u32 q_lane_offset(int warp, int lane) {
  const int mi = lane / 8;
  return swizzled_offset<D>(warp * WARP_Q + 8 * (mi % 2) + lane % 8, mi / 2);
}
template <int ROW_BYTES>
SAGE_DEVICE u32 b_lane_offset(int lane) {  // K rows (keys) or V^T rows (channels)
  const int mi = lane / 8;
  return swizzled_offset<ROW_BYTES>(8 * (mi / 2) + lane % 8, mi % 2);
}

// Q fragments of m-tile t, k-step kk, from the shared Q tile.
template <int D>
SAGE_DEVICE void load_q_fragment(u32 (&f)[4], u32 sq, u32 q_lane, int t, int kk) {
  ldmatrix_x4(f, sq + ((q_lane ^ (kk << 5)) + t * 16 * D));
}

// Q stays in registers when it fits beside O (D = 64); at D = 128 the 32 extra
// registers would spill, so each k-step reloads its fragments from shared memory.
template <int D>
struct QFragments {
  static constexpr bool IN_REGISTERS = D <= 64;
  u32 f[IN_REGISTERS ? 2 : 1][IN_REGISTERS ? D / 32 : 1][4];
  SAGE_DEVICE void init(u32 sq, u32 q_lane) {
    if (IN_REGISTERS) {
#pragma unroll
      for (int t = 0; t < 2; ++t)
#pragma unroll
        for (int kk = 0; kk < D / 32; ++kk) load_q_fragment<D>(f[IN_REGISTERS ? t : 0][IN_REGISTERS ? kk : 0], sq, q_lane, t, kk);
    }
  }
};

// S = Q.K^T for the warp's 32 rows and the block's 64 keys, exact in int32.
template <int D, bool ROLLED>
SAGE_DEVICE void qk_block(const QFragments<D> &qfrag, u32 sq, u32 q_lane, u32 sk, u32 k_lane, i32 (&s)[2][8][4]) {
#pragma unroll
  for (int t = 0; t < 2; ++t)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) s[t][j][i] = 0;
#pragma unroll (ROLLED ? 1 : D / 32)
  for (int kk = 0; kk < D / 32; ++kk) {
    u32 qreg[2][4];
#pragma unroll
    for (int t = 0; t < 2; ++t) {
      if (QFragments<D>::IN_REGISTERS) {
#pragma unroll
        for (int i = 0; i < 4; ++i) qreg[t][i] = qfrag.f[QFragments<D>::IN_REGISTERS ? t : 0][QFragments<D>::IN_REGISTERS ? kk : 0][i];
      } else {
        load_q_fragment<D>(qreg[t], sq, q_lane, t, kk);
      }
    }
#pragma unroll
    for (int jp = 0; jp < 4; ++jp) {
      u32 kb[4];
      ldmatrix_x4(kb, sk + ((k_lane ^ (kk << 5)) + jp * 16 * D));
#pragma unroll
      for (int t = 0; t < 2; ++t) {
        mma_s8(s[t][2 * jp], qreg[t], kb[0], kb[1]);
        mma_s8(s[t][2 * jp + 1], qreg[t], kb[2], kb[3]);
      }
    }
  }
}

// V^T's B fragments for 16 channels (rows 16 jp ..) and k32 step ks of the block.
SAGE_DEVICE void load_v_fragment(u32 (&vb)[4], u32 sv, u32 v_lane, int jp, int ks) {
  ldmatrix_x4(vb, sv + ((v_lane ^ (ks << 5)) + jp * 16 * 64));
}
// ... and for both k32 steps.
SAGE_DEVICE void load_v_fragments(u32 (&vb)[2][4], u32 sv, u32 v_lane, int jp) {
#pragma unroll
  for (int ks = 0; ks < 2; ++ks) load_v_fragment(vb[ks], sv, v_lane, jp, ks);
}

// O's 16 x 8 tile = alpha * O + the block's inner product for it: fp32 in `inner`, or with PV_F16
// the fp16 pairs in `inner16` (the two-level scheme's fold).
template <bool PV_F16>
SAGE_DEVICE void fold_inner(float (&o)[4], const float (&alpha)[2], const float (&inner)[4], const u32 (&inner16)[2]) {
  float c[4] = {inner[0], inner[1], inner[2], inner[3]};
  if (PV_F16) {
    half2_bits_to_float2(inner16[0], c[0], c[1]);
    half2_bits_to_float2(inner16[1], c[2], c[3]);
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) o[i] = fmaf(o[i], alpha[i / 2], c[i]);
}

// The P.V of pv_block with the e4m3 operands widened to f16 in the source (ptx_mma.cuh): on sm_90,
// where ptxas would otherwise widen each e4m3 mma.sync itself and add the accumulator in with a
// separate instruction, the block's four k16 steps chain in the tensor core instead. KQ_OUTER walks
// the k steps outermost, so all four accumulator chains of 16 channels are in flight (pv_kq_outer).
template <int D, bool PV_F16, bool KQ_OUTER>
SAGE_DEVICE void pv_block_widened(const u32 (&pw)[2][4][4], u32 sv, u32 v_lane, const float (&alpha)[2][2],
                                  float (&o)[2][D / 8][4]) {
#pragma unroll
  for (int jp = 0; jp < D / 16; ++jp) {
    u32 vb[2][4];
    float c[2][2][4] = {};
    u32 acc[2][2][2] = {};
    auto k32_step = [&](int ks, int nt) {
      u32 vw[2][2];  // [k16 step][register]
      widen_b_e4m3(vb[ks][2 * nt], vb[ks][2 * nt + 1], vw[0], vw[1]);
#pragma unroll
      for (int i = 0; i < 4; ++i) {  // jp-outer: each m-tile's two k16 steps in turn; kq-outer: the m-tiles in turn
        const int t = KQ_OUTER ? i % 2 : i / 2, k = KQ_OUTER ? i / 2 : i % 2;
        if (PV_F16) mma_f16_f16(acc[t][nt], pw[t][2 * ks + k], vw[k]);
        else mma_f16_f32(c[t][nt], pw[t][2 * ks + k], vw[k]);
      }
    };
    auto fold = [&](int nt) {
#pragma unroll
      for (int t = 0; t < 2; ++t) fold_inner<PV_F16>(o[t][2 * jp + nt], alpha[t], c[t][nt], acc[t][nt]);
    };
    if (KQ_OUTER) {
#pragma unroll
      for (int ks = 0; ks < 2; ++ks) {
        load_v_fragment(vb[ks], sv, v_lane, jp, ks);
#pragma unroll
        for (int nt = 0; nt < 2; ++nt) k32_step(ks, nt);
      }
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) fold(nt);
    } else {
      load_v_fragments(vb, sv, v_lane, jp);
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
#pragma unroll
        for (int ks = 0; ks < 2; ++ks) k32_step(ks, nt);
        fold(nt);
      }
    }
  }
}

// O = alpha * O + P.V, with the block's product formed in a fresh inner
// accumulator (fp32 or fp16) over its two k32 steps: the two-level scheme. T_OUTER folds
// each m-tile's two n-tiles in turn (the lean loop), else each n-tile's two m-tiles.
template <int D, bool PV_F16, bool T_OUTER>
SAGE_DEVICE void pv_block(const u32 (&pa)[2][2][4], u32 sv, u32 v_lane, const float (&alpha)[2][2],
                          float (&o)[2][D / 8][4]) {
#pragma unroll
  for (int jp = 0; jp < D / 16; ++jp) {
    u32 vb[2][4];
    load_v_fragments(vb, sv, v_lane, jp);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int t = T_OUTER ? i / 2 : i % 2, nt = T_OUTER ? i % 2 : i / 2;
      float c[4] = {};
      u32 acc[2] = {};
      if (PV_F16) {
        mma_e4m3_f16(acc, pa[t][0], vb[0][2 * nt], vb[0][2 * nt + 1]);
        mma_e4m3_f16(acc, pa[t][1], vb[1][2 * nt], vb[1][2 * nt + 1]);
      } else {
        mma_e4m3_f32(c, pa[t][0], vb[0][2 * nt], vb[0][2 * nt + 1]);
        mma_e4m3_f32(c, pa[t][1], vb[1][2 * nt], vb[1][2 * nt + 1]);
      }
      fold_inner<PV_F16>(o[t][2 * jp + nt], alpha[t], c, acc);
    }
  }
}

// What a warp's key-block steps share: the CTA's shared-memory tiles, the lane offsets into
// them, the K/V source and scales, and the warp's rows.
template <int D>
struct WarpTile {
  u32 sq, sk0, sv0, q_lane, k_lane, v_lane;
  const i8 *k_head;
  i64 k_sn;
  const u8 *v_head;
  const float *ks_head;
  int n_pad, n_kv, n_blocks, q0, tid, lane, causal_shift;
  bool causal, per_thread;
  float q_mult;
  QFragments<D> qfrag;
};

// One key block: wait for its K and V, start the next block's copies, then Q.K^T, the softmax
// step and P.V. The leading blocks that hide no score from this warp take the MASKED = false
// instance, with no mask and no branch between the three stages, so ptxas may overlap them.
template <int D, bool PV_F16, bool MASKED>
SAGE_DEVICE void attention_step(const WarpTile<D> &w, int blk, float (&o)[2][D / 8][4], float (&m)[2][2],
                                float (&l)[2][2]) {
  const int stage = blk & 1;
  cp_async_wait<0>();
  __syncthreads();  // block `blk` visible to all; everyone is done with block blk-1's buffers
  if (blk + 1 < w.n_blocks)
    load_kv_block<D>(w.sk0 + (stage ^ 1) * AttnSmem<D>::K_BYTES, w.sv0 + (stage ^ 1) * AttnSmem<D>::V_BYTES,
                     w.k_head, w.k_sn, w.v_head, w.n_pad, w.n_kv, blk + 1, w.tid);
  cp_async_commit();

  const int key0 = blk * CTA_K, q0 = w.q0, lane = w.lane;
  if (MASKED && w.causal && key0 > q0 + WARP_Q - 1 + w.causal_shift) return;  // every row of this warp is masked
  const float mult = w.q_mult * w.ks_head[w.per_thread ? blk * 4 + lane % 4 : blk];

  i32 s[2][8][4];
  constexpr bool lean = lean_key_loop<D>();
  qk_block<D, lean>(w.qfrag, w.sq, lean ? unhoisted(w.q_lane) : w.q_lane, w.sk0 + stage * AttnSmem<D>::K_BYTES,
                    w.k_lane, s);
  float p[2][8][4], alpha[2][2];
  if (MASKED && !split_loops<D, PV_F16>()) {  // one loop for every block: the mask decided at run time
    if (key0 + CTA_K > w.n_kv || (w.causal && key0 + CTA_K - 1 > q0 + w.causal_shift)) {
      mask_scores(s, key0, q0, lane, w.n_kv, w.causal, w.causal_shift);
      online_softmax_block<true>(s, mult, m, l, alpha, p);
    } else {
      online_softmax_block<false>(s, mult, m, l, alpha, p);
    }
  } else {
    if (MASKED) mask_scores(s, key0, q0, lane, w.n_kv, w.causal, w.causal_shift);
    online_softmax_block<MASKED>(s, mult, m, l, alpha, p);
  }
#if ATTN_WIDEN_PV
  u32 pw[2][4][4];
  pack_p_fragments_f16(p, pw);
  pv_block_widened<D, PV_F16, pv_kq_outer<D, PV_F16>()>(pw, w.sv0 + stage * AttnSmem<D>::V_BYTES, w.v_lane, alpha, o);
#else
  u32 pa[2][2][4];
  pack_p_fragments(p, pa);
  pv_block<D, PV_F16, lean>(pa, w.sv0 + stage * AttnSmem<D>::V_BYTES, w.v_lane, alpha, o);
#endif
}

template <int D, bool PV_F16>
__global__ void __launch_bounds__(ATTN_THREADS, 2) attn_mma_kernel(
    const i8 *__restrict__ q, i64 q_sb, i64 q_sh, i64 q_sn,
    const i8 *__restrict__ k, i64 k_sb, i64 k_sh, i64 k_sn,
    const u8 *__restrict__ v, const float *__restrict__ q_scale, const float *__restrict__ k_scale,
    const float *__restrict__ v_scale, u16 *__restrict__ out, i64 o_sb, i64 o_sh, i64 o_sn,
    float *__restrict__ lse, int n_q, int n_kv, int n_pad, int heads_q, int heads_kv,
    int q_groups, int k_groups, int flags, int causal_shift, float sm_scale_log2e) {
  extern __shared__ __align__(128) u8 smem[];
  const bool causal = flags & ATTN_CAUSAL, per_thread = flags & ATTN_PER_THREAD;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  // Causal blocks at the end of the sequence carry the most work: launch them first.
  const int qblk = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;
  const int h = blockIdx.y, b = blockIdx.z, hk = h / (heads_q / heads_kv);
  const int q0_cta = qblk * CTA_Q, q0 = q0_cta + warp * WARP_Q;

  const i8 *q_head = q + b * q_sb + h * q_sh;
  const i8 *k_head = k + b * k_sb + hk * k_sh;
  const u8 *v_head = v + ((i64)b * heads_kv + hk) * D * n_pad;
  const float *ks_head = k_scale + ((i64)b * heads_kv + hk) * k_groups;

  int n_blocks = (n_kv + CTA_K - 1) / CTA_K;
  if (causal) {
    const int last_visible = min(q0_cta + CTA_Q, n_q) - 1 + causal_shift;
    n_blocks = last_visible < 0 ? 0 : min(n_blocks, last_visible / CTA_K + 1);
  }

  const u32 sq = smem_addr(smem);
  const u32 sk0 = sq + AttnSmem<D>::Q_BYTES;
  const u32 sv0 = sk0 + 2 * AttnSmem<D>::K_BYTES;

  // Prologue: Q tile and the first K/V block in flight together.
  constexpr int QC = D / 16;
#pragma unroll
  for (int i = 0; i < CTA_Q * QC / ATTN_THREADS; ++i) {
    const int idx = i * ATTN_THREADS + tid;
    const int r = idx / QC, c = idx % QC;
    const bool valid = q0_cta + r < n_q;
    cp_async_16(sq + swizzled_offset<D>(r, c), q_head + (valid ? (i64)(q0_cta + r) * q_sn : 0) + c * 16, valid);
  }
  cp_async_commit();
  if (n_blocks > 0) load_kv_block<D>(sk0, sv0, k_head, k_sn, v_head, n_pad, n_kv, 0, tid);
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();

  const u32 q_lane = q_lane_offset<D>(warp, lane), k_lane = b_lane_offset<D>(lane), v_lane = b_lane_offset<64>(lane);
  QFragments<D> qfrag;
  qfrag.init(sq, q_lane);
  const int q_group = per_thread ? (q0 / WARP_Q) * 8 + lane / 4 : q0 / WARP_Q;
  const float q_mult = q_scale[((i64)b * heads_q + h) * q_groups + q_group] * sm_scale_log2e;

  float m[2][2], l[2][2], o[2][D / 8][4];
#pragma unroll
  for (int t = 0; t < 2; ++t) {
#pragma unroll
    for (int half = 0; half < 2; ++half) { m[t][half] = SAGE_ROW_MAX_INIT; l[t][half] = 0.0f; }
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[t][j][i] = 0.0f;
  }

  const WarpTile<D> w{sq, sk0, sv0, q_lane, k_lane, v_lane, k_head, k_sn, v_head, ks_head, n_pad, n_kv, n_blocks,
                      q0, tid, lane, causal_shift, causal, per_thread, q_mult, qfrag};
  const int unmasked = split_loops<D, PV_F16>() ? min(min(n_blocks, n_kv / CTA_K),
                                                     causal ? max(0, q0 + causal_shift + 1) / CTA_K : n_blocks)
                                                 : 0;
  int blk = 0;
  for (; blk < unmasked; ++blk) attention_step<D, PV_F16, false>(w, blk, o, m, l);
  for (; blk < n_blocks; ++blk) attention_step<D, PV_F16, true>(w, blk, o, m, l);
  cp_async_wait<0>();

  int eb = b, eh = h, ehk = hk, eq0 = q0, elane = lane;  // the epilogue's indices: the prologue's, or afresh
  if (lean_key_loop<D>()) {
    const FreshIndex f = fresh_index();
    const int eqblk = causal ? gridDim.x - 1 - f.x : f.x;
    eh = f.y, eb = f.z, ehk = eh / (heads_q / heads_kv);
    eq0 = eqblk * CTA_Q + (f.tid / 32) * WARP_Q, elane = f.tid % 32;
  }
  store_output<D>(o, m, l, v_scale + ((i64)eb * heads_kv + ehk) * D, out + eb * o_sb + eh * o_sh, o_sn,
                  lse != nullptr ? lse + ((i64)eb * heads_q + eh) * n_q : nullptr, eq0, n_q, elane,
                  flags & ATTN_OUT_BF16, causal, causal_shift);
}
