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
//                          workspace, then the head's done counter is bumped. The
//                          item that completes a head finalizes it: one thread per
//                          channel turns the sums into km and the V multiplier, once
//                          per head, and publishes each as a word that is non-zero
//                          once valid (km: 0x10000 | bits; multiplier: its fp32 bits
//                          with the sign bit set, as the multiplier is 0 when V holds
//                          an infinity: its bare bits would keep the word 0 for ever);
//   apply item  (phase B): issues its loads, then the threads of one channel each
//                          poll their channel's two words (one L2 round trip when the
//                          head is done, no fence) and quantize its 128 tokens.
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
//
// Sync: __syncthreads orders the item slot s_item (thread 0 writes the next ticket), the shared V
// transpose and the per-item shared state; across blocks, stats items publish their atomics with
// __threadfence before bumping head_done, and apply items poll the finalized words (non-zero once valid).
// Why one fused schedule: two launches (K, then V), register-held items, or deeper prefetch all ran slower on
// the H200, and V stays transposed here rather than in the attention kernel, which could win back little.
#include "params.cuh"
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
  u32 *km_word; u32 *vmult_word;  // [B, H, D], zeroed: the finalized head (see the header)
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

// A ticket decoded once, by thread 0, and handed to the block through shared memory
// (its two runtime divisions and 64-bit head offsets would otherwise be paid by every thread).
enum { KV_STATS = 0, KV_APPLY = 1, KV_END = 2 };
struct KVItem {
  int kind, bh, row0;
  i64 k_head, v_head, kq_head;  // element offsets of the head's token 0 in k, v and k_int8
};

SAGE_DEVICE KVItem decode_ticket(const KVArgs &a, int t, int items_per_head, int n_items) {
  KVItem it = {KV_END, 0, 0, 0, 0, 0};
  if (t >= 2 * n_items) return it;
  bool apply;
  int item;
  ticket_to_item(t, n_items, a.lag, apply, item);
  const int bh = item / items_per_head, b = bh / a.heads, h = bh % a.heads;
  it.kind = apply ? KV_APPLY : KV_STATS;
  it.bh = bh;
  it.row0 = (item - bh * items_per_head) * QUANT_ROWS;
  it.k_head = b * a.k_sb + h * a.k_sh;
  it.v_head = b * a.v_sb + h * a.v_sh;
  it.kq_head = b * a.kq_sb + h * a.kq_sh;
  return it;
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
  alignas(16) u16 km_bits[D];  // the same in the input dtype (read in 16-byte vectors)
  float vmult[D];    // RN(scale_max / amax) per channel, at by_element(channel)
  union alignas(16) {  // vt is read in 16-byte vectors
    struct {  // channel 8l + e of the warp's 64 at stats_slot(8l + e): no bank conflicts
      double sum[WARPS][64];  // per-warp partial k sums of the warp's 64 channels
      u32 amax[WARPS][64];    // per-warp v amax (fp32 bits)
    } stats;
    u32 vt[D * QUANT_ROWS / 4];  // e4m3 V tile: row per channel, 32 words of 4 tokens, swizzled
  } u;
  int head_complete;  // the stats item just counted was its head's last
};

// Per-channel values that a thread reads for its chunk c (channels 8c .. 8c+7) are kept
// element-major, at e * CPR + c: the 8 chunks of a warp then read 8 consecutive words
// (channel-major, 8c + e, put chunks c and c + 4 in one bank: a 2-way conflict per read).
template <int D>
SAGE_DEVICE u32 by_element(u32 channel) { return (channel % 8) * (D / 8) + channel / 8; }

// Slot of channel c = 8l + e (l, e < 8) in a warp's 64 partial sums / maxima: l * 8 + (e ^ l).
// Lanes l = 0..7 storing element e hit 8 distinct bank groups, and 32 consecutive channels
// read back are a permutation of 32 consecutive slots.
SAGE_DEVICE u32 stats_slot(u32 c) { return (c & ~7u) | ((c ^ (c >> 3)) & 7u); }

// Word index in the V tile of tokens [4 * quad, 4 * quad + 4) of channel ch: row ch of 32
// words, its 16-byte groups XOR-swizzled by (ch / 8) % 8. For the 8 channels of chunk c
// (ch = 8c + e) the swizzle is c % 8 for all of them, so the word is vt_word(8c, quad) + 32e.
SAGE_DEVICE u32 vt_word(u32 ch, u32 quad) { return ch * 32 + 4 * ((quad >> 2) ^ ((ch >> 3) & 7)) + (quad & 3); }

