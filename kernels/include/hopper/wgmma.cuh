// Warpgroup MMA (wgmma, sm_90a): shared-memory descriptors for the 128-byte swizzle,
// the fence/commit/wait protocol, and the shapes the Hopper attention kernel issues.
//
// Operands. Every 8-bit operand here is K-major: each row of the tile holds one row of
// A (a query) or of B (a key, or a channel of V^T) with the contraction dimension
// contiguous, 128 bytes per row, written by TMA with the 128-byte swizzle into a
// 1024-byte aligned tile (tma.cuh). Eight rows make one 1024-byte swizzle atom; the
// descriptor's stride byte offset is the distance between atoms (1024), its leading
// byte offset is unused for this layout (set to 1 by convention). One k32 step reads
// 32 bytes of each row: step s starts 32*s bytes into the tile (wgmma_desc_advance).
//
// Accumulator fragment (m64nN, 32-bit): thread t = 32*w + l of the warpgroup holds
// N/2 values; value i is row 16*w + l/4 + 8*((i/2)%2), column 8*(i/4) + 2*(l%4) + i%2
// (wgmma_acc_row / wgmma_acc_col). Register A fragment (m64k32, 8-bit): four 32-bit
// words; byte b of word q is row 16*w + l/4 + 8*(q%2), column 16*(q/2) + 4*(l%4) + b
// (wgmma_a8_row / wgmma_a8_col). Both are decoded by kernels/hopper_smoke.cu and
// checked against torch on the GPU (tests/test_hopper_smoke.py).
//
// Protocol: wgmma_fence() before the first wgmma that touches registers written
// since the last one; issue; wgmma_commit(); wgmma_wait<n>() before reading the
// accumulators (or overwriting register A operands) of all but the n newest groups.
// ACCUMULATE == false makes an instruction ignore the accumulator's old value.
// Stages 3 (int8 m64nNk32 into int32) and 6 (e4m3 into fp32). Ownership: accumulators are the
// issuing warpgroup's registers (layout above); the shared operands must be guarded by the caller's
// mbarrier until wgmma_wait retires the group. Target: sm_90a.
#pragma once
#include "../common.cuh"
#include "arch_guard.cuh"

// ---- shared-memory matrix descriptors -------------------------------------------------

#define SAGE_WGMMA_SWIZZLE_128B 1ull  // descriptor bits 62-63
#define SAGE_WGMMA_SWIZZLE_64B 2ull
#define SAGE_WGMMA_SW128_ATOM_BYTES 1024u

// Descriptor of a K-major tile of ROW_BYTES-byte rows (128: the 128-byte swizzle, 1024-byte
// atoms; 64: the 64-byte swizzle, 512-byte atoms), starting at `tile` (atom aligned). The
// stride byte offset is one atom: eight rows.
template <int ROW_BYTES>
SAGE_DEVICE u64 wgmma_desc_k_major(const void *tile) {
  static_assert(ROW_BYTES == 64 || ROW_BYTES == 128, "rows of 64 or 128 bytes");
  const u32 address = static_cast<u32>(__cvta_generic_to_shared(tile));
  const u64 mode = ROW_BYTES == 128 ? SAGE_WGMMA_SWIZZLE_128B : SAGE_WGMMA_SWIZZLE_64B;
  return static_cast<u64>((address & 0x3FFFF) >> 4)          // bits 0-13: start address / 16
         | (static_cast<u64>(1) << 16)                       // bits 16-29: leading offset (unused)
         | (static_cast<u64>(8 * ROW_BYTES >> 4) << 32)      // bits 32-45: stride offset / 16
         | (mode << 62);                                     // bits 62-63: swizzle mode
}

// Descriptor of a K-major tile with the 128-byte swizzle starting at `tile` (1024-byte aligned).
SAGE_DEVICE u64 wgmma_desc_sw128(const void *tile) { return wgmma_desc_k_major<128>(tile); }

// The same descriptor moved `bytes` along each row (a multiple of 16, within the 128-byte row).
SAGE_DEVICE u64 wgmma_desc_advance(u64 desc, u32 bytes) { return desc + (bytes >> 4); }

// ---- fragment layouts ----------------------------------------------------------------

