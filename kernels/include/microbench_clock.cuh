// Clock bookkeeping shared by the microbenchmarks: thread 0 of a CTA records how many
// SM clocks the whole CTA spent between two barriers.
#pragma once

__device__ __forceinline__ unsigned long long block_clock_start() {
  __syncthreads();
  return clock64();
}

__device__ __forceinline__ void block_clock_stop(unsigned long long start, unsigned long long* cycles) {
  __syncthreads();
  if (threadIdx.x == 0) cycles[blockIdx.x] = clock64() - start;
}
