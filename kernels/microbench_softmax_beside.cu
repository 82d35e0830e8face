// The Hopper kernel's softmax step beside another warpgroup's tensor-core work (Phase 1
// diagnosis): in the attention kernel a consumer's softmax phase takes ~1,180 cycles per
// 64 x 128 tile, against ~810 when the same code runs alone (microbench_softmax.cu). This
// measures how much of that the other consumer's wgmma batch and fold add by themselves.
//
// Contract stages: 3-5 as the sm_90a kernel runs them (attn_sm90/softmax.cuh), on
// synthetic INT32 scores; the wgmma operands are arbitrary bytes (only timing matters).
// Geometry: one CTA per SM, 256 threads. Warpgroup 0 runs `iters` softmax steps (one
// 64 x 128 tile per step, as microbench_softmax.cu) and times them (thread 0, SM clocks).
// Warpgroup 1 runs, until warpgroup 0 is done, back-to-back batches of the kind `beside` names:
//   0  nothing (it waits at the final barrier)
//   1  Q.K^T: 4 int8 m64n128k32 from shared memory into 64 int32 registers, then the wait
//   2  P.V: 4 e4m3 m64n128k32, A (P) from registers, V^T from shared memory, 64 fp32 registers
//   3  the kernel's batch: P.V of one block and Q.K^T of the next, issued together, one wait
//   4  3, then the fold (O = O * alpha + inner: 64 FFMA per thread), as a consumer does
//   5  the fold alone (64 FFMA per thread per batch, no tensor-core work)
//   6  the head_dim-64 kernel's batch: P.V as 4 e4m3 m64n64k32 (32 fp32 registers), Q.K^T as
//      2 int8 m64n128k32, one wait
//   7  Q.K^T batches whose 4 steps each start a fresh accumulator (scale-d 0, a value the compiler
//      cannot see, so it keeps all four): the same operations without the accumulator read-back
//   8  P.V batches with P from shared memory as well (both operands by descriptor)
// and counts its batches, so the tensor cores' share of the time is known as well. With
// `softmax_off`, warpgroup 0 sleeps for as long as its steps would take instead (iters x 820
// cycles), which gives each batch kind's rate with nothing beside it.
// Targets: sm_90a only (wgmma).
#include "hopper/warpgroup_regs.cuh"
#include "hopper/wgmma.cuh"
#include "microbench_softmax_step.cuh"

#define BESIDE_NOTHING 0
#define BESIDE_QK 1
#define BESIDE_PV 2
#define BESIDE_BATCH 3
#define BESIDE_BATCH_FOLD 4
#define BESIDE_FOLD 5
#define BESIDE_BATCH_D64 6
#define BESIDE_QK_FRESH 7
#define BESIDE_PV_SHARED 8
#define SOFTMAX_STEP_ALONE 820  // cycles of one step alone on the H200 (`sagelib study` microbench runs)

struct BesideSmem {
  alignas(1024) u8 q[64 * 128];    // 64 rows of 128 int8 channels
  alignas(1024) u8 k[128 * 128];   // 128 keys of 128 int8 channels
  alignas(1024) u8 vt[128 * 128];  // V^T: 128 channels of 128 e4m3 keys
  int done;
};

// Named barrier ids (barrier 0 is __syncthreads).
enum BesideBarrier : int {
  BESIDE_BARRIER_SOFTMAX = 1,  // the softmax warpgroups' start and end of the timed steps
  BESIDE_BARRIER_BATCHES = 2,  // the batch warpgroup's vote to leave its loop together (warpgroup_any)
};

// The softmax warpgroups (`threads` of them: 128 or 256) meet at BESIDE_BARRIER_SOFTMAX.
SAGE_DEVICE void softmax_barrier(int threads) {
  asm volatile("bar.sync %0, %1;" ::"n"(int(BESIDE_BARRIER_SOFTMAX)), "r"(threads) : "memory");
}