SAGE_DEVICE int wgmma_acc_row(int thread, int i) { return 16 * (thread / 32) + (thread % 32) / 4 + 8 * ((i / 2) % 2); }
SAGE_DEVICE int wgmma_acc_col(int thread, int i) { return 8 * (i / 4) + 2 * (thread % 4) + i % 2; }
SAGE_DEVICE int wgmma_a8_row(int thread, int word) { return 16 * (thread / 32) + (thread % 32) / 4 + 8 * (word % 2); }
SAGE_DEVICE int wgmma_a8_col(int thread, int word) { return 16 * (word / 2) + 4 * (thread % 4); }

// ---- protocol ------------------------------------------------------------------------

SAGE_DEVICE void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
SAGE_DEVICE void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
template <int PENDING>
SAGE_DEVICE void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(PENDING) : "memory");
}

// Keeps the compiler from moving accesses of accumulator registers across a wgmma
// boundary (the hardware reads and writes them asynchronously).
// Floats are pinned as floats: a pin through an integer view makes the compiler copy the
// registers between its float and integer names, and such a copy of an accumulator that
// a wgmma still writes makes ptxas serialise every wgmma of the kernel (warning C7514).
template <int N>
SAGE_DEVICE void wgmma_pin(float (&acc)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(acc[i])::"memory");
}
template <typename T, int N>
SAGE_DEVICE void wgmma_pin(T (&acc)[N]) {
  static_assert(sizeof(T) == 4, "32-bit registers");
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(reinterpret_cast<u32 &>(acc[i]))::"memory");
}

// ---- operand lists -------------------------------------------------------------------
// Accumulator register i of the calling thread is asm operand %i; the operands after
// the accumulators follow in the order of each instruction's PTX form.

#define SAGE_PCT10(tens) \
  "%" #tens "0, %" #tens "1, %" #tens "2, %" #tens "3, %" #tens "4, %" #tens "5, %" #tens "6, %" #tens "7, %" #tens "8, %" #tens "9"
#define SAGE_ACC16_OPERANDS "{" SAGE_PCT10() ", %10, %11, %12, %13, %14, %15}"
#define SAGE_ACC32_OPERANDS "{" SAGE_PCT10() ", " SAGE_PCT10(1) ", " SAGE_PCT10(2) ", %30, %31}"
#define SAGE_ACC64_OPERANDS \
  "{" SAGE_PCT10() ", " SAGE_PCT10(1) ", " SAGE_PCT10(2) ", " SAGE_PCT10(3) ", " SAGE_PCT10(4) ", " SAGE_PCT10(5) ", %60, %61, %62, %63}"

#define SAGE_IO4(c, a, i) c(a[(i)]), c(a[(i) + 1]), c(a[(i) + 2]), c(a[(i) + 3])
#define SAGE_IO16(c, a, i) SAGE_IO4(c, a, i), SAGE_IO4(c, a, (i) + 4), SAGE_IO4(c, a, (i) + 8), SAGE_IO4(c, a, (i) + 12)
#define SAGE_IO16A(c, a) SAGE_IO16(c, a, 0)
#define SAGE_IO32(c, a) SAGE_IO16(c, a, 0), SAGE_IO16(c, a, 16)
#define SAGE_IO64(c, a) SAGE_IO16(c, a, 0), SAGE_IO16(c, a, 16), SAGE_IO16(c, a, 32), SAGE_IO16(c, a, 48)
#define SAGE_INOUT_S32(x) "+r"(x)
#define SAGE_INOUT_F32(x) "+f"(x)
#define SAGE_OUT_S32(x) "=r"(x)
#define SAGE_OUT_F32(x) "=f"(x)

