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
// Geometry: 8 warps, CTA_Q = 128 query rows (16 per warp: one m16 tile), CTA_K = 64
// keys per step; K and V tiles double-buffered in shared memory by cp.async
// (zero-filled past N), XOR-swizzled 16-byte chunks read with ldmatrix; Q fragments
// in registers at D = 64, reloaded from the shared Q tile at D = 128. GQA through
// the kv-head index; HND / NHD through strides.
// Register budget (notes/kernels.md): a warp of 16 rows holds O (D/2 fp32), S (32)
// and the softmax state, which fits the 128 registers that two CTAs per SM (16
// warps) leave each thread; 32 rows per warp needed ~390 and spilled.
// Quantization groups stay the contract's: q scales per WARPQ = 32 rows (a warp
// reads the group its 16 rows belong to), k scales per 64-key block.
// Targets: sm_89, sm_90, sm_120a, sm_121a (mma.sync m16n8k32 s8 and e4m3).
// Grid: (ceil(N_q / 128), H_q, B); block 256; dynamic shared memory attn_smem_bytes(D).
#include "common.cuh"
#include "convert.cuh"
#include "cp_async.cuh"
#include "epilogue.cuh"
#include "online_softmax.cuh"
#include "ptx_mma.cuh"
#include "swizzle.cuh"

#define ATTN_WARPS 8
#define ATTN_THREADS (32 * ATTN_WARPS)
#define ATTN_MIN_BLOCKS 2  // CTAs per SM the register budget is sized for (128 registers)
#define CTA_Q 128
#define WARP_ROWS 16               // query rows per warp
#define M_TILES (WARP_ROWS / 16)   // m16 tiles per warp
#define CONTRACT_WARPQ 32          // the sm89 preset's q scale group (rows)
#define CTA_K 64

#define ATTN_CAUSAL 1
#define ATTN_PER_THREAD 2
#define ATTN_OUT_BF16 4

// Q tile, then two K stages, then two V stages.
template <int D>
struct AttnSmem {
  static constexpr int Q_BYTES = CTA_Q * D;
  static constexpr int K_BYTES = CTA_K * D;
  static constexpr int V_BYTES = D * CTA_K;
  static constexpr int TOTAL = Q_BYTES + 2 * K_BYTES + 2 * V_BYTES;
};

// One thread's share of every K / V block copy. Thread tid copies chunk tid % KC of
// K rows tid / KC + i * K_ROWS_PER_PASS and chunk tid % 4 of V^T rows tid / 4 + i *
// V_ROWS_PER_PASS. Every pass moves the row by a multiple of 16, which keeps the
// swizzle pattern, so one lane offset plus a constant addresses every pass. The
// source pointers advance by one block per call: a handful of registers live across
// the key loop instead of the head pointers and the index arithmetic to rebuild them.
template <int D>
struct KVLoader {
  static constexpr int KC = D / 16;  // 16-byte chunks per K row
  static constexpr int K_ROWS_PER_PASS = ATTN_THREADS / KC, K_PASSES = CTA_K / K_ROWS_PER_PASS;
  static constexpr int V_ROWS_PER_PASS = ATTN_THREADS / 4, V_PASSES = D / V_ROWS_PER_PASS;  // V^T: D rows of 64 bytes
  static_assert(K_PASSES >= 1 && V_PASSES >= 1, "one pass covers at most a tile");
  const i8 *k_src;  // this thread's first K row of the next block
  const u8 *v_src;  // this thread's first V^T row, at the next block's first key
  int rows_left;    // keys of K from this thread's first row to N_kv
  u32 k_dst, v_dst; // this thread's offsets inside a stage

  SAGE_DEVICE KVLoader(const i8 *k_head, i64 k_sn, const u8 *v_head, int n_pad, int n_kv, int tid) {
    const int kr = tid / KC, kc = tid % KC, vr = tid / 4, vc = tid % 4;
    k_src = k_head + (i64)kr * k_sn + kc * 16;
    v_src = v_head + (i64)vr * n_pad + vc * 16;
    rows_left = n_kv - kr;
    k_dst = swizzled_offset<D>(kr, kc);
    v_dst = swizzled_offset<64>(vr, vc);
  }

  // Issue the next block's copies into stage (sk, sv). K rows at or past N_kv are
  // zero-filled from a valid address (`k_any`); V is padded to N_pad by its quantizer.
  SAGE_DEVICE void issue(u32 sk, u32 sv, const i8 *k_any, i64 k_sn, int n_pad) {
#pragma unroll
    for (int i = 0; i < K_PASSES; ++i) {
      const bool valid = rows_left > i * K_ROWS_PER_PASS;
      cp_async_16(sk + k_dst + i * K_ROWS_PER_PASS * D, valid ? k_src + (i64)i * K_ROWS_PER_PASS * k_sn : k_any,
                  valid);
    }
#pragma unroll
    for (int i = 0; i < V_PASSES; ++i)
      cp_async_16(sv + v_dst + i * V_ROWS_PER_PASS * 64, v_src + (i64)i * V_ROWS_PER_PASS * n_pad, true);
    k_src += CTA_K * k_sn;
    v_src += CTA_K;
    rows_left -= CTA_K;
  }
};

