// Thread-block clusters (sm_90): a CTA's rank in its cluster, the cluster-wide barrier, an
// arrival on an mbarrier of another CTA of the cluster, and TMA copies multicast to several
// CTAs' shared memory at once.
//
// A multicast copy writes the same box to the same shared-memory offset in every CTA of
// `cta_mask` and completes its bytes on the mbarrier at the same offset in each of them, so
// CTAs that walk one ring in step can each load a share of a stage for all of them.
#pragma once
#include "mbarrier.cuh"
#include "tma.cuh"

SAGE_DEVICE u32 cluster_ctarank() {
  u32 rank;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
  return rank;
}

// Every non-exited thread of every CTA of the cluster arrives, then waits: shared memory and
// barriers initialized before it are visible cluster-wide after it (release / acquire).
SAGE_DEVICE void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;" ::: "memory");
}

// One arrival on the mbarrier at `bar`'s offset in CTA `cta` of this cluster, with the default
// (CTA-scope) release: what a consumer releasing a stage it has finished reading needs. The
// cluster-scope form compiles to MEMBAR.ALL.CTA + MEMBAR.ALL.GPU before every arrival.
SAGE_DEVICE void mbarrier_arrive_cluster(u64 *bar, u32 cta) {
  u32 remote;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(smem_address(bar)), "r"(cta));
  asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
}

// tma_load_4d into `dst` of every CTA in `cta_mask`, each completing on its own `bar`.
SAGE_DEVICE void tma_load_4d_multicast(void *dst, const TensorMap *map, u64 *bar, int c0, int c1, int c2, int c3,
                                       u16 cta_mask) {
  asm volatile(
      "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster"
      " [%0], [%1, {%3, %4, %5, %6}], [%2], %7;" ::"r"(smem_address(dst)),
      "l"(reinterpret_cast<u64>(map)), "r"(smem_address(bar)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "h"(cta_mask)
      : "memory");
}
