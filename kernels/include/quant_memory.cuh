// Global-memory access for the quantizers: 16-byte loads and 8/16-byte stores
// with cache hints, so data read once does not push out data read twice.
//
//   load_keep     plain ld.global: the K/V statistics pass, whose lines the
//                 apply pass re-reads from L2 shortly after
//   load_stream   ld.global.cs (evict-first in L1 and L2): a last read
//   store_stream  st.global.cs (evict-first): outputs nobody re-reads here
#pragma once
#include "common.cuh"

// -DQUANT_KV_L2_HINTS (an experiment, log seq 135): 1 = the statistics pass loads with an
// L2 evict_last policy, so its lines outlast other traffic until the apply pass re-reads them;
// 2 = that, and the apply pass re-reads with an evict_first policy instead of .cs.
#ifndef QUANT_KV_L2_HINTS
#define QUANT_KV_L2_HINTS 0
#endif

#if QUANT_KV_L2_HINTS
SAGE_DEVICE u64 l2_policy_evict_last() {
  u64 policy;
  asm("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

SAGE_DEVICE u64 l2_policy_evict_first() {
  u64 policy;
  asm("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  return policy;
}

SAGE_DEVICE u32x4 load_with_policy(const void *p, u64 policy) {
  u32x4 r;
  asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p), "l"(policy));
  return r;
}
#endif

SAGE_DEVICE u32x4 load_keep(const void *p) {
#if QUANT_KV_L2_HINTS
  return load_with_policy(p, l2_policy_evict_last());
#else
  u32x4 r;
  asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
#endif
}

SAGE_DEVICE u32x4 load_stream(const void *p) {
#if QUANT_KV_L2_HINTS >= 2
  return load_with_policy(p, l2_policy_evict_first());
#else
  u32x4 r;
  asm volatile("ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
#endif
}

SAGE_DEVICE void store_stream(void *p, u32x2 v) {
  asm volatile("st.global.cs.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(v.x), "r"(v.y) : "memory");
}

SAGE_DEVICE void store_stream(void *p, u32x4 v) {
  asm volatile("st.global.cs.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w)
               : "memory");
}

// Byte permute (prmt.b32): result byte i = byte sel[i] of {hi:lo} (lo = bytes 0-3).
SAGE_DEVICE u32 byte_perm(u32 lo, u32 hi, u32 sel) {
  u32 r;
  asm("prmt.b32 %0, %1, %2, %3;" : "=r"(r) : "r"(lo), "r"(hi), "r"(sel));
  return r;
}
