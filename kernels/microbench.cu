// Microbenchmarks of the units that decide an 8-bit attention kernel on Hopper (Phase 1).
//
// Contract stages: none (these measure hardware, not attention).
// Geometry: one CTA per SM, every thread runs independent chains; thread 0 of each CTA
// records the SM clocks the CTA took, so each kernel reports ops per clock per SM,
// independent of the clock frequency the card runs at.
// Targets: sm_89, sm_90, sm_90a, sm_120a, sm_121a (wgmma lives in microbench_wgmma.cu, sm_90a only).
//
// Every kernel takes (int iters, unsigned long long* cycles, float* sink) and writes
// cycles[blockIdx.x] and one value per thread into sink so nothing is optimised away.

#include "microbench_clock.cuh"

#define CHAINS 8

extern "C" __global__ void bench_ex2(int iters, unsigned long long* cycles, float* sink) {
  float x[CHAINS];
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) x[c] = 0.001f * (threadIdx.x + c);
  const unsigned long long start = block_clock_start();
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x[c]));
  }
  block_clock_stop(start, cycles);
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) s += x[c];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// cvt.rn.f32.s32, the int32 score -> fp32 conversion a kernel does once per score.
extern "C" __global__ void bench_cvt_s32_f32(int iters, unsigned long long* cycles, float* sink) {
  int v[CHAINS];
  float acc[CHAINS];
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) { v[c] = threadIdx.x * CHAINS + c; acc[c] = 0.f; }
  const unsigned long long start = block_clock_start();
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) {
      float f;
      asm volatile("cvt.rn.f32.s32 %0, %1;" : "=f"(f) : "r"(v[c]));
      acc[c] += f;
      v[c] += 3;
    }
  }
  block_clock_stop(start, cycles);
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) s += acc[c];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// The float-bias conversion: for |v| < 2^22, as_float(v + 0x4B400000) - 1.5 * 2^23 == (float)v.
// An integer add and a float add, no conversion unit.
extern "C" __global__ void bench_magic_s32_f32(int iters, unsigned long long* cycles, float* sink) {
  int v[CHAINS];
  float acc[CHAINS];
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) { v[c] = threadIdx.x * CHAINS + c; acc[c] = 0.f; }
  const unsigned long long start = block_clock_start();
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) {
      acc[c] += __int_as_float(v[c] + 0x4B400000) - 12582912.0f;
      v[c] += 3;
    }
  }
  block_clock_stop(start, cycles);
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) s += acc[c];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// exp2 and cvt interleaved: if they share one unit the pair runs at half the rate of either.
extern "C" __global__ void bench_ex2_and_cvt(int iters, unsigned long long* cycles, float* sink) {
  float x[CHAINS], acc[CHAINS];
  int v[CHAINS];
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) { x[c] = 0.001f * (threadIdx.x + c); v[c] = threadIdx.x + c; acc[c] = 0.f; }
  const unsigned long long start = block_clock_start();
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) {
      float f;
      asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x[c]));
      asm volatile("cvt.rn.f32.s32 %0, %1;" : "=f"(f) : "r"(v[c]));
      acc[c] += f;
      v[c] += 3;
    }
  }
  block_clock_stop(start, cycles);
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) s += x[c] + acc[c];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// Two fp32 values to two packed e4m3 (P to fp8): one instruction per two scores.
extern "C" __global__ void bench_cvt_e4m3x2(int iters, unsigned long long* cycles, float* sink) {
  float a[CHAINS];
  unsigned int acc = 0;
#pragma unroll
  for (int c = 0; c < CHAINS; ++c) a[c] = 0.37f * (threadIdx.x + c + 1);
  const unsigned long long start = block_clock_start();
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < CHAINS; ++c) {
      unsigned short packed;
      asm volatile("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(packed) : "f"(a[c]), "f"(a[c] + 1.0f));
      acc += packed;
      a[c] += 0.5f;
    }
  }
  block_clock_stop(start, cycles);
  sink[blockIdx.x * blockDim.x + threadIdx.x] = (float)acc;
}