// Warpgroups 0 .. threads / 128 - 1: the softmax steps, timed between barriers of their own threads.
SAGE_DEVICE void timed_softmax_steps(int iters, unsigned long long *cycles, float *sink, int threads) {
  softmax_barrier(threads);
  const unsigned long long start = clock64();
  const float kept = sm90_softmax_steps(iters);
  softmax_barrier(threads);
  if (threadIdx.x == 0) cycles[blockIdx.x] = clock64() - start;
  sink[blockIdx.x * blockDim.x + threadIdx.x] = kept;
}

// The same warpgroups with `softmax_off`: asleep for as long as `iters` lone steps take, timed the same way.
SAGE_DEVICE void timed_sleep(int iters, unsigned long long *cycles, int threads) {
  softmax_barrier(threads);
  const unsigned long long start = clock64(), end = start + (unsigned long long)iters * SOFTMAX_STEP_ALONE;
  while (clock64() < end) __nanosleep(500);
  softmax_barrier(threads);
  if (threadIdx.x == 0) cycles[blockIdx.x] = clock64() - start;
}

// P.V's instruction with P from shared memory too (kind 8): e4m3 x e4m3 -> fp32, both operands by descriptor.
template <bool ACCUMULATE>
SAGE_DEVICE void wgmma_m64n128k32_f32_e4m3_e4m3_ss(float (&o)[64], u64 desc_p, u64 desc_vt) {
  SAGE_WGMMA(ACCUMULATE, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 ",
             SAGE_ACC64_OPERANDS ", %64, %65, keep, 1, 1;", 66, SAGE_IO64, o, SAGE_INOUT_F32, SAGE_OUT_F32,
             "l"(desc_p), "l"(desc_vt));
}

// Q.K^T's instruction with its scale-d flag as a run-time value (kind 7): 0 ignores the accumulator's
// old contents. With a compile-time 0 ptxas sees the first three of four steps overwritten unread and
// drops them.
SAGE_DEVICE void wgmma_m64n128k32_s32_s8_s8_scale_d(i32 (&s)[64], u64 desc_q, u64 desc_k, int scale_d) {
  asm volatile("{\n .reg .pred keep;\n setp.ne.b32 keep, %66, 0;\n wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 "
               SAGE_ACC64_OPERANDS ", %64, %65, keep;\n}\n"
               : SAGE_IO64(SAGE_INOUT_S32, s)
               : "l"(desc_q), "l"(desc_k), "r"(scale_d));
}

// Q.K^T's STEPS k32 steps into the fresh accumulator s (int8, both operands from shared memory).
template <int STEPS>
SAGE_DEVICE void qk_steps(i32 (&s)[64], u64 desc_q, u64 desc_k) {
#pragma unroll
  for (int kk = 0; kk < STEPS; ++kk) {
    const u64 q_step = wgmma_desc_advance(desc_q, 32 * kk), k_step = wgmma_desc_advance(desc_k, 32 * kk);
    if (kk == 0) wgmma_m64n128k32_s32_s8_s8<false>(s, q_step, k_step);
    else wgmma_m64n128k32_s32_s8_s8<true>(s, q_step, k_step);
  }
}

// P.V's 4 k32 steps over D channels into the fresh accumulator inner (P from registers).
template <int D>
SAGE_DEVICE void pv_steps(float (&inner)[D / 2], const u32 (&p)[4][4], u64 desc_v) {
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    if (k == 0) wgmma_pv_step<D, false>(inner, p[k], desc_v);
    else wgmma_pv_step<D, true>(inner, p[k], wgmma_desc_advance(desc_v, 32 * k));
  }
}

// True in every thread of the calling warpgroup when `flag` is non-zero in any of them (BESIDE_BARRIER_BATCHES,
// 128 threads): the warpgroup leaves its loop together, since a wgmma needs all four warps.
SAGE_DEVICE bool warpgroup_any(int flag) {
  int any;
  asm volatile("{\n .reg .pred p, q;\n setp.ne.s32 p, %1, 0;\n bar.red.or.pred q, %2, 128, p;\n selp.s32 %0, 1, 0, q;\n}"
               : "=r"(any) : "r"(flag), "n"(int(BESIDE_BARRIER_BATCHES)) : "memory");
  return any != 0;
}

