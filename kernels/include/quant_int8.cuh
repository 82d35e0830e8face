// Contract stage 2 for one chunk of QUANT_ROWS tokens: symmetric INT8 with one
// float32 scale per group of tokens, both flavours, optional K smoothing (stage 1).
//
// A group is described by GroupGeometry: group(r) = (r / tile) * per_tile + (r % mod) / div,
//   per_warp  (Q or K):  tile = WARPQ or BLKK, per_tile 1, mod 1, div 1
//   per_thread Q:        tile = WARPQ, per_tile 8, mod 8, div 1   (row % 8 shares a scale)
//   per_thread K:        tile = WARPK, per_tile 4, mod 8, div 2   ((row % 8) / 2 shares a scale)
// Every tile size divides QUANT_ROWS = 128, so a chunk closes all of its groups.
//
// Rounding follows sagelib/contract/quantize.py bit for bit: IEEE division and
// multiplication (no fast math), so the int8 values and the scales are equal.
#pragma once
#include "common.cuh"
#include "convert.cuh"

#define QUANT_ROWS 128
#define QUANT_THREADS 256
#define QUANT_MAX_GROUPS 64

struct GroupGeometry {
  int tile, per_tile, mod, div;
};

SAGE_DEVICE int group_of(int row, GroupGeometry g) { return (row / g.tile) * g.per_tile + (row % g.mod) / g.div; }

SAGE_DEVICE int groups_per_chunk(GroupGeometry g) { return (QUANT_ROWS / g.tile) * g.per_tile; }

SAGE_DEVICE u32 pack_s8x4(int a, int b, int c, int d) {
  return (u32)(a & 0xff) | ((u32)(b & 0xff) << 8) | ((u32)(c & 0xff) << 16) | ((u32)(d & 0xff) << 24);
}

SAGE_DEVICE int clamp_s8(int v) { return v < -128 ? -128 : (v > 127 ? 127 : v); }

template <bool CUDA_FLAVOUR>
SAGE_DEVICE int quantize_value(float x, float scale, float mult) {
  if (CUDA_FLAVOUR) {
    return clamp_s8(__float2int_rn(__fmul_rn(x, mult)));  // rne(x * (127 / amax))
  }
  const float ratio = __fdiv_rn(x, scale);  // trunc(x / scale + 0.5 * sign)
  return clamp_s8(__float2int_rz(__fadd_rn(ratio, ratio >= 0.0f ? 0.5f : -0.5f)));
}

struct QuantSmem {
  u32 amax[QUANT_MAX_GROUPS];
  float scale[QUANT_MAX_GROUPS];
  float mult[QUANT_MAX_GROUPS];
};

// Quantize rows [row0, row0 + 128) of one (batch, head). `x` and `xq` point at
// token 0 of the head, token strides in elements; `scale_out` at group 0 of the
// head. With SMOOTH, `km` (shared, D floats) holds the k mean already rounded to
// the input dtype. Called by all QUANT_THREADS threads of the block.
template <int D, bool BF16, bool CUDA_FLAVOUR, bool SMOOTH>
SAGE_DEVICE void quantize_chunk_int8(const u16 *__restrict__ x, i64 x_stride, i8 *__restrict__ xq, i64 xq_stride,
                                     float *__restrict__ scale_out, int n_tokens, int row0, GroupGeometry geo,
                                     int n_groups, const float *km, QuantSmem &sm) {
  constexpr int CPR = D / 8;                              // 16-byte chunks per row
  constexpr int VPT = QUANT_ROWS * CPR / QUANT_THREADS;  // chunks per thread
  const int tid = threadIdx.x;
  const int n_local_groups = groups_per_chunk(geo);
  if (tid < n_local_groups) sm.amax[tid] = 0u;
  __syncthreads();

  // All loads first: the shared-memory atomics below would otherwise keep the
  // compiler from issuing load i+1 before atomic i (one DRAM round trip per chunk).
  u32x4 raw[VPT];
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int row = row0 + (i * QUANT_THREADS + tid) / CPR;
    raw[i] = u32x4{0u, 0u, 0u, 0u};
    if (row < n_tokens) raw[i] = *reinterpret_cast<const u32x4 *>(x + row * x_stride + (tid % CPR) * 8);
  }
  float v[VPT][8];
#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int lin = i * QUANT_THREADS + tid;
    const int r = lin / CPR, c = lin % CPR;
    const int row = row0 + r;
    const u32 w[4] = {raw[i].x, raw[i].y, raw[i].z, raw[i].w};
    float amax = 0.0f;
#pragma unroll
    for (int e = 0; e < 8; ++e) {
      float f = bits_to_float<BF16>((u16)(w[e / 2] >> (16 * (e % 2))));
      if (SMOOTH && row < n_tokens) {  // rows past N stay 0: they belong to no group's amax
        const float d = f - km[c * 8 + e];
        f = CUDA_FLAVOUR ? d : round_through<BF16>(d);
      }
      v[i][e] = f;
      amax = fmaxf(amax, fabsf(f));
    }
#pragma unroll
    for (int off = CPR / 2; off > 0; off >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, off));
    if (c == 0) atomicMax(&sm.amax[group_of(r, geo)], __float_as_uint(amax));
  }
  __syncthreads();

  if (tid < n_local_groups) {
    // The contract (quantize_groups): "amax / 127" is amax times fl32(1/127), as GPU
    // code divides by a constant; "127 / amax" is correctly rounded.
    const float inv127 = __uint_as_float(0x3c010204u);  // fl32(1 / 127)
    float amax = __uint_as_float(sm.amax[tid]);
    float scale, mult = 0.0f;
    if (CUDA_FLAVOUR) {
      amax = fmaxf(amax, 1e-7f);
      scale = __fmul_rn(amax, inv127);
      mult = __fdiv_rn(127.0f, amax);
    } else {
      scale = __fadd_rn(__fmul_rn(amax, inv127), 1e-7f);
    }
    sm.scale[tid] = scale;
    sm.mult[tid] = mult;
    const int g = (row0 / geo.tile) * geo.per_tile + tid;
    if (g < n_groups) scale_out[g] = scale;
  }
  __syncthreads();

#pragma unroll
  for (int i = 0; i < VPT; ++i) {
    const int lin = i * QUANT_THREADS + tid;
    const int r = lin / CPR, c = lin % CPR;
    const int row = row0 + r;
    const int g = group_of(r, geo);
    const float scale = sm.scale[g], mult = sm.mult[g];
    int q[8];
#pragma unroll
    for (int e = 0; e < 8; ++e) q[e] = quantize_value<CUDA_FLAVOUR>(v[i][e], scale, mult);
    if (row < n_tokens) {
      u32x2 out = {pack_s8x4(q[0], q[1], q[2], q[3]), pack_s8x4(q[4], q[5], q[6], q[7])};
      *reinterpret_cast<u32x2 *>(xq + row * xq_stride + c * 8) = out;
    }
  }
  __syncthreads();  // the caller may reuse `sm` for the next chunk
}
