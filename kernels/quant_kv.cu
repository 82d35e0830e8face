// quant_kv.cu: K smoothing + INT8 K, and V to e4m3 (transposed, padded, permuted),
// in one persistent launch that reads each input from DRAM about once.
//
// Contract stages: 1 (k mean over tokens as torch rounds it: fp64 -> fp32 -> input dtype;
// k - km in the flavour's arithmetic), 2 (INT8 K, per_thread / per_warp groups)
// and 5 for V (per-channel amax over all tokens, e4m3 = rne(v * (scale_max / amax)),
// layout [B, H, D, N_pad], tokens permuted in 16s for the sm89 preset).
// Bit-exact to sagelib.contract.quantize_qk (K part) and quantize_v.
//
// Both K and V need a reduction over ALL tokens of a head (mean, amax) before
// any token can be quantized. Two plain kernels would read K and V twice from
// DRAM. Here work comes in items of 128 tokens of one (batch, kv head):
//   stats item  (phase A): sum of K per channel (exact, fp64) and amax of V per
//                          channel, added atomically into a per-head workspace;
//   apply item  (phase B): waits until every stats item of its head is done,
//                          then quantizes its 128 tokens of K and V.
// Blocks take items in ticket order (one atomic counter); apply item i comes
// `lag` tickets after stats item i, so it re-reads its tokens while they are
// still in L2. Deadlock-free when lag >= items per head: every stats item an
// apply item waits for holds a smaller ticket, and stats items never wait.
// Targets: sm_89, sm_90, sm_120a, sm_121a. Block: 256 threads; grid: resident blocks.
#include "quant_int8.cuh"

struct KVArgs {
  const u16 *k; i64 k_sb, k_sh, k_sn;
  const u16 *v; i64 v_sb, v_sh, v_sn;
  i8 *k_int8; i64 kq_sb, kq_sh, kq_sn;
  float *k_scale; int k_groups; int tile, per_tile, mod, div;
  u16 *km;            // [B, H, D] k mean in the input dtype
  u8 *v_fp8;          // [B, H, D, n_pad]
  float *v_scale;     // [B, H, D]
  int n_pad; float v_scale_max, inv_v_scale_max; int permute_v;  // inv_: fl32(1 / scale_max)
  int *ticket; int *head_done; double *k_sum; u32 *v_amax;  // zeroed workspace: [ticket, head_done[B*H]]
  int n_tokens, heads, batch, lag, do_k, do_v;
  double inv_n;  // fl64(1 / n_tokens), as torch's mean multiplies by it
};

SAGE_DEVICE void ticket_to_item(int t, int n_items, int lag, bool &apply, int &item) {
  if (lag > n_items) lag = n_items;
  if (t < lag) { apply = false; item = t; return; }
  const int u = t - lag, rest = n_items - lag;
  if (u < 2 * rest) {
    apply = (u % 2) == 0;
    item = apply ? u / 2 : lag + u / 2;
    return;
  }
  apply = true;
  item = rest + (u - 2 * rest);
}

// Source token (within 16) of stored position p for the sm89 V permutation
// [0,1,8,9, 2,3,10,11, 4,5,12,13, 6,7,14,15].
SAGE_DEVICE int permuted_token(int p) { return ((p & 2) << 2) + ((p >> 2) << 1) + (p & 1); }

template <int D>
struct KVSmem {
  QuantSmem quant;
  float km[D];
  float vmult[D];
  union {
    double partial[QUANT_THREADS / 32][D];  // stats: per-warp partial sums
    u32 partial_max[QUANT_THREADS / 32][D];
    u8 vt[QUANT_ROWS][D];                   // apply: e4m3 V chunk, token-major
  } u;
};

