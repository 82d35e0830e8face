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
//   stats item  (phase A): sum of K per channel (fp64, exact for fp16 sums) and
//                          amax of V per channel, added atomically into a per-head
//                          workspace, then the head's done counter is bumped;
//   apply item  (phase B): issues its loads, waits until every stats item of its
//                          head is done, then quantizes its 128 tokens of K and V.
// Blocks take items in ticket order (one atomic counter, the next ticket fetched
// while the current item runs); apply item i comes `lag` tickets after stats
// item i, so it re-reads its tokens from L2 (the launcher sizes lag from the grid
// and the head length). Deadlock-free when lag >= items per head: every stats
// item an apply item waits for holds a smaller ticket, and stats items never wait.
//
// Layout: 4 * D threads per block, each one 16-byte chunk of 4 rows (quant_int8.cuh's
// quad layout), so a stats item has 8 loads per thread in flight and an apply item
// re-reads the same 8. V is transposed through shared memory as 32-bit words of 4
// tokens of one channel (built in registers from the quad), rows of 128 bytes per
// channel with the 16-byte groups XOR-swizzled by (channel / 8) % 8: the word
// stores and the 16-byte reads are both free of bank conflicts.
// Targets: sm_89, sm_90, sm_120a, sm_121a. Grid: resident blocks.
#include "quant_int8.cuh"