// Every instruction comes in two forms, chosen at compile time by ACCUMULATE:
// true adds to the accumulator (its registers are read and written), false ignores its
// old value and tells the compiler so (write-only operands): the registers of a fresh
// accumulator are then free until the instruction, which is what lets two score
// buffers share the register file (a read-write operand would keep the previous
// contents alive). `PRED` is the operand number of the scale-d flag.
#define SAGE_WGMMA(ACCUMULATE, INSTR, OPERANDS, PRED, IO, ACC, INOUT, OUT, ...)            \
  do {                                                                                    \
    if constexpr (ACCUMULATE) {                                                           \
      asm volatile("{\n .reg .pred keep;\n setp.ne.b32 keep, %" #PRED ", 0;\n " INSTR OPERANDS \
                   "\n}\n"                                                               \
                   : IO(INOUT, ACC)                                                       \
                   : __VA_ARGS__, "n"(1));                                                \
    } else {                                                                              \
      asm volatile("{\n .reg .pred keep;\n setp.ne.b32 keep, %" #PRED ", 0;\n " INSTR OPERANDS \
                   "\n}\n"                                                               \
                   : IO(OUT, ACC)                                                         \
                   : __VA_ARGS__, "n"(0));                                                \
    }                                                                                     \
  } while (0)

// ---- Q.K^T: int8 x int8 -> int32, K (and Q) from shared memory -----------------------

// S[64 x 128] (+)= Q[64 x 32] . K[128 x 32]^T  (one k32 step of the score tile).
template <bool ACCUMULATE>
SAGE_DEVICE void wgmma_m64n128k32_s32_s8_s8(i32 (&s)[64], u64 desc_q, u64 desc_k) {
  SAGE_WGMMA(ACCUMULATE, "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 ",
             SAGE_ACC64_OPERANDS ", %64, %65, keep;", 66, SAGE_IO64, s, SAGE_INOUT_S32, SAGE_OUT_S32,
             "l"(desc_q), "l"(desc_k));
}

// S[64 x 64] (+)= Q[64 x 32] . K[64 x 32]^T  (a 64-key block's step).
template <bool ACCUMULATE>
SAGE_DEVICE void wgmma_m64n64k32_s32_s8_s8(i32 (&s)[32], u64 desc_q, u64 desc_k) {
  SAGE_WGMMA(ACCUMULATE, "wgmma.mma_async.sync.aligned.m64n64k32.s32.s8.s8 ",
             SAGE_ACC32_OPERANDS ", %32, %33, keep;", 34, SAGE_IO32, s, SAGE_INOUT_S32, SAGE_OUT_S32,
             "l"(desc_q), "l"(desc_k));
}

// The Q.K^T instruction for a block of S_REGS * 2 keys (64 or 128), Q from shared memory.
template <int S_REGS, bool ACCUMULATE>
SAGE_DEVICE void wgmma_qk_step(i32 (&s)[S_REGS], u64 desc_q, u64 desc_k) {
  static_assert(S_REGS == 32 || S_REGS == 64, "64- or 128-key blocks");
  if constexpr (S_REGS == 32) {
    wgmma_m64n64k32_s32_s8_s8<ACCUMULATE>(s, desc_q, desc_k);
  } else {
    wgmma_m64n128k32_s32_s8_s8<ACCUMULATE>(s, desc_q, desc_k);
  }
}

// The same step with Q's A fragment in registers (four 32-bit words, wgmma_a8_row/col).
template <bool ACCUMULATE>
SAGE_DEVICE void wgmma_m64n128k32_s32_s8_s8_rs(i32 (&s)[64], const u32 (&q)[4], u64 desc_k) {
  SAGE_WGMMA(ACCUMULATE, "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 ",
             SAGE_ACC64_OPERANDS ", {%64, %65, %66, %67}, %68, keep;", 69, SAGE_IO64, s, SAGE_INOUT_S32,
             SAGE_OUT_S32, "r"(q[0]), "r"(q[1]), "r"(q[2]), "r"(q[3]), "l"(desc_k));
}

// ---- P.V: e4m3 x e4m3 -> fp32, P from registers, V^T (K-major) from shared memory ----

// O[64 x 64] (+)= P[64 x 32] . V[32 x 64]  (V^T rows = the 64 channels, keys contiguous).
template <bool ACCUMULATE>
SAGE_DEVICE void wgmma_m64n64k32_f32_e4m3_e4m3(float (&o)[32], const u32 (&p)[4], u64 desc_vt) {
  SAGE_WGMMA(ACCUMULATE, "wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3 ",
             SAGE_ACC32_OPERANDS ", {%32, %33, %34, %35}, %36, keep, 1, 1;", 37, SAGE_IO32, o, SAGE_INOUT_F32,
             SAGE_OUT_F32, "r"(p[0]), "r"(p[1]), "r"(p[2]), "r"(p[3]), "l"(desc_vt));
}