// Per-lane ldmatrix offsets. Lane i addresses row 8 * (matrix / 2 or % 2) + i % 8
// of matrix i / 8. Moving by 16 rows keeps the swizzle pattern and moving by two
// chunks flips one slot bit, so (lane offset ^ (kstep << 5)) + 16 * m * ROW_BYTES
// addresses every fragment: no per-fragment swizzle arithmetic (which the
// compiler would otherwise hoist out of the key loop into dozens of registers).
template <int D>
SAGE_DEVICE u32 q_lane_offset(int warp, int lane) {
  const int mi = lane / 8;
  return swizzled_offset<D>(warp * WARP_ROWS + 8 * (mi % 2) + lane % 8, mi / 2);
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

// Q stays in registers when it is small (D = 64: 8 registers); at D = 128 its 16
// registers would push the warp past the 128-register budget, so each k-step
// reloads its fragments from shared memory (4 ldmatrix per block beside 32 for K and V).
template <int D>
struct QFragments {
  static constexpr bool IN_REGISTERS = D <= 64;
  static constexpr int T = IN_REGISTERS ? M_TILES : 1, KK = IN_REGISTERS ? D / 32 : 1;
  u32 f[T][KK][4];
  SAGE_DEVICE void init(u32 sq, u32 q_lane) {
    if (IN_REGISTERS) {
#pragma unroll
      for (int t = 0; t < T; ++t)
#pragma unroll
        for (int kk = 0; kk < KK; ++kk) load_q_fragment<D>(f[t][kk], sq, q_lane, t, kk);
    }
  }
  // The A fragment of m-tile t, k-step kk.
  SAGE_DEVICE void get(u32 (&a)[4], u32 sq, u32 q_lane, int t, int kk) const {
    if (IN_REGISTERS) {
#pragma unroll
      for (int i = 0; i < 4; ++i) a[i] = f[IN_REGISTERS ? t : 0][IN_REGISTERS ? kk : 0][i];
    } else {
      load_q_fragment<D>(a, sq, q_lane, t, kk);
    }
  }
};

// S = Q.K^T for the warp's rows and the block's 64 keys, exact in int32.
template <int D>
SAGE_DEVICE void qk_block(const QFragments<D> &qfrag, u32 sq, u32 q_lane, u32 sk, u32 k_lane,
                          i32 (&s)[M_TILES][8][4]) {
#pragma unroll
  for (int t = 0; t < M_TILES; ++t)
#pragma unroll
    for (int j = 0; j < 8; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) s[t][j][i] = 0;
#pragma unroll
  for (int kk = 0; kk < D / 32; ++kk) {
    u32 qreg[M_TILES][4];
#pragma unroll
    for (int t = 0; t < M_TILES; ++t) qfrag.get(qreg[t], sq, q_lane, t, kk);
#pragma unroll
    for (int jp = 0; jp < 4; ++jp) {
      u32 kb[4];
      ldmatrix_x4(kb, sk + ((k_lane ^ (kk << 5)) + jp * 16 * D));
#pragma unroll
      for (int t = 0; t < M_TILES; ++t) {
        mma_s8(s[t][2 * jp], qreg[t], kb[0], kb[1]);
        mma_s8(s[t][2 * jp + 1], qreg[t], kb[2], kb[3]);
      }
    }
  }
}

// O = alpha * O + P.V, with the block's product formed in a fresh inner
// accumulator (fp32 or fp16) over its two k32 steps: the two-level scheme.
template <int D, bool PV_F16>
SAGE_DEVICE void pv_block(const u32 (&pa)[M_TILES][2][4], u32 sv, u32 v_lane, const float (&alpha)[M_TILES][2],
                          float (&o)[M_TILES][D / 8][4]) {
#pragma unroll
  for (int jp = 0; jp < D / 16; ++jp) {
    u32 vb[2][4];
#pragma unroll
    for (int ks = 0; ks < 2; ++ks) ldmatrix_x4(vb[ks], sv + ((v_lane ^ (ks << 5)) + jp * 16 * 64));
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int t = 0; t < M_TILES; ++t) {
        float c[4];
        if (PV_F16) {
          u32 acc[2] = {0u, 0u};
          mma_e4m3_f16(acc, pa[t][0], vb[0][2 * nt], vb[0][2 * nt + 1]);
          mma_e4m3_f16(acc, pa[t][1], vb[1][2 * nt], vb[1][2 * nt + 1]);
          half2_bits_to_float2(acc[0], c[0], c[1]);
          half2_bits_to_float2(acc[1], c[2], c[3]);
        } else {
          c[0] = c[1] = c[2] = c[3] = 0.0f;
          mma_e4m3_f32(c, pa[t][0], vb[0][2 * nt], vb[0][2 * nt + 1]);
          mma_e4m3_f32(c, pa[t][1], vb[1][2 * nt], vb[1][2 * nt + 1]);
        }
        float *acc_o = o[t][2 * jp + nt];
#pragma unroll
        for (int i = 0; i < 4; ++i) acc_o[i] = fmaf(acc_o[i], alpha[t][i / 2], c[i]);
      }
  }
}