struct KVArgs {
  const u16 *k; i64 k_sb, k_sh, k_sn;
  const u16 *v; i64 v_sb, v_sh, v_sn;
  i8 *k_int8; i64 kq_sb, kq_sh, kq_sn;
  float *k_scale; int k_groups; GroupGeometry geo;
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

// 16 tokens of one channel (byte i = token i) -> the sm89 order
// [0,1,8,9, 2,3,10,11, 4,5,12,13, 6,7,14,15].
SAGE_DEVICE u32x4 permute16(u32x4 w) {
  return u32x4{byte_perm(w.x, w.z, 0x5410u), byte_perm(w.x, w.z, 0x7632u),
               byte_perm(w.y, w.w, 0x5410u), byte_perm(w.y, w.w, 0x7632u)};
}

template <int D>
struct KVSmem {
  static constexpr int WARPS = QuadLayout<D>::THREADS / 32;
  QuantSmem quant;
  float km[D];       // k mean (a value of the input dtype) as fp32, at by_element(channel)
  u16 km_bits[D];    // the same in the input dtype
  float vmult[D];    // RN(scale_max / amax) per channel, at by_element(channel)
  union {
    struct {  // channel 8l + e of the warp's 64 at stats_slot(8l + e): no bank conflicts
      double sum[WARPS][64];  // per-warp partial k sums of the warp's 64 channels
      u32 amax[WARPS][64];    // per-warp v amax (fp32 bits)
    } stats;
    u32 vt[D * QUANT_ROWS / 4];  // e4m3 V tile: row per channel, 32 words of 4 tokens, swizzled
  } u;
};

// Per-channel values that a thread reads for its chunk c (channels 8c .. 8c+7) are kept
// element-major, at e * CPR + c: the 8 chunks of a warp then read 8 consecutive words
// (channel-major, 8c + e, put chunks c and c + 4 in one bank: a 2-way conflict per read).
template <int D>
SAGE_DEVICE int by_element(int channel) { return (channel % 8) * (D / 8) + channel / 8; }

// Slot of channel c = 8l + e (l, e < 8) in a warp's 64 partial sums / maxima: l * 8 + (e ^ l).
// Lanes l = 0..7 storing element e hit 8 distinct bank groups, and 32 consecutive channels
// read back are a permutation of 32 consecutive slots.
SAGE_DEVICE int stats_slot(int c) { return (c & ~7) | ((c ^ (c >> 3)) & 7); }

// Word index in the V tile of tokens [4 * quad, 4 * quad + 4) of channel ch.
SAGE_DEVICE int vt_word(int ch, int quad) { return ch * 32 + 4 * ((quad >> 2) ^ ((ch >> 3) & 7)) + (quad & 3); }

template <int D, bool BF16>
SAGE_DEVICE void stats_item(const KVArgs &a, int bh, int row0, int *next_ticket, KVSmem<D> &sm) {
  using L = QuadLayout<D>;
  const int tid = quant_tid(), lane = tid % 32, warp = tid / 32;
  const int b = bh / a.heads, h = bh % a.heads;
  u32x4 kr[4], vr[4];
  if (a.do_k) load_quad<D, false>(kr, a.k + b * a.k_sb + h * a.k_sh, a.k_sn, a.n_tokens, row0);
  if (a.do_v) load_quad<D, false>(vr, a.v + b * a.v_sb + h * a.v_sh, a.v_sn, a.n_tokens, row0);
  if (tid == 0) *next_ticket = atomicAdd(a.ticket, 1);  // the next item's, in flight with the loads
  if (a.do_k) {
    double sum[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      sum[e] = 0.0;
#pragma unroll
      for (int k = 0; k < 4; ++k) sum[e] += (double)element<BF16>(kr[k], e);  // rows past N read 0
#pragma unroll
      for (int off = 8; off < 32; off <<= 1) sum[e] += __shfl_xor_sync(0xffffffffu, sum[e], off);
    }
    if (lane < 8) {
#pragma unroll
      for (int e = 0; e < 8; ++e) sm.u.stats.sum[warp][stats_slot(lane * 8 + e)] = sum[e];
    }
  }
  if (a.do_v) {
    u32x4 m = vr[0];
    m.x &= 0x7fff7fffu; m.y &= 0x7fff7fffu; m.z &= 0x7fff7fffu; m.w &= 0x7fff7fffu;
#pragma unroll
    for (int k = 1; k < 4; ++k) {
      m.x = abs_max2<BF16>(m.x, vr[k].x); m.y = abs_max2<BF16>(m.y, vr[k].y);
      m.z = abs_max2<BF16>(m.z, vr[k].z); m.w = abs_max2<BF16>(m.w, vr[k].w);
    }
#pragma unroll
    for (int off = 8; off < 32; off <<= 1) {
      m.x = max2<BF16>(m.x, __shfl_xor_sync(0xffffffffu, m.x, off));
      m.y = max2<BF16>(m.y, __shfl_xor_sync(0xffffffffu, m.y, off));
      m.z = max2<BF16>(m.z, __shfl_xor_sync(0xffffffffu, m.z, off));
      m.w = max2<BF16>(m.w, __shfl_xor_sync(0xffffffffu, m.w, off));
    }
    if (lane < 8) {
#pragma unroll
      for (int e = 0; e < 8; ++e) sm.u.stats.amax[warp][stats_slot(lane * 8 + e)] = __float_as_uint(element<BF16>(m, e));
    }
  }
  __syncthreads();
  if (tid < D) {
    // Channel tid lives in the warps whose half of the row (warp % (CPR / 8)) holds it.
    constexpr int HALVES = L::CPR / 8;
    const int half = tid / 64, col = tid % 64, at_col = stats_slot(col);
    const i64 at = (i64)bh * D + tid;
    if (a.do_k) {
      double total = 0.0;
#pragma unroll
      for (int w = half; w < KVSmem<D>::WARPS; w += HALVES) total += sm.u.stats.sum[w][at_col];
      atomicAdd(a.k_sum + at, total);
    }
    if (a.do_v) {
      u32 m = 0u;
#pragma unroll
      for (int w = half; w < KVSmem<D>::WARPS; w += HALVES) m = max(m, sm.u.stats.amax[w][at_col]);
      atomicMax(a.v_amax + at, m);
    }
  }
  __syncthreads();
  if (tid == 0) {
    // One fence after the barrier makes every thread's sums visible before the done counter
    // moves (the grid-barrier pattern), instead of one fence per thread.
    __threadfence();
    atomicAdd(a.head_done + bh, 1);
  }
}

template <int D, bool BF16, bool CUDA_FLAVOUR>
SAGE_DEVICE void apply_item(const KVArgs &a, int bh, int row0, int items_per_head, int *next_ticket,
                            KVSmem<D> &sm) {
  using L = QuadLayout<D>;
  const int tid = quant_tid(), c = L::chunk(tid);
  const int b = bh / a.heads, h = bh % a.heads;
  u32x4 kr[4], vr[4];  // issued before the wait: they depend on nothing
  if (a.do_k) load_quad<D, true>(kr, a.k + b * a.k_sb + h * a.k_sh, a.k_sn, a.n_tokens, row0);
  if (a.do_v) load_quad<D, true>(vr, a.v + b * a.v_sb + h * a.v_sh, a.v_sn, a.n_tokens, row0);
  if (tid == 0) *next_ticket = atomicAdd(a.ticket, 1);  // the next item's, in flight with the loads
  if (tid == 0) {
    const volatile int *done = a.head_done + bh;
    while (*done < items_per_head) __nanosleep(64);
    __threadfence();
  }
  __syncthreads();
  if (tid < D) {
    const i64 at = (i64)bh * D + tid;
    if (a.do_k) {
      // torch's mean: sum * fl(1 / N) in fp64; the fp64 mean goes to fp16/bf16 through
      // fp32 (c10::Half / BFloat16 take a float), so it is rounded twice.
      const u16 km = float_to_bits<BF16>(__double2float_rn(__dmul_rn(__ldcg(a.k_sum + at), a.inv_n)));
      sm.km[by_element<D>(tid)] = bits_to_float<BF16>(km);
      sm.km_bits[tid] = km;
      if (row0 == 0) a.km[at] = km;
    }
    if (a.do_v) {
      // The contract (v_channel_scales): v_scale = amax * fl32(1 / scale_max),
      // multiplier = scale_max / amax correctly rounded.
      const float amax = fmaxf(__uint_as_float(__ldcg(a.v_amax + at)), 1e-7f);
      sm.vmult[by_element<D>(tid)] = __fdiv_rn(a.v_scale_max, amax);
      if (row0 == 0) a.v_scale[at] = __fmul_rn(amax, a.inv_v_scale_max);
    }
  }
  __syncthreads();
  if (a.do_v) {  // V to e4m3 words in the tile first: frees vr before K needs registers
    const int quad = L::row(tid) / 4;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float mult = sm.vmult[by_element<D>(c * 8 + e)];
      // Rows past N read 0 and stay 0: the zero padding of the transposed tile.
      const u32 lo = e4m3x2(__fmul_rn(element<BF16>(vr[0], e), mult), __fmul_rn(element<BF16>(vr[1], e), mult));
      const u32 hi = e4m3x2(__fmul_rn(element<BF16>(vr[2], e), mult), __fmul_rn(element<BF16>(vr[3], e), mult));
      sm.u.vt[vt_word(c * 8 + e, quad)] = lo | (hi << 16);
    }
  }
  if (a.do_k) {
    float km[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) km[e] = CUDA_FLAVOUR ? sm.km[by_element<D>(c * 8 + e)] : 0.0f;
    if (!CUDA_FLAVOUR) {  // triton: k - km rounded to the input dtype, two at a time
      const u32 *km2 = reinterpret_cast<const u32 *>(sm.km_bits) + c * 4;
      const u32 m0 = km2[0], m1 = km2[1], m2 = km2[2], m3 = km2[3];
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        kr[k].x = sub2<BF16>(kr[k].x, m0); kr[k].y = sub2<BF16>(kr[k].y, m1);
        kr[k].z = sub2<BF16>(kr[k].z, m2); kr[k].w = sub2<BF16>(kr[k].w, m3);
      }
    }
    quantize_tile_int8<D, BF16, CUDA_FLAVOUR, CUDA_FLAVOUR>(
        kr, km, a.k_int8 + b * a.kq_sb + h * a.kq_sh, a.kq_sn, a.k_scale + (i64)bh * a.k_groups, a.n_tokens,
        row0, a.geo, a.k_groups, sm.quant);
  }
  if (a.do_v) {
    if (!a.do_k) __syncthreads();  // (with K, quantize_tile_int8's barriers order the tile writes)
    u8 *out = a.v_fp8 + (i64)bh * D * a.n_pad;
#pragma unroll
    for (int i = 0; i < D * 8 / L::THREADS; ++i) {
      const int idx = tid + L::THREADS * i, group = idx % 8, ch = idx / 8;
      u32x4 w = *reinterpret_cast<const u32x4 *>(&sm.u.vt[vt_word(ch, 4 * group)]);
      if (a.permute_v) w = permute16(w);
      const int p0 = row0 + 16 * group;
      if (p0 < a.n_pad) store_stream(out + (i64)ch * a.n_pad + p0, w);
    }
  }
}