// O[64 x 128] (+)= P[64 x 32] . V[32 x 128]  (V^T rows = the 128 channels, keys contiguous).
template <bool ACCUMULATE>
SAGE_DEVICE void wgmma_m64n128k32_f32_e4m3_e4m3(float (&o)[64], const u32 (&p)[4], u64 desc_vt) {
  SAGE_WGMMA(ACCUMULATE, "wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 ",
             SAGE_ACC64_OPERANDS ", {%64, %65, %66, %67}, %68, keep, 1, 1;", 69, SAGE_IO64, o, SAGE_INOUT_F32,
             SAGE_OUT_F32, "r"(p[0]), "r"(p[1]), "r"(p[2]), "r"(p[3]), "l"(desc_vt));
}

// The P.V instruction for a head dim (64 or 128): one k32 step over all channels.
template <int HEAD_DIM, bool ACCUMULATE>
SAGE_DEVICE void wgmma_pv_step(float (&o)[HEAD_DIM / 2], const u32 (&p)[4], u64 desc_vt) {
  static_assert(HEAD_DIM == 64 || HEAD_DIM == 128, "head_dim 64 or 128");
  if constexpr (HEAD_DIM == 64) {
    wgmma_m64n64k32_f32_e4m3_e4m3<ACCUMULATE>(o, p, desc_vt);
  } else {
    wgmma_m64n128k32_f32_e4m3_e4m3<ACCUMULATE>(o, p, desc_vt);
  }
}

// ---- P.V into an f16 accumulator (the contract's fp32+fp16 inner level) -----------------
// The same element positions as the fp32 forms above, two per 32-bit register: register j holds elements 2j (low
// half) and 2j + 1 (high half) of the fp32 layout. Half the registers; each k32 step's sum is rounded to fp16.

// O16[64 x 64] (+)= P[64 x 32] . V[32 x 64], 16 registers.
template <bool ACCUMULATE>
SAGE_DEVICE void wgmma_m64n64k32_f16_e4m3_e4m3(u32 (&o)[16], const u32 (&p)[4], u64 desc_vt) {
  SAGE_WGMMA(ACCUMULATE, "wgmma.mma_async.sync.aligned.m64n64k32.f16.e4m3.e4m3 ",
             SAGE_ACC16_OPERANDS ", {%16, %17, %18, %19}, %20, keep, 1, 1;", 21, SAGE_IO16A, o, SAGE_INOUT_S32,
             SAGE_OUT_S32, "r"(p[0]), "r"(p[1]), "r"(p[2]), "r"(p[3]), "l"(desc_vt));
}

// O16[64 x 128] (+)= P[64 x 32] . V[32 x 128], 32 registers.
template <bool ACCUMULATE>
SAGE_DEVICE void wgmma_m64n128k32_f16_e4m3_e4m3(u32 (&o)[32], const u32 (&p)[4], u64 desc_vt) {
  SAGE_WGMMA(ACCUMULATE, "wgmma.mma_async.sync.aligned.m64n128k32.f16.e4m3.e4m3 ",
             SAGE_ACC32_OPERANDS ", {%32, %33, %34, %35}, %36, keep, 1, 1;", 37, SAGE_IO32, o, SAGE_INOUT_S32,
             SAGE_OUT_S32, "r"(p[0]), "r"(p[1]), "r"(p[2]), "r"(p[3]), "l"(desc_vt));
}

// The f16-accumulator P.V instruction for a head dim (64 or 128).
template <int HEAD_DIM, bool ACCUMULATE>
SAGE_DEVICE void wgmma_pv_step_f16(u32 (&o)[HEAD_DIM / 4], const u32 (&p)[4], u64 desc_vt) {
  static_assert(HEAD_DIM == 64 || HEAD_DIM == 128, "head_dim 64 or 128");
  if constexpr (HEAD_DIM == 64) {
    wgmma_m64n64k32_f16_e4m3_e4m3<ACCUMULATE>(o, p, desc_vt);
  } else {
    wgmma_m64n128k32_f16_e4m3_e4m3<ACCUMULATE>(o, p, desc_vt);
  }
}
