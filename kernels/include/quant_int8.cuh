// Contract stage 2 for one tile of ROWS tokens (QUANT_ROWS = 128 for K/V; the Q kernel's blocks take 64): symmetric
// INT8 with one float32 scale per group of tokens, both flavours, optional K smoothing (stage 1).
//
// Thread layout (the "quad" layout, shared with quant_kv.cu): a block has
// ROWS * D / 32 threads (4 * D at 128 rows) and each thread owns one 16-byte column chunk
// (8 channels) of 4 consecutive rows (a quad): it issues its 4 loads at once and
// keeps them as raw 16-bit pairs (16 registers). Lane l of a warp takes chunk
// l % 8 (of its warp's half of the row when D = 128) and quad l / 8, so one load
// instruction covers 4 rows x 128 contiguous bytes.
//
// Groups: group(r) = ((r >> tile_shift) << per_tile_shift) + ((r & mod_mask) >> div_shift),
//   per_warp  (Q or K):  tile = WARPQ or BLKK, per_tile 1, mod 1, div 1
//   per_thread Q:        tile = WARPQ, per_tile 8, mod 8, div 1   (row % 8 shares a scale)
//   per_thread K:        tile = WARPK, per_tile 4, mod 8, div 2   ((row % 8) / 2 shares a scale)
// Every tile divides 128 (and every Q tile 64), so a tile of rows closes all of its groups.
//
// Sync (quantize_tile_int8): each row's amax is reduced over its 8 chunk lanes (xor-shuffles) and raised
// into the group's QuantSmem word by shared atomicMax from lane tid % 8 == 0; the first __syncthreads
// makes the words complete before threads < groups-per-tile turn them into scale / mult (and clear them
// for the next tile); the second makes scale / mult visible before every thread quantizes its rows. The
// caller zeroes the amax words once and puts a __syncthreads between that and the first tile.
// Targets: sm_89, sm_90, sm_120a, sm_121a (plain CUDA).
//
// Rounding follows sagelib/contract/quantize.py bit for bit, without a division
// or a float-to-int conversion per element (both run on the 16-per-clock unit):
//   cuda flavour:   q = rne(x * (127 / amax)); |x * mult| <= 127.00002, so rne is
//                   the magic-number add (x*m + 1.5 * 2^23: the low byte of the
//                   sum's bits is q in two's complement) and no clamp can bite.
//   triton flavour: q = trunc(RN(RN(x / s) + 0.5 sign)). With y = RN(x * RN(1 / s)),
//                   |y - x/s| <= 2^-16 and |RN(x/s) - x/s| <= 2^-17 (|x/s| < 128), so
//                   unless y lies within 2^-14 of a half-integer, q = rne(y) (same
//                   magic add). Values that close (about 1 row in 1000 has one) are
//                   decided exactly by triton_near_half (one fp64 fma, no division).
#pragma once
#include "common.cuh"
#include "convert.cuh"
#include "quant_memory.cuh"
#include "quant_packed.cuh"

#define QUANT_ROWS 128
#define QUANT_MAX_GROUPS 64
// Resident threads per SM the kernels are register-limited for (__launch_bounds__ min
// blocks = this / (4 * D)): 1024 -> at most 64 registers. Why 1024: tighter caps for more blocks per SM
// were level or slower on the H200, and the K/V kernel spills under them.
// (sm_120 / sm_121: ptxas spills the K/V kernel at 64 registers, so it gets 128 there.)
// Two barriers per tile (group amax, then scales) cost less than every thread dividing for its own scales.
#define QUANT_QK_THREADS_PER_SM 1024
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
#define QUANT_KV_THREADS_PER_SM 512
#else
#define QUANT_KV_THREADS_PER_SM 1024
#endif

template <int D, int ROWS = QUANT_ROWS>
struct QuadLayout {
  static_assert(ROWS == 128 || ROWS == 64, "tiles of 128 rows, or 64 (the Q kernel's blocks)");
  static constexpr int THREADS = ROWS * D / 32;  // ROWS rows x D/8 chunks / 4 rows per thread
  static constexpr u32 CPR = D / 8;      // 16-byte chunks per row
  // Column chunk (0 .. CPR-1) and first row (0, 4, .., 124) of this thread. Unsigned, so
  // every / and % is a shift or a mask.
  static SAGE_DEVICE u32 chunk(u32 tid) { return (tid % 8) + 8 * ((tid / 32) % (CPR / 8)); }
  static SAGE_DEVICE u32 row(u32 tid) { return 4 * ((tid / 8) % 4) + 16 * (tid / (4 * CPR)); }
};

// threadIdx.x read afresh: in the persistent K/V loop, values derived from the thread
// index would otherwise be hoisted out of the loop and spilled (register limit 64).
// Read once per item and passed down, so each item pays for one read.
SAGE_DEVICE u32 quant_tid() {
  u32 t;
  asm volatile("mov.u32 %0, %%tid.x;" : "=r"(t));
  return t;
}