// Plain scalar parameters (no struct by value): what any launcher can pass.
template <int D, bool BF16, bool CUDA_FLAVOUR>
__global__ void __launch_bounds__(QuadLayout<D>::THREADS, QUANT_KV_THREADS_PER_SM / (4 * D)) quant_kv_kernel(
    const u16 *k, i64 k_sb, i64 k_sh, i64 k_sn, const u16 *v, i64 v_sb, i64 v_sh, i64 v_sn,
    i8 *k_int8, i64 kq_sb, i64 kq_sh, i64 kq_sn, float *k_scale, int k_groups,
    int tile_shift, int per_tile_shift, int mod_mask, int div_shift, u16 *km, u8 *v_fp8, float *v_scale, int n_pad,
    float v_scale_max, float inv_v_scale_max, int permute_v, int *workspace_ints, double *k_sum, u32 *v_amax,
    int n_tokens, int heads, int batch, int lag, int do_k, int do_v, double inv_n) {
  __shared__ KVSmem<D> sm;
  __shared__ int s_ticket[2];
  const KVArgs a = {k, k_sb, k_sh, k_sn, v, v_sb, v_sh, v_sn, k_int8, kq_sb, kq_sh, kq_sn,
                    k_scale, k_groups, {tile_shift, per_tile_shift, mod_mask, div_shift}, km, v_fp8, v_scale,
                    n_pad, v_scale_max, inv_v_scale_max, permute_v, workspace_ints, workspace_ints + 1, k_sum,
                    v_amax, n_tokens, heads, batch, lag, do_k, do_v, inv_n};
  const int items_per_head = (a.n_tokens + QUANT_ROWS - 1) / QUANT_ROWS;
  const int n_items = items_per_head * a.heads * a.batch;
  if (threadIdx.x < QUANT_MAX_GROUPS) sm.quant.amax[threadIdx.x] = 0u;
  if (threadIdx.x == 0) s_ticket[0] = atomicAdd(a.ticket, 1);
  __syncthreads();
  for (int i = 0;; ++i) {
    // s_ticket is double-buffered: thread 0 writes the next ticket into the other slot
    // while the item runs, and the barrier at the end separates the two uses.
    const int t = s_ticket[i & 1];
    if (t >= 2 * n_items) break;
    bool apply;
    int item;
    ticket_to_item(t, n_items, a.lag, apply, item);
    const int bh = item / items_per_head, row0 = (item % items_per_head) * QUANT_ROWS;
    if (apply) {
      apply_item<D, BF16, CUDA_FLAVOUR>(a, bh, row0, items_per_head, &s_ticket[(i + 1) & 1], sm);
    } else {
      stats_item<D, BF16>(a, bh, row0, &s_ticket[(i + 1) & 1], sm);
    }
    __syncthreads();  // also: the item's shared memory is free for the next one
  }
}
