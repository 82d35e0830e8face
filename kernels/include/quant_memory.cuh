// Global-memory access for the quantizers: 16-byte loads and 8/16-byte stores
// with cache hints, so data read once does not push out data read twice.
//
//   load_keep     plain ld.global: the K/V statistics pass, whose lines the
//                 apply pass re-reads from L2 shortly after
//   load_stream   ld.global.cs (evict-first in L1 and L2): a last read
//   store_stream  st.global.cs (evict-first): outputs nobody re-reads here
// Stages: 1-2 and 5's memory side (no arithmetic). Each call is one thread's own access; no shared
// state, no sync. Targets: sm_89, sm_90, sm_120a, sm_121a.
#pragma once
#include "common.cuh"

SAGE_DEVICE u32x4 load_keep(const void *p) {
  u32x4 r;
  asm volatile("ld.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
}

SAGE_DEVICE u32x4 load_stream(const void *p) {
  u32x4 r;
  asm volatile("ld.global.cs.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(r.x), "=r"(r.y), "=r"(r.z), "=r"(r.w) : "l"(p));
  return r;
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