template <int D, bool PV_F16>
__global__ void __launch_bounds__(ATTN_THREADS, ATTN_MIN_BLOCKS) attn_mma_kernel(
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
  const int q0_cta = qblk * CTA_Q, q0 = q0_cta + warp * WARP_ROWS;

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
  KVLoader<D> loader(k_head, k_sn, v_head, n_pad, n_kv, tid);
  if (n_blocks > 0) loader.issue(sk0, sv0, k, k_sn, n_pad);
  cp_async_commit();
  cp_async_wait<1>();
  __syncthreads();

  const u32 q_lane = q_lane_offset<D>(warp, lane), k_lane = b_lane_offset<D>(lane), v_lane = b_lane_offset<64>(lane);
  QFragments<D> qfrag;
  qfrag.init(sq, q_lane);
  // The contract's q groups: per WARPQ = 32 rows (per_warp), or per row % 8 inside
  // them (per_thread). Every row a lane owns (q0 + lane/4 + 8 * half + 16 * t) has
  // the same row % 8 and, because a warp's rows never straddle a 32-row tile, the same tile.
  static_assert(CONTRACT_WARPQ % WARP_ROWS == 0, "a warp's rows lie in one q scale group tile");
  const int q_group = per_thread ? (q0 / CONTRACT_WARPQ) * 8 + lane / 4 : q0 / CONTRACT_WARPQ;
  const float q_mult = q_scale[((i64)b * heads_q + h) * q_groups + q_group] * sm_scale_log2e;

  float m[M_TILES][2], l[M_TILES][2], o[M_TILES][D / 8][4];
#pragma unroll
  for (int t = 0; t < M_TILES; ++t) {
#pragma unroll
    for (int half = 0; half < 2; ++half) { m[t][half] = SAGE_MASK_SCORE; l[t][half] = 0.0f; }
#pragma unroll
    for (int j = 0; j < D / 8; ++j)
#pragma unroll
      for (int i = 0; i < 4; ++i) o[t][j][i] = 0.0f;
  }

  for (int blk = 0; blk < n_blocks; ++blk) {
    const int stage = blk & 1;
    cp_async_wait<0>();
    __syncthreads();  // block `blk` visible to all; everyone is done with block blk-1's buffers
    if (blk + 1 < n_blocks)
      loader.issue(sk0 + (stage ^ 1) * AttnSmem<D>::K_BYTES, sv0 + (stage ^ 1) * AttnSmem<D>::V_BYTES, k, k_sn,
                   n_pad);
    cp_async_commit();

    const int key0 = blk * CTA_K;
    if (causal && key0 > q0 + WARP_ROWS - 1 + causal_shift) continue;  // every row of this warp is masked
    const float mult = q_mult * ks_head[per_thread ? blk * 4 + lane % 4 : blk];

    i32 s[M_TILES][8][4];
    qk_block<D>(qfrag, sq, q_lane, sk0 + stage * AttnSmem<D>::K_BYTES, k_lane, s);
    float p[M_TILES][8][4], alpha[M_TILES][2];
    const bool needs_mask = key0 + CTA_K > n_kv || (causal && key0 + CTA_K - 1 > q0 + causal_shift);
    if (needs_mask) {
      mask_scores(s, key0, q0, lane, n_kv, causal, causal_shift);
      online_softmax_block<true>(s, mult, m, l, alpha, p);
    } else {
      online_softmax_block<false>(s, mult, m, l, alpha, p);
    }
    u32 pa[M_TILES][2][4];
    pack_p_fragments(p, pa);
    pv_block<D, PV_F16>(pa, sv0 + stage * AttnSmem<D>::V_BYTES, v_lane, alpha, o);
  }
  cp_async_wait<0>();

  store_output<D>(o, m, l, v_scale + ((i64)b * heads_kv + hk) * D, out + b * o_sb + h * o_sh, o_sn,
                  lse != nullptr ? lse + ((i64)b * heads_q + h) * n_q : nullptr, q0, n_q, lane,
                  flags & ATTN_OUT_BF16, causal, causal_shift);
}
