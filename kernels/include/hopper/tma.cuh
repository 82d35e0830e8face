// TMA bulk copies, global -> shared, completing on an mbarrier (sm_90): tensor copies of a
// box, and plain copies of a contiguous run of bytes.
//
// A tensor map (CUtensorMap, 128 bytes, 64-byte aligned) is built on the host by
// sagelib.cuda.tma and passed by value as a `const __grid_constant__ TensorMap`
// kernel parameter; the copy instructions take its generic address. Coordinates are
// in elements, innermost dimension first (the reverse of torch's shape order), and may
// run past the tensor's end: those elements arrive as zeros (ragged tails), and they
// still count in the box's bytes that the mbarrier waits for.
//
// With the 128-byte swizzle a box whose inner extent is 128 bytes lands as rows of
// 128 bytes in which 16-byte chunk c of row r sits at chunk c ^ (r % 8), counted from a
// 1024-byte aligned destination: the layout swizzled_offset<128> (../swizzle.cuh)
// addresses and the wgmma descriptors of wgmma.cuh read.
// Ownership: one elected producer thread issues each copy; the stage's full mbarrier guards its bytes
// until consumers wait on it. Target: sm_90a.
#pragma once
#include "mbarrier.cuh"

struct alignas(64) TensorMap {
  u64 opaque[16];
};

// Fetches the descriptor into the TMA unit's cache ahead of the first copy.
SAGE_DEVICE void tma_prefetch_descriptor(const TensorMap *map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<u64>(map)) : "memory");
}

// Orders this thread's generic-proxy shared-memory writes before later async-proxy
// accesses (wgmma operand reads, TMA stores) of the same memory.
SAGE_DEVICE void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }

SAGE_DEVICE void tma_load_2d(void *dst, const TensorMap *map, u64 *bar, int c0, int c1) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4}], [%2];" ::"r"(
          smem_address(dst)),
      "l"(reinterpret_cast<u64>(map)), "r"(smem_address(bar)), "r"(c0), "r"(c1)
      : "memory");
}

SAGE_DEVICE void tma_load_3d(void *dst, const TensorMap *map, u64 *bar, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5}], "
      "[%2];" ::"r"(smem_address(dst)),
      "l"(reinterpret_cast<u64>(map)), "r"(smem_address(bar)), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

SAGE_DEVICE void tma_load_4d(void *dst, const TensorMap *map, u64 *bar, int c0, int c1, int c2, int c3) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%3, %4, %5, %6}], "
      "[%2];" ::"r"(smem_address(dst)),
      "l"(reinterpret_cast<u64>(map)), "r"(smem_address(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3)
      : "memory");
}

// `bytes` contiguous bytes (a multiple of 16; both addresses 16-byte aligned) to shared memory.
SAGE_DEVICE void bulk_load(void *dst, const void *src, u32 bytes, u64 *bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                   smem_address(dst)),
               "l"(reinterpret_cast<u64>(src)), "r"(bytes), "r"(smem_address(bar))
               : "memory");
}