// Warpgroup 1: batches of kind BESIDE until warpgroup 0 raises `done`; returns how many. The kind is
// a template argument so that each loop body is straight-line code: a wgmma behind a branch makes
// ptxas wait for every wgmma separately.
template <int BESIDE>
SAGE_DEVICE int tensor_batches(BesideSmem &smem, float *sink) {
  const u64 desc_q = wgmma_desc_k_major<128>(smem.q), desc_k = wgmma_desc_k_major<128>(smem.k);
  const u64 desc_v = wgmma_desc_k_major<128>(smem.vt);
  i32 s[64];
  float inner[64], o[64];
  u32 p[4][4];
#pragma unroll
  for (int i = 0; i < 64; ++i) { s[i] = 0; inner[i] = 0.0f; o[i] = 1.0f; }
#pragma unroll
  for (int k = 0; k < 4; ++k)
#pragma unroll
    for (int w = 0; w < 4; ++w) p[k][w] = 0x38383838u + threadIdx.x + k * 4 + w;  // e4m3 1.0 and neighbours
  const float alpha = 0.999f;
  int batches = 0;
  constexpr bool pv = BESIDE == BESIDE_PV || BESIDE == BESIDE_BATCH || BESIDE == BESIDE_BATCH_FOLD;
  constexpr bool qk = BESIDE == BESIDE_QK || BESIDE == BESIDE_BATCH || BESIDE == BESIDE_BATCH_FOLD;
  constexpr bool d64 = BESIDE == BESIDE_BATCH_D64;
  constexpr bool other = BESIDE == BESIDE_QK_FRESH || BESIDE == BESIDE_PV_SHARED;
  const int fresh = *reinterpret_cast<volatile int *>(&smem.done);  // 0: warpgroup 0 has just started its steps
  while (!warpgroup_any(*reinterpret_cast<volatile int *>(&smem.done))) {
    if constexpr (pv || qk || d64 || other) wgmma_fence();
    if constexpr (BESIDE == BESIDE_QK_FRESH) {
#pragma unroll
      for (int kk = 0; kk < 4; ++kk)
        wgmma_m64n128k32_s32_s8_s8_scale_d(s, wgmma_desc_advance(desc_q, 32 * kk), wgmma_desc_advance(desc_k, 32 * kk),
                                           fresh);
    }
    if constexpr (BESIDE == BESIDE_PV_SHARED) {
#pragma unroll
      for (int k = 0; k < 4; ++k) {
        const u64 p_step = wgmma_desc_advance(desc_q, 32 * k), v_step = wgmma_desc_advance(desc_v, 32 * k);
        if (k == 0) wgmma_m64n128k32_f32_e4m3_e4m3_ss<false>(inner, p_step, v_step);
        else wgmma_m64n128k32_f32_e4m3_e4m3_ss<true>(inner, p_step, v_step);
      }
    }
    if constexpr (d64) {
      pv_steps<64>(*reinterpret_cast<float(*)[32]>(inner), p, desc_v);
      qk_steps<2>(s, desc_q, desc_k);
    }
    if constexpr (pv) pv_steps<128>(inner, p, desc_v);
    if constexpr (qk) qk_steps<4>(s, desc_q, desc_k);
    if constexpr (pv || qk || d64 || other) {
      wgmma_commit();
      wgmma_wait<0>();
      wgmma_pin(inner);
      wgmma_pin(s);
    }
    if constexpr (BESIDE == BESIDE_BATCH_FOLD || BESIDE == BESIDE_FOLD) {
#pragma unroll
      for (int i = 0; i < 64; ++i) o[i] = fmaf(o[i], alpha, inner[i]);
      if constexpr (BESIDE == BESIDE_FOLD) wgmma_pin(o);  // a fold per batch, as far as the compiler knows
    }
    ++batches;
  }
  float keep = 0.0f;
#pragma unroll
  for (int i = 0; i < 64; ++i) keep += o[i] + inner[i] + __int_as_float(s[i] & 0x3fffffff);
  sink[blockIdx.x * blockDim.x + threadIdx.x] = keep;
  return batches;
}