// mma.sync m16n8k32 int8 -> int32, four independent accumulators per warp.
extern "C" __global__ void bench_mma_sync_s8(int iters, unsigned long long* cycles, float* sink) {
  unsigned int a[4] = {threadIdx.x, threadIdx.x * 3u, 7u, 11u}, b[2] = {threadIdx.x * 5u, 13u};
  int d[4][4] = {};
  const unsigned long long start = block_clock_start();
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      asm volatile(
          "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
          : "+r"(d[c][0]), "+r"(d[c][1]), "+r"(d[c][2]), "+r"(d[c][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
  }
  block_clock_stop(start, cycles);
  int s = 0;
#pragma unroll
  for (int c = 0; c < 4; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = (float)s;
}

// mma.sync m16n8k32 e4m3 x e4m3 -> fp32 (sm_89 and later). sm_90 has no such instruction: ptxas
// widens each into two HMMA.16816 from a zero accumulator plus an FADD of the old one, so with
// loop-invariant operands it hoists the HMMAs and the loop times FADDs (what the first H200 run
// of this bench measured), and it shares one product among chains with equal operands. A byte
// rotation of one A and one B register per iteration, and a different A per chain, keep the
// operands changing as they do in the kernel: on sm_90 the rate then includes the widening.
extern "C" __global__ void bench_mma_sync_e4m3(int iters, unsigned long long* cycles, float* sink) {
  unsigned int a[4] = {0x38383838u, 0x30303030u, 0x28282828u, 0x3838u}, b[2] = {0x38303830u, 0x28383038u};
  float d[4][4] = {};
  const unsigned long long start = block_clock_start();
  for (int i = 0; i < iters; ++i) {
    a[0] = __byte_perm(a[0], 0, 0x0321);
    b[0] = __byte_perm(b[0], 0, 0x0321);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      asm volatile(
          "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
          : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
          : "r"(a[0] + c), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
  }
  block_clock_stop(start, cycles);
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < 4; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
}

// mma.sync m16n8k32 e4m3 x e4m3 -> f16 accumulator: the P.V instruction of the fp16 inner accumulator
// (pv_accum fp32+fp16, SageAttention2++'s choice on sm_120/sm_121, where consumer Blackwell is said to run it
// at twice the rate of the fp32-accumulating form above; this bench beside bench_mma_sync_e4m3 measures the
// ratio). Operands change as in bench_mma_sync_e4m3; on sm_90 ptxas widens it to f16 HMMA.
extern "C" __global__ void bench_mma_sync_e4m3_f16acc(int iters, unsigned long long* cycles, float* sink) {
  unsigned int a[4] = {0x38383838u, 0x30303030u, 0x28282828u, 0x3838u}, b[2] = {0x38303830u, 0x28383038u};
  unsigned int d[4][2] = {};
  const unsigned long long start = block_clock_start();
  for (int i = 0; i < iters; ++i) {
    a[0] = __byte_perm(a[0], 0, 0x0321);
    b[0] = __byte_perm(b[0], 0, 0x0321);
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      asm volatile(
          "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};"
          : "+r"(d[c][0]), "+r"(d[c][1])
          : "r"(a[0] + c), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
  }
  block_clock_stop(start, cycles);
  unsigned int s = 0;
#pragma unroll
  for (int c = 0; c < 4; ++c) s ^= d[c][0] ^ d[c][1];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = (float)s;
}

// mma.sync m16n8k16 f16 x f16 -> fp32, four accumulators per warp: the P.V instruction of the
// portable kernel on sm_90 (operands widened from e4m3 in the source, kernels/attn_mma.cu).
extern "C" __global__ void bench_mma_sync_f16(int iters, unsigned long long* cycles, float* sink) {
  unsigned int a[4] = {0x3c003800u, 0x34003000u, 0x2c003c00u, 0x3800u}, b[2] = {0x38003c00u, 0x30003400u};
  float d[4][4] = {};
  const unsigned long long start = block_clock_start();
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int c = 0; c < 4; ++c) {
      asm volatile(
          "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
          : "+f"(d[c][0]), "+f"(d[c][1]), "+f"(d[c][2]), "+f"(d[c][3])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
  }
  block_clock_stop(start, cycles);
  float s = 0.f;
#pragma unroll
  for (int c = 0; c < 4; ++c) s += d[c][0] + d[c][1] + d[c][2] + d[c][3];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = s;
}