struct GroupGeometry {
  int tile_shift, per_tile_shift, mod_mask, div_shift;
};

SAGE_DEVICE int group_of(int row, GroupGeometry g) {
  return ((row >> g.tile_shift) << g.per_tile_shift) + ((row & g.mod_mask) >> g.div_shift);
}

template <int ROWS = QUANT_ROWS>
SAGE_DEVICE int groups_per_tile(GroupGeometry g) { return (ROWS >> g.tile_shift) << g.per_tile_shift; }

struct QuantSmem {
  u32 amax[QUANT_MAX_GROUPS];   // fp32 bits of max |x| (non-negative, so integer order)
  float scale[QUANT_MAX_GROUPS];
  float mult[QUANT_MAX_GROUPS]; // cuda: RN(127 / amax); triton: RN(1 / scale)
};

// The 4 rows of this thread's quad at its chunk; rows at or past n_tokens read as 0.
template <int D, bool STREAM>
SAGE_DEVICE void load_quad(u32x4 (&raw)[4], const u16 *x, i64 stride, int n_tokens, int row0, u32 tid) {
  const int r = row0 + (int)QuadLayout<D>::row(tid);
  const u16 *p = x + (i64)r * stride + QuadLayout<D>::chunk(tid) * 8;
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    raw[k] = u32x4{0u, 0u, 0u, 0u};
    if (r + k < n_tokens) raw[k] = STREAM ? load_stream(p) : load_keep(p);
    p += stride;
  }
}

#define QUANT_MAGIC 12582912.0f  // 1.5 * 2^23: x + MAGIC rounds x to an integer in the low mantissa bits

// Low bytes of four words, packed a..d from the lowest byte.
SAGE_DEVICE u32 pack_low_bytes(u32 a, u32 b, u32 c, u32 d) {
  return byte_perm(byte_perm(a, b, 0x0040u), byte_perm(c, d, 0x0040u), 0x5410u);
}

// The contract's triton rounding where the estimate y = RN(x * RN(1 / s)) lies within
// 2^-14 of a half-integer n + 0.5 (|y| < 128). Then q = sign(x) * (n or n + 1), and
// n + 1 exactly when RN(|x| / s) >= T, T the least float with RN(T + 0.5) >= n + 1:
// T = n + 0.5 for n >= 1, T = pred(0.5) for n = 0 (pred(0.5) + 0.5 is a tie that rounds
// up to 1). RN(|x| / s) >= T exactly when |x| / s is above the midpoint M of pred(T)
// and T, or on it with T even (n >= 1: T's last mantissa bit weighs at most 2^-17, so
// it is 0; n = 0: T is odd). M has 25 bits, M * s 49: one fp64 fma gives the exact
// sign of |x| - M * s. No division, no float-to-int conversion of the value itself.
SAGE_DEVICE u32 triton_near_half(float x, float y, float scale) {
  const int n = __float2int_rz(fabsf(y));
  const float t = n == 0 ? __uint_as_float(0x3effffffu) : __fadd_rn((float)n, 0.5f);
  const float below = __uint_as_float(__float_as_uint(t) - 1u);
  const double mid = __dmul_rn(__dadd_rn((double)t, (double)below), 0.5);  // exact
  const double d = __fma_rn(-mid, (double)scale, (double)fabsf(x));        // sign exact
  int q = n + ((d > 0.0 || (d == 0.0 && n >= 1)) ? 1 : 0);
  q = q > 127 ? 127 : q;
  return (u32)(x < 0.0f ? -q : q);
}

#define QUANT_NEAR_HALF 0.49993896484375f  // 0.5 - 2^-14

// y - rne(y) from the magic sum m = RN(y + MAGIC): exact, in [-0.5, 0.5].
SAGE_DEVICE float rne_remainder(float y, float m) { return __fsub_rn(y, __fsub_rn(m, QUANT_MAGIC)); }

// Value e of a row as the quantizer sees it (SMOOTH_F32: minus km in fp32, the cuda flavour's smoothing).
template <bool BF16, bool SMOOTH_F32>
SAGE_DEVICE float row_value(const u32x4 &w, const float (&km)[8], int e) {
  return SMOOTH_F32 ? __fsub_rn(element<BF16>(w, e), km[e]) : element<BF16>(w, e);
}