// The CTA: SOFTMAX_WARPGROUPS warpgroups of softmax steps, then one warpgroup of batches of kind `beside`.
template <int SOFTMAX_WARPGROUPS>
SAGE_DEVICE void softmax_beside(int iters, int beside, int softmax_off, unsigned long long *cycles, int *batches,
                                float *sink) {
  constexpr int SOFTMAX_THREADS = 128 * SOFTMAX_WARPGROUPS;
  __shared__ BesideSmem smem;
  u8 *bytes = reinterpret_cast<u8 *>(&smem);
  const int tiles = static_cast<int>(reinterpret_cast<u8 *>(&smem.done) - bytes);  // q, k and vt
  for (int i = threadIdx.x; i < tiles; i += blockDim.x) bytes[i] = (i * 37 + 11) & 0x3f;
  if (threadIdx.x == 0) smem.done = 0;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x < SOFTMAX_THREADS) {
    // two softmax warpgroups give registers to the batch warpgroup: at 168 each, ptxas would serialise its
    // wgmma (C7512); the pool of 168 x 384 holds 2 x 128 x 128 + 128 x 240
    if constexpr (SOFTMAX_WARPGROUPS == 2) warpgroup_regs_release<128>();
    if (softmax_off) timed_sleep(iters, cycles, SOFTMAX_THREADS);
    else timed_softmax_steps(iters, cycles, sink, SOFTMAX_THREADS);
    if (threadIdx.x == 0) *reinterpret_cast<volatile int *>(&smem.done) = 1;
  } else if (beside != BESIDE_NOTHING) {
    if constexpr (SOFTMAX_WARPGROUPS == 2) warpgroup_regs_claim<240>();
    int n = 0;
    if constexpr (SOFTMAX_WARPGROUPS == 1) {
      switch (beside) {
        case BESIDE_QK: n = tensor_batches<BESIDE_QK>(smem, sink); break;
        case BESIDE_PV: n = tensor_batches<BESIDE_PV>(smem, sink); break;
        case BESIDE_BATCH: n = tensor_batches<BESIDE_BATCH>(smem, sink); break;
        case BESIDE_BATCH_FOLD: n = tensor_batches<BESIDE_BATCH_FOLD>(smem, sink); break;
        case BESIDE_BATCH_D64: n = tensor_batches<BESIDE_BATCH_D64>(smem, sink); break;
        case BESIDE_QK_FRESH: n = tensor_batches<BESIDE_QK_FRESH>(smem, sink); break;
        case BESIDE_PV_SHARED: n = tensor_batches<BESIDE_PV_SHARED>(smem, sink); break;
        default: n = tensor_batches<BESIDE_FOLD>(smem, sink); break;
      }
    } else {  // 168 registers a thread at 384 threads: the kinds without the fold's 64 O registers
      switch (beside) {
        case BESIDE_BATCH: n = tensor_batches<BESIDE_BATCH>(smem, sink); break;
        default: n = tensor_batches<BESIDE_BATCH_D64>(smem, sink); break;
      }
    }
    if (threadIdx.x == SOFTMAX_THREADS) batches[blockIdx.x] = n;
  }
  __syncthreads();
}

// One softmax warpgroup (one warp per scheduler) beside one of batches: 256 threads.
extern "C" __global__ void __launch_bounds__(256, 1)
    bench_sm90_softmax_beside(int iters, int beside, int softmax_off, unsigned long long *cycles, int *batches,
                              float *sink) {
  softmax_beside<1>(iters, beside, softmax_off, cycles, batches, sink);
}

// Two softmax warpgroups side by side (two warps per scheduler) beside one of batches: 384 threads;
// `beside` is BESIDE_NOTHING, BESIDE_BATCH or BESIDE_BATCH_D64.
extern "C" __global__ void __launch_bounds__(384, 1)
    bench_sm90_two_softmaxes_beside(int iters, int beside, int softmax_off, unsigned long long *cycles, int *batches,
                                    float *sink) {
  softmax_beside<2>(iters, beside, softmax_off, cycles, batches, sink);
}