// Element e of a 16-byte row piece as fp64 (exact; one conversion for fp16).
template <bool BF16>
SAGE_DEVICE double element_f64(const u32x4 &w, int e) {
  const u32 word = e < 2 ? w.x : (e < 4 ? w.y : (e < 6 ? w.z : w.w));
  if (BF16) return (double)__uint_as_float((e & 1) ? (word & 0xffff0000u) : (word << 16));
  double d;
  if (e & 1) {
    asm("{.reg .b16 lo, hi; mov.b32 {lo, hi}, %1; cvt.f64.f16 %0, hi;}" : "=d"(d) : "r"(word));
  } else {
    asm("{.reg .b16 lo, hi; mov.b32 {lo, hi}, %1; cvt.f64.f16 %0, lo;}" : "=d"(d) : "r"(word));
  }
  return d;
}

// Set in a published V multiplier word (the multiplier is >= 0, so its sign bit is free).
#define VMULT_VALID 0x80000000u

// Relaxed gpu-scope accesses of the words that publish a finalized head.
SAGE_DEVICE u32 load_relaxed(const u32 *p) {
  u32 v;
  asm volatile("ld.relaxed.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}

SAGE_DEVICE void store_relaxed(u32 *p, u32 v) {
  asm volatile("st.relaxed.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// Channel ch of a head whose stats items are all counted: km and the V multiplier from
// the atomically gathered sums, computed once per head, written to the outputs and
// published as words that are non-zero once valid.
template <int D, bool BF16>
SAGE_DEVICE void finalize_channel(const KVArgs &a, int bh, u32 ch) {
  __threadfence();  // acquire: the sums of every stats item of the head (each fenced before counting)
  const i64 at = (i64)bh * D + ch;
  if (a.do_k) {
    // torch's mean: sum * fl(1 / N) in fp64; the fp64 mean goes to fp16/bf16 through
    // fp32 (c10::Half / BFloat16 take a float), so it is rounded twice.
    const u16 km = float_to_bits<BF16>(__double2float_rn(__dmul_rn(__ldcg(a.k_sum + at), a.inv_n)));
    a.km[at] = km;
    store_relaxed(a.km_word + at, 0x10000u | km);
  }
  if (a.do_v) {
    // The contract (v_channel_scales): v_scale = amax * fl32(1 / scale_max),
    // multiplier = scale_max * fl32(1 / amax), each step rounded (positive and finite for a finite amax).
    const float amax = fmaxf(__uint_as_float(__ldcg(a.v_amax + at)), 1e-7f);
    a.v_scale[at] = __fmul_rn(amax, a.inv_v_scale_max);
    // Never 0, not even for an infinite amax (multiplier +0: inputs the contract refuses,
    // reachable with check_finite=False), which would leave the apply items polling for ever.
    store_relaxed(a.vmult_word + at, VMULT_VALID | __float_as_uint(__fmul_rn(a.v_scale_max, __frcp_rn(amax))));
  }
}

// Channel tid's km and V multiplier words for an apply item of head bh: both requested at
// once, re-polled while 0 (one L2 round trip when the head is finalized, no fence).
template <int D>
SAGE_DEVICE void channel_words(const KVArgs &a, int bh, u32 tid, u32 &kw, u32 &vw) {
  const i64 at = (i64)bh * D + tid;
  kw = a.do_k ? load_relaxed(a.km_word + at) : 1u;
  vw = a.do_v ? load_relaxed(a.vmult_word + at) : 1u;
  while (kw == 0u || vw == 0u) {
    __nanosleep(64);
    if (kw == 0u) kw = load_relaxed(a.km_word + at);
    if (vw == 0u) vw = load_relaxed(a.vmult_word + at);
  }
}

template <int D, bool BF16>
SAGE_DEVICE void stats_item(const KVArgs &a, const KVItem &it, int items_per_head, u32 tid, KVSmem<D> &sm) {
  using L = QuadLayout<D>;
  const u32 lane = tid % 32, warp = tid / 32;
  u32x4 kr[4], vr[4];
  if (a.do_k) load_quad<D, false>(kr, a.k + it.k_head, a.k_sn, a.n_tokens, it.row0, tid);
  if (a.do_v) load_quad<D, false>(vr, a.v + it.v_head, a.v_sn, a.n_tokens, it.row0, tid);
  if (a.do_k) {
    double sum[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      // Rows past N read 0. fp16 sums are exact in fp64 (bf16 ones whenever they fit 53 bits),
      // so the order is free: the atomics add the items in any order anyway.
      sum[e] = __dadd_rn(__dadd_rn(element_f64<BF16>(kr[0], e), element_f64<BF16>(kr[1], e)),
                         __dadd_rn(element_f64<BF16>(kr[2], e), element_f64<BF16>(kr[3], e)));
#pragma unroll
      for (int off = 8; off < 32; off <<= 1) sum[e] += __shfl_xor_sync(0xffffffffu, sum[e], off);
    }
    if (lane < 8) {
#pragma unroll
      for (u32 e = 0; e < 8; ++e) sm.u.stats.sum[warp][lane * 8 + (e ^ lane)] = sum[e];
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
      for (u32 e = 0; e < 8; ++e) sm.u.stats.amax[warp][lane * 8 + (e ^ lane)] = __float_as_uint(element<BF16>(m, e));
    }
  }
  __syncthreads();
  if (tid < D) {
    // Channel tid lives in the warps whose half of the row (warp % (CPR / 8)) holds it.
    constexpr u32 HALVES = L::CPR / 8;
    const u32 half = tid / 64, at_col = stats_slot(tid % 64);
    const i64 at = (i64)it.bh * D + tid;
    if (a.do_k) {
      double total = 0.0;
#pragma unroll
      for (u32 w = 0; w < KVSmem<D>::WARPS; w += HALVES) total += sm.u.stats.sum[w + half][at_col];
      atomicAdd(a.k_sum + at, total);
    }
    if (a.do_v) {
      u32 m = 0u;
#pragma unroll
      for (u32 w = 0; w < KVSmem<D>::WARPS; w += HALVES) m = max(m, sm.u.stats.amax[w + half][at_col]);
      atomicMax(a.v_amax + at, m);
    }
  }
  // One fence after the barrier makes every thread's sums visible before the done counter
  // moves (the grid-barrier pattern), instead of one fence per thread; the item that
  // completes the head finalizes it, one channel per thread. (Named barriers for the D
  // channel threads alone measured no faster, and racecheck reported races in that build.)
  __syncthreads();
  if (tid == 0) {
    __threadfence();
    sm.head_complete = atomicAdd(a.head_done + it.bh, 1) + 1 == items_per_head;
  }
  __syncthreads();
  if (tid < D && sm.head_complete) finalize_channel<D, BF16>(a, it.bh, tid);
}

template <int D, bool BF16, bool CUDA_FLAVOUR>
SAGE_DEVICE void apply_item(const KVArgs &a, const KVItem &it, u32 tid, KVSmem<D> &sm) {
  using L = QuadLayout<D>;
  const u32 c = L::chunk(tid);
  u32x4 kr[4], vr[4];  // issued before the wait: they depend on nothing
  if (a.do_k) load_quad<D, true>(kr, a.k + it.k_head, a.k_sn, a.n_tokens, it.row0, tid);
  if (a.do_v) load_quad<D, true>(vr, a.v + it.v_head, a.v_sn, a.n_tokens, it.row0, tid);
  if (tid < D) {
    u32 kw, vw;
    channel_words<D>(a, it.bh, tid, kw, vw);
    sm.km[by_element<D>(tid)] = bits_to_float<BF16>((u16)kw);
    sm.km_bits[tid] = (u16)kw;
    sm.vmult[by_element<D>(tid)] = __uint_as_float(vw & ~VMULT_VALID);
  }
  __syncthreads();
  if (a.do_v) {  // V to e4m3 words in the tile first: frees vr before K needs registers
    u32 *vt = &sm.u.vt[vt_word(c * 8, L::row(tid) / 4)];
    const float *vmult = &sm.vmult[c];
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      const float mult = vmult[e * L::CPR];
      // Rows past N read 0 and stay 0: the zero padding of the transposed tile.
      const u32 lo = e4m3x2(__fmul_rn(element<BF16>(vr[0], e), mult), __fmul_rn(element<BF16>(vr[1], e), mult));
      const u32 hi = e4m3x2(__fmul_rn(element<BF16>(vr[2], e), mult), __fmul_rn(element<BF16>(vr[3], e), mult));
      vt[32 * e] = lo | (hi << 16);
    }
  }
  if (a.do_k) {
    float km[8];
    const float *km_at = &sm.km[c];
#pragma unroll
    for (int e = 0; e < 8; ++e) km[e] = CUDA_FLAVOUR ? km_at[e * L::CPR] : 0.0f;
    if (!CUDA_FLAVOUR) {  // triton: k - km rounded to the input dtype, two at a time
      const u32x4 m = *reinterpret_cast<const u32x4 *>(&sm.km_bits[c * 8]);
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        kr[k].x = sub2<BF16>(kr[k].x, m.x); kr[k].y = sub2<BF16>(kr[k].y, m.y);
        kr[k].z = sub2<BF16>(kr[k].z, m.z); kr[k].w = sub2<BF16>(kr[k].w, m.w);
      }
    }
    quantize_tile_int8<D, BF16, CUDA_FLAVOUR, CUDA_FLAVOUR>(
        kr, km, a.k_int8 + it.kq_head, a.kq_sn, a.k_scale + (i64)it.bh * a.k_groups,
        a.n_tokens, it.row0, a.geo, a.k_groups, sm.quant, tid);
  }
  if (a.do_v) {
    if (!a.do_k) __syncthreads();  // (with K, quantize_tile_int8's barriers order the tile writes)
    u8 *out = a.v_fp8 + (i64)it.bh * D * a.n_pad;
#pragma unroll
    for (u32 i = 0; i < D * 8 / L::THREADS; ++i) {
      const u32 idx = tid + L::THREADS * i, group = idx % 8, ch = idx / 8;
      u32x4 w = *reinterpret_cast<const u32x4 *>(&sm.u.vt[vt_word(ch, 4 * group)]);
      if (a.permute_v) w = permute16(w);
      const int p0 = it.row0 + 16 * (int)group;
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
    u32 *km_word, u32 *vmult_word, int n_tokens, int heads, int batch, int lag, int do_k, int do_v, double inv_n) {
  __shared__ KVSmem<D> sm;
  __shared__ KVItem s_item[2];
  const KVArgs a = {k, k_sb, k_sh, k_sn, v, v_sb, v_sh, v_sn, k_int8, kq_sb, kq_sh, kq_sn,
                    k_scale, k_groups, {tile_shift, per_tile_shift, mod_mask, div_shift}, km, v_fp8, v_scale,
                    n_pad, v_scale_max, inv_v_scale_max, permute_v, workspace_ints, workspace_ints + 1, k_sum,
                    v_amax, km_word, vmult_word, n_tokens, heads, batch, lag, do_k, do_v, inv_n};
  const int items_per_head = (a.n_tokens + QUANT_ROWS - 1) / QUANT_ROWS;
  const int n_items = items_per_head * a.heads * a.batch;
  if (threadIdx.x < QUANT_MAX_GROUPS) sm.quant.amax[threadIdx.x] = 0u;
  if (threadIdx.x == 0) s_item[0] = decode_ticket(a, atomicAdd(a.ticket, 1), items_per_head, n_items);
  __syncthreads();
  for (int i = 0;; ++i) {
    // s_item is double-buffered: thread 0 takes the next ticket as the item starts and
    // writes it, decoded, into the other slot as the item ends; the barrier at the end
    // separates the two uses.
    const KVItem &it = s_item[i & 1];  // read where used: nothing of it held across the item
    if (it.kind == KV_END) break;
    const u32 tid = quant_tid();
    int next = 0;
    if (tid == 0) next = atomicAdd(a.ticket, 1);
    if (it.kind == KV_APPLY) {
      apply_item<D, BF16, CUDA_FLAVOUR>(a, it, tid, sm);
    } else {
      stats_item<D, BF16>(a, it, items_per_head, tid, sm);
    }
    if (tid == 0) s_item[(i + 1) & 1] = decode_ticket(a, next, items_per_head, n_items);
    __syncthreads();  // also: the item's shared memory is free for the next one
  }
}
