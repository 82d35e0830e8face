// wgmma throughput on Hopper (Phase 1): int8 and e4m3 m64n128k32 from shared memory.
//
// Contract stages: none (hardware measurement).
// Geometry: one CTA per SM of WARPGROUPS warpgroups; each warpgroup issues chains of
// wgmma on its own 64 accumulator registers, at most two commit groups in flight.
// Operands come from shared-memory descriptors over a zeroed-then-filled buffer; the
// data do not matter for throughput, only that every address is inside the CTA's buffer.
// Targets: sm_90a only.

#include "microbench_clock.cuh"

#define WGMMA_BURST 8

__device__ __forceinline__ unsigned long long smem_descriptor(const void* smem, unsigned lead_bytes,
                                                              unsigned stride_bytes) {
  // no swizzle: start address, leading and stride byte offsets, all in 16-byte units
  const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  return (static_cast<unsigned long long>((addr >> 4) & 0x3FFF)) |
         (static_cast<unsigned long long>((lead_bytes >> 4) & 0x3FFF) << 16) |
         (static_cast<unsigned long long>((stride_bytes >> 4) & 0x3FFF) << 32);
}

__device__ __forceinline__ void fill_operands(unsigned char* smem, int bytes) {
  for (int i = threadIdx.x; i < bytes; i += blockDim.x) smem[i] = static_cast<unsigned char>(i * 37 + 11) & 0x3F;
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
}

// One m64n128k32 wgmma on 64 accumulator registers: int8 -> int32 or e4m3 -> fp32.
__device__ __forceinline__ void wgmma_step(int (&acc)[64], unsigned long long da, unsigned long long db) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17,  "
      "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33,  "
      "%34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49,  "
      "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, 1;\n"
      : "+r"(acc[0]), "+r"(acc[1]), "+r"(acc[2]), "+r"(acc[3]), "+r"(acc[4]), "+r"(acc[5]), "+r"(acc[6]),
        "+r"(acc[7]), "+r"(acc[8]), "+r"(acc[9]), "+r"(acc[10]), "+r"(acc[11]), "+r"(acc[12]),
        "+r"(acc[13]), "+r"(acc[14]), "+r"(acc[15]), "+r"(acc[16]), "+r"(acc[17]), "+r"(acc[18]),
        "+r"(acc[19]), "+r"(acc[20]), "+r"(acc[21]), "+r"(acc[22]), "+r"(acc[23]), "+r"(acc[24]),
        "+r"(acc[25]), "+r"(acc[26]), "+r"(acc[27]), "+r"(acc[28]), "+r"(acc[29]), "+r"(acc[30]),
        "+r"(acc[31]), "+r"(acc[32]), "+r"(acc[33]), "+r"(acc[34]), "+r"(acc[35]), "+r"(acc[36]),
        "+r"(acc[37]), "+r"(acc[38]), "+r"(acc[39]), "+r"(acc[40]), "+r"(acc[41]), "+r"(acc[42]),
        "+r"(acc[43]), "+r"(acc[44]), "+r"(acc[45]), "+r"(acc[46]), "+r"(acc[47]), "+r"(acc[48]),
        "+r"(acc[49]), "+r"(acc[50]), "+r"(acc[51]), "+r"(acc[52]), "+r"(acc[53]), "+r"(acc[54]),
        "+r"(acc[55]), "+r"(acc[56]), "+r"(acc[57]), "+r"(acc[58]), "+r"(acc[59]), "+r"(acc[60]),
        "+r"(acc[61]), "+r"(acc[62]), "+r"(acc[63])
      : "l"(da), "l"(db));
}

__device__ __forceinline__ void wgmma_step(float (&acc)[64], unsigned long long da, unsigned long long db) {
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {"
      "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17,  "
      "%18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33,  "
      "%34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49,  "
      "%50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"
      "}, %64, %65, 1, 1, 1;\n"
      : "+f"(acc[0]), "+f"(acc[1]), "+f"(acc[2]), "+f"(acc[3]), "+f"(acc[4]), "+f"(acc[5]), "+f"(acc[6]),
        "+f"(acc[7]), "+f"(acc[8]), "+f"(acc[9]), "+f"(acc[10]), "+f"(acc[11]), "+f"(acc[12]),
        "+f"(acc[13]), "+f"(acc[14]), "+f"(acc[15]), "+f"(acc[16]), "+f"(acc[17]), "+f"(acc[18]),
        "+f"(acc[19]), "+f"(acc[20]), "+f"(acc[21]), "+f"(acc[22]), "+f"(acc[23]), "+f"(acc[24]),
        "+f"(acc[25]), "+f"(acc[26]), "+f"(acc[27]), "+f"(acc[28]), "+f"(acc[29]), "+f"(acc[30]),
        "+f"(acc[31]), "+f"(acc[32]), "+f"(acc[33]), "+f"(acc[34]), "+f"(acc[35]), "+f"(acc[36]),
        "+f"(acc[37]), "+f"(acc[38]), "+f"(acc[39]), "+f"(acc[40]), "+f"(acc[41]), "+f"(acc[42]),
        "+f"(acc[43]), "+f"(acc[44]), "+f"(acc[45]), "+f"(acc[46]), "+f"(acc[47]), "+f"(acc[48]),
        "+f"(acc[49]), "+f"(acc[50]), "+f"(acc[51]), "+f"(acc[52]), "+f"(acc[53]), "+f"(acc[54]),
        "+f"(acc[55]), "+f"(acc[56]), "+f"(acc[57]), "+f"(acc[58]), "+f"(acc[59]), "+f"(acc[60]),
        "+f"(acc[61]), "+f"(acc[62]), "+f"(acc[63])
      : "l"(da), "l"(db));
}

// Bursts of WGMMA_BURST wgmma, at most two commit groups in flight, timed between barriers.
template <typename Acc>
__device__ __forceinline__ void bench_wgmma(int iters, unsigned long long* cycles, float* sink) {
  __shared__ __align__(128) unsigned char operands[16384];
  fill_operands(operands, sizeof(operands));
  const unsigned long long da = smem_descriptor(operands, 128, 256);
  const unsigned long long db = smem_descriptor(operands + 4096, 128, 256);
  Acc acc[64];
#pragma unroll
  for (int r = 0; r < 64; ++r) acc[r] = Acc(0);
  const unsigned long long start = block_clock_start();
  asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
  for (int i = 0; i < iters; ++i) {
#pragma unroll
    for (int w = 0; w < WGMMA_BURST; ++w) wgmma_step(acc, da, db);
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;" ::: "memory");
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  block_clock_stop(start, cycles);
  Acc s = Acc(0);
#pragma unroll
  for (int r = 0; r < 64; ++r) s += acc[r];
  sink[blockIdx.x * blockDim.x + threadIdx.x] = static_cast<float>(s);
}

extern "C" __global__ void bench_wgmma_s8(int iters, unsigned long long* cycles, float* sink) {
  bench_wgmma<int>(iters, cycles, sink);
}

extern "C" __global__ void bench_wgmma_e4m3(int iters, unsigned long long* cycles, float* sink) {
  bench_wgmma<float>(iters, cycles, sink);
}