// One row piece (8 values) -> 8 int8 (see the header comment for why this is exact).
// The rare triton fix-up recomputes from `w`, so nothing per value stays live across it.
template <bool BF16, bool CUDA_FLAVOUR, bool SMOOTH_F32>
SAGE_DEVICE u32x2 quantize_row(const u32x4 &w, const float (&km)[8], float scale, float mult) {
  u32 b[8];
  bool near_half = false;
#pragma unroll
  for (int e = 0; e < 8; ++e) {
    const float y = __fmul_rn(row_value<BF16, SMOOTH_F32>(w, km, e), mult);
    const float m = __fadd_rn(y, QUANT_MAGIC);
    b[e] = __float_as_uint(m);
    if (!CUDA_FLAVOUR) near_half |= fabsf(rne_remainder(y, m)) > QUANT_NEAR_HALF;
  }
  u32x2 q = {pack_low_bytes(b[0], b[1], b[2], b[3]), pack_low_bytes(b[4], b[5], b[6], b[7])};
  if (!CUDA_FLAVOUR && near_half) {  // about 1 row in 1000
#pragma unroll 1
    for (int e = 0; e < 8; ++e) {
      const float x = row_value<BF16, SMOOTH_F32>(w, km, e);  // (dynamic e: a few selects)
      const float y = __fmul_rn(x, mult);
      if (fabsf(rne_remainder(y, __fadd_rn(y, QUANT_MAGIC))) > QUANT_NEAR_HALF) {
        const u32 byte = triton_near_half(x, y, scale) & 0xffu, shift = 8 * (e % 4);
        u32 &word = e < 4 ? q.x : q.y;
        word = (word & ~(0xffu << shift)) | (byte << shift);
      }
    }
  }
  return q;
}

// max |x| of each row of the quad, over this thread's 8 channels.
// SMOOTH_F32: x = value - km in fp32 (cuda flavour smoothing); otherwise raw values.
template <bool BF16, bool SMOOTH_F32>
SAGE_DEVICE float row_amax(const u32x4 &w, const float (&km)[8]) {
  if (SMOOTH_F32) {
    float a = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) a = fmaxf(a, fabsf(row_value<BF16, true>(w, km, e)));
    return a;
  }
  return packed_max_to_float<BF16>(abs_max8_packed<BF16>(w));
}

// Quantize the tile of rows [row0, row0 + ROWS) of one (batch, head) from `raw`
// (this thread's quad, already loaded; for the triton flavour with smoothing,
// already smoothed with sub2). SMOOTH_F32: subtract `km` in fp32 here (cuda flavour).
// `xq` points at token 0 of the head; `scale_out` at group 0 of the head.
// Called by all threads of the block. On entry sm.amax must be all zero; on exit it is
// zero again, and no thread touches `sm` after this call's second barrier except
// to read sm.scale / sm.mult, so a caller may call again after one barrier of its own.
template <int D, bool BF16, bool CUDA_FLAVOUR, bool SMOOTH_F32, int ROWS = QUANT_ROWS>
SAGE_DEVICE void quantize_tile_int8(const u32x4 (&raw)[4], const float (&km)[8], i8 *__restrict__ xq,
                                    i64 xq_stride, float *__restrict__ scale_out, int n_tokens, int row0,
                                    GroupGeometry geo, int n_groups, QuantSmem &sm, u32 tid) {
  const int r0 = (int)QuadLayout<D>::row(tid);
  const u32 c = QuadLayout<D>::chunk(tid);
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    // Rows past the end belong to no group (with smoothing they would read -km).
    float a = row0 + r0 + k < n_tokens ? row_amax<BF16, SMOOTH_F32>(raw[k], km) : 0.0f;
#pragma unroll
    for (int off = 1; off < 8; off <<= 1) a = fmaxf(a, __shfl_xor_sync(0xffffffffu, a, off));
    if (tid % 8 == 0) atomicMax(&sm.amax[group_of(r0 + k, geo)], __float_as_uint(a));
  }
  __syncthreads();

  const int n_local = groups_per_tile<ROWS>(geo);
  if (tid < (u32)n_local) {
    // The contract (quantize_groups): "amax / 127" is amax times fl32(1/127), as GPU
    // code divides by a constant (fused with the triton flavour's + 1e-7, as ptxas
    // compiles the real Triton quantizer); "127 / amax" is correctly rounded.
    const float inv127 = __uint_as_float(0x3c010204u);  // fl32(1 / 127)
    float amax = __uint_as_float(sm.amax[tid]);
    sm.amax[tid] = 0u;  // ready for the next tile
    float scale, mult;
    if (CUDA_FLAVOUR) {
      amax = fmaxf(amax, 1e-7f);
      scale = __fmul_rn(amax, inv127);
      mult = __fdiv_rn(127.0f, amax);
    } else {
      scale = __fmaf_rn(amax, inv127, 1e-7f);
      mult = __fdiv_rn(1.0f, scale);
    }
    sm.scale[tid] = scale;
    sm.mult[tid] = mult;
    const int g = ((row0 >> geo.tile_shift) << geo.per_tile_shift) + tid;
    if (g < n_groups) scale_out[g] = scale;
  }
  __syncthreads();

  i8 *dst = xq + (i64)(row0 + r0) * xq_stride + c * 8;  // one 64-bit address, advanced per row
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const int g = group_of(r0 + k, geo);
    const u32x2 q = quantize_row<BF16, CUDA_FLAVOUR, SMOOTH_F32>(raw[k], km, sm.scale[g], sm.mult[g]);
    if (row0 + r0 + k < n_tokens) store_stream(dst, q);
    dst += xq_stride;
  }
}
