// Warp-level tensor-core instructions of the portable (mma.sync) path, sm_89+.
//
// Fragment layouts (PTX ISA, "Matrix fragments for mma.m16n8k32", 8-bit types),
// lane = 4 * group + tid_in_group, group = lane / 4, tig = lane % 4:
//   A (16 x 32, row-major), four .b32 registers of 4 bytes each:
//     a0: row group,   k 4*tig .. 4*tig+3      a1: row group+8, same k
//     a2: row group,   k 16+4*tig ..           a3: row group+8, k 16+4*tig ..
//   B (32 x 8, "col": stored n-major), two .b32 registers:
//     b0: n group, k 4*tig .. 4*tig+3          b1: n group, k 16+4*tig ..
//   C/D (16 x 8): c0,c1: row group, cols 2*tig, 2*tig+1; c2,c3: row group+8.
//   f16 C/D: two .b32 registers of f16x2: d0 = (row group), d1 = (row group+8).
// ldmatrix.m8n8 of b16 gives lane i the 4 bytes at row i/4, bytes 4*(i%4) of an
// 8 x 16-byte matrix: exactly the A and B layouts above for 8-bit types.
// Stages 3 (s8 m16n8k32 into int32) and 6 (e4m3 m16n8k32, or f16 m16n8k16 on sm_90, into fp32/fp16).
// Ownership: every fragment is the calling warp's registers; the warp executes each mma.sync together
// (no other sync). Targets: sm_89, sm_90, sm_120a, sm_121a.
#pragma once
#include "common.cuh"

SAGE_DEVICE u32 smem_addr(const void *p) { return (u32)__cvta_generic_to_shared(p); }

SAGE_DEVICE void ldmatrix_x4(u32 (&r)[4], u32 addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}

// The mma wrappers are plain (non-volatile) asm: register-only, so the compiler
// may interleave them with the softmax arithmetic. ldmatrix stays volatile so it
// is never moved across a barrier.

// D += A.B, int8 x int8 -> int32 (exact).
SAGE_DEVICE void mma_s8(i32 (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// D += A.B, e4m3 x e4m3 -> fp32 accumulator (FP22 inside the tensor core).
SAGE_DEVICE void mma_e4m3_f32(float (&d)[4], const u32 (&a)[4], u32 b0, u32 b1) {
  asm(
      "mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// D += A.B, e4m3 x e4m3 -> fp16 accumulator (the fp32+fp16 mode's inner level).
SAGE_DEVICE void mma_e4m3_f16(u32 (&d)[2], const u32 (&a)[4], u32 b0, u32 b1) {
  asm(
      "mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16 "
      "{%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%0, %1};"
      : "+r"(d[0]), "+r"(d[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Hopper (sm_90) has no e4m3 mma.sync. ptxas widens each m16n8k32 e4m3 into two HMMA.16816 on
// f16 operands and adds the incoming accumulator with a separate FADD (HADD2 for an f16
// accumulator). The helpers below do the widening in the source, so a block's k16 steps chain
// inside the tensor core with no add between them: the same products (e4m3 is exact in f16).
//
// Four e4m3 bytes -> two f16x2: lo = bytes 0, 1 and hi = bytes 2, 3, each byte in its own half.
SAGE_DEVICE void e4m3x4_to_f16x4(u32 x, u32 &lo, u32 &hi) {
  asm("{ .reg .b16 a, b; mov.b32 {a, b}, %2; cvt.rn.f16x2.e4m3x2 %0, a; cvt.rn.f16x2.e4m3x2 %1, b; }"
      : "=r"(lo), "=r"(hi)
      : "r"(x));
}

// The widened operands keep every thread's elements where they are: the m16n8k32 B register b0
// (k 4*tig .. 4*tig+3) becomes lo (k 4*tig, +1) and hi (k 4*tig+2, +3), which an m16n8k16 reads
// as its k 2*tig, +1 and 2*tig+8, +9; b1 gives the second k16 step the same way. P's A fragments
// are built in that key order directly (online_softmax.cuh pack_p_fragments_f16).
SAGE_DEVICE void widen_b_e4m3(u32 b0, u32 b1, u32 (&first)[2], u32 (&second)[2]) {
  e4m3x4_to_f16x4(b0, first[0], first[1]);
  e4m3x4_to_f16x4(b1, second[0], second[1]);
}

// D += A.B, f16 x f16 -> fp32 (m16n8k16).
SAGE_DEVICE void mma_f16_f32(float (&d)[4], const u32 (&a)[4], const u32 (&b)[2]) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

// D += A.B, f16 x f16 -> f16 (m16n8k16).
SAGE_DEVICE void mma_f16_f16(u32 (&d)[2], const u32 (&a)[4], const u32 (&b)[2]) {
  asm(
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 "
      "{%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%0, %1};"
      : "+r"(d[0]), "+r"(d[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}