template <int D, bool BF16>
SAGE_DEVICE void stats_item(const KVArgs &a, int bh, int row0, KVSmem<D> &sm) {
  constexpr int CPR = D / 8, VPT = QUANT_ROWS * CPR / QUANT_THREADS;
  const int tid = threadIdx.x, lane = tid % 32, warp = tid / 32, c = tid % CPR;
  const int b = bh / a.heads, h = bh % a.heads;
  if (a.do_k) {
    const u16 *k = a.k + b * a.k_sb + h * a.k_sh;
    double sum[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) sum[e] = 0.0;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int row = row0 + (i * QUANT_THREADS + tid) / CPR;
      if (row < a.n_tokens) {
        const u32x4 raw = *reinterpret_cast<const u32x4 *>(k + row * a.k_sn + c * 8);
        const u32 w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
        for (int e = 0; e < 8; ++e) sum[e] += (double)bits_to_float<BF16>((u16)(w[e / 2] >> (16 * (e % 2))));
      }
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) {
#pragma unroll
      for (int off = 16; off >= CPR; off >>= 1) sum[e] += __shfl_xor_sync(0xffffffffu, sum[e], off);
      if (lane < CPR) sm.u.partial[warp][c * 8 + e] = sum[e];
    }
    __syncthreads();
    if (tid < D) {
      double total = 0.0;
#pragma unroll
      for (int w = 0; w < QUANT_THREADS / 32; ++w) total += sm.u.partial[w][tid];
      atomicAdd(&a.k_sum[(i64)bh * D + tid], total);
    }
    __syncthreads();
  }
  if (a.do_v) {
    const u16 *v = a.v + b * a.v_sb + h * a.v_sh;
    float amax[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) amax[e] = 0.0f;
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int row = row0 + (i * QUANT_THREADS + tid) / CPR;
      if (row < a.n_tokens) {
        const u32x4 raw = *reinterpret_cast<const u32x4 *>(v + row * a.v_sn + c * 8);
        const u32 w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
        for (int e = 0; e < 8; ++e)
          amax[e] = fmaxf(amax[e], fabsf(bits_to_float<BF16>((u16)(w[e / 2] >> (16 * (e % 2))))));
      }
    }
#pragma unroll
    for (int e = 0; e < 8; ++e) {
#pragma unroll
      for (int off = 16; off >= CPR; off >>= 1) amax[e] = fmaxf(amax[e], __shfl_xor_sync(0xffffffffu, amax[e], off));
      if (lane < CPR) sm.u.partial_max[warp][c * 8 + e] = __float_as_uint(amax[e]);
    }
    __syncthreads();
    if (tid < D) {
      u32 m = 0u;
#pragma unroll
      for (int w = 0; w < QUANT_THREADS / 32; ++w) m = max(m, sm.u.partial_max[w][tid]);
      atomicMax(&a.v_amax[(i64)bh * D + tid], m);
    }
  }
  __threadfence();
  __syncthreads();
  if (tid == 0) atomicAdd(&a.head_done[bh], 1);
}

template <int D, bool BF16, bool CUDA_FLAVOUR>
SAGE_DEVICE void apply_item(const KVArgs &a, int bh, int row0, int items_per_head, KVSmem<D> &sm) {
  constexpr int CPR = D / 8, VPT = QUANT_ROWS * CPR / QUANT_THREADS;
  const int tid = threadIdx.x, c = tid % CPR;
  const int b = bh / a.heads, h = bh % a.heads;
  if (tid == 0) {
    const volatile int *done = a.head_done + bh;
    while (*done < items_per_head) __nanosleep(100);
    __threadfence();
  }
  __syncthreads();
  if (tid < D) {
    const i64 at = (i64)bh * D + tid;
    if (a.do_k) {
      // torch's mean: sum * fl(1 / N) in fp64, then one rounding to the input dtype.
      // torch: the fp64 mean goes to fp16/bf16 through fp32 (c10::Half / BFloat16 take a float),
      // so it is rounded twice: fp64 -> fp32 -> input dtype.
      const u16 km = float_to_bits<BF16>(__double2float_rn(__dmul_rn(__ldcg(a.k_sum + at), a.inv_n)));
      sm.km[tid] = bits_to_float<BF16>(km);
      if (row0 == 0) a.km[at] = km;
    }
    if (a.do_v) {
      // The contract (v_channel_scales): v_scale = amax * fl32(1 / scale_max),
      // multiplier = scale_max / amax correctly rounded.
      const float amax = fmaxf(__uint_as_float(__ldcg(a.v_amax + at)), 1e-7f);
      sm.vmult[tid] = __fdiv_rn(a.v_scale_max, amax);
      if (row0 == 0) a.v_scale[at] = __fmul_rn(amax, a.inv_v_scale_max);
    }
  }
  __syncthreads();
  if (a.do_k) {
    const GroupGeometry geo = {a.tile, a.per_tile, a.mod, a.div};
    quantize_chunk_int8<D, BF16, CUDA_FLAVOUR, true>(
        a.k + b * a.k_sb + h * a.k_sh, a.k_sn, a.k_int8 + b * a.kq_sb + h * a.kq_sh, a.kq_sn,
        a.k_scale + (i64)bh * a.k_groups, a.n_tokens, row0, geo, a.k_groups, sm.km, sm.quant);
  }
  if (a.do_v) {
    const u16 *v = a.v + b * a.v_sb + h * a.v_sh;
    u32x4 raw[VPT];  // all loads in flight before the first shared-memory store
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int row = row0 + (i * QUANT_THREADS + tid) / CPR;
      raw[i] = u32x4{0u, 0u, 0u, 0u};
      if (row < a.n_tokens) raw[i] = *reinterpret_cast<const u32x4 *>(v + row * a.v_sn + c * 8);
    }
#pragma unroll
    for (int i = 0; i < VPT; ++i) {
      const int r = (i * QUANT_THREADS + tid) / CPR;
      const u32 w[4] = {raw[i].x, raw[i].y, raw[i].z, raw[i].w};
      float f[8];
#pragma unroll
      for (int e = 0; e < 8; ++e) {
        const float x = __fmul_rn(bits_to_float<BF16>((u16)(w[e / 2] >> (16 * (e % 2)))), sm.vmult[c * 8 + e]);
        f[e] = fminf(fmaxf(x, -448.0f), 448.0f);
      }
      const u32x2 packed = {e4m3x4(f[0], f[1], f[2], f[3]), e4m3x4(f[4], f[5], f[6], f[7])};
      *reinterpret_cast<u32x2 *>(&sm.u.vt[r][c * 8]) = packed;
    }
    __syncthreads();
    // Out: one unit = 32 stored positions (one 32-byte sector) of one channel row.
    u8 *out_head = a.v_fp8 + (i64)bh * D * a.n_pad;
    constexpr int UNITS = D * (QUANT_ROWS / 32);
#pragma unroll
    for (int j = 0; j < UNITS / QUANT_THREADS; ++j) {
      const int unit = j * QUANT_THREADS + tid;
      const int d = unit % D, s = unit / D;
      const int p0 = row0 + 32 * s;
      if (p0 < a.n_pad) {
        u32 word[8];
#pragma unroll
        for (int wi = 0; wi < 8; ++wi) {
          u32 acc = 0u;
#pragma unroll
          for (int byte = 0; byte < 4; ++byte) {
            const int p = 32 * s + 4 * wi + byte;  // position within the chunk
            const int tok = a.permute_v ? (p & ~15) + permuted_token(p & 15) : p;
            acc |= ((u32)sm.u.vt[tok][d]) << (8 * byte);
          }
          word[wi] = acc;
        }
        u32x4 *dst = reinterpret_cast<u32x4 *>(out_head + (i64)d * a.n_pad + p0);
        dst[0] = u32x4{word[0], word[1], word[2], word[3]};
        dst[1] = u32x4{word[4], word[5], word[6], word[7]};
      }
    }
  }
  __syncthreads();
}

// Plain scalar parameters (no struct by value): what any launcher can pass.
template <int D, bool BF16, bool CUDA_FLAVOUR>
__global__ void __launch_bounds__(QUANT_THREADS) quant_kv_kernel(
    const u16 *k, i64 k_sb, i64 k_sh, i64 k_sn, const u16 *v, i64 v_sb, i64 v_sh, i64 v_sn,
    i8 *k_int8, i64 kq_sb, i64 kq_sh, i64 kq_sn, float *k_scale, int k_groups,
    int tile, int per_tile, int mod, int div, u16 *km, u8 *v_fp8, float *v_scale, int n_pad,
    float v_scale_max, float inv_v_scale_max, int permute_v, int *workspace_ints, double *k_sum, u32 *v_amax,
    int n_tokens, int heads, int batch, int lag, int do_k, int do_v, double inv_n) {
  __shared__ KVSmem<D> sm;
  __shared__ int s_ticket;
  const KVArgs a = {k, k_sb, k_sh, k_sn, v, v_sb, v_sh, v_sn, k_int8, kq_sb, kq_sh, kq_sn,
                    k_scale, k_groups, tile, per_tile, mod, div, km, v_fp8, v_scale, n_pad,
                    v_scale_max, inv_v_scale_max, permute_v, workspace_ints, workspace_ints + 1, k_sum, v_amax,
                    n_tokens, heads, batch, lag, do_k, do_v, inv_n};
  const int items_per_head = (a.n_tokens + QUANT_ROWS - 1) / QUANT_ROWS;
  const int n_items = items_per_head * a.heads * a.batch;
  for (;;) {
    if (threadIdx.x == 0) s_ticket = atomicAdd(a.ticket, 1);
    __syncthreads();
    const int t = s_ticket;
    __syncthreads();
    if (t >= 2 * n_items) break;
    bool apply;
    int item;
    ticket_to_item(t, n_items, a.lag, apply, item);
    const int bh = item / items_per_head, row0 = (item % items_per_head) * QUANT_ROWS;
    if (apply) {
      apply_item<D, BF16, CUDA_FLAVOUR>(a, bh, row0, items_per_head, sm);
    } else {
      stats_item<D, BF16>(a, bh, row0, sm);
    }
  }
}
