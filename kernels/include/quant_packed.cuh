// Packed fp16x2 / bf16x2 arithmetic for the quantizers: two values per instruction
// where the result is exact, so the fp32 path is only taken where it must be.
//
//   abs_max2   max(|a|, |b|) per half: the maximum is one of the inputs, exact
//   sub2       RN_dtype(a - b) per half, one rounding (fma a * 1 - b). The
//              contract rounds twice (fp32, then the dtype): fp32 carries
//              24 >= 2p + 2 bits for fp16 (p = 11) and bf16 (p = 8), so the
//              double rounding gives the same value (Figueroa's bound).
//   low/high   one half as fp32 (exact)
// Stages 1-2 (K smoothing's subtraction, the groups' amax). Per-thread register arithmetic: no shared
// state, no sync. Targets: sm_89, sm_90, sm_120a, sm_121a.
#pragma once
#include "common.cuh"
#include "convert.cuh"

template <bool BF16>
SAGE_DEVICE u32 max2(u32 a, u32 b) {
  u32 r;
  if (BF16) {
    asm("max.bf16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  } else {
    asm("max.f16x2 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(b));
  }
  return r;
}

// max(acc, |w|) per half (|w|: the sign bits cleared).
template <bool BF16>
SAGE_DEVICE u32 abs_max2(u32 acc, u32 w) {
  return max2<BF16>(acc, w & 0x7fff7fffu);
}

template <bool BF16>
SAGE_DEVICE u32 sub2(u32 a, u32 b) {
  u32 r;
  if (BF16) {
    asm("fma.rn.bf16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(0x3f803f80u), "r"(b ^ 0x80008000u));
  } else {
    asm("fma.rn.f16x2 %0, %1, %2, %3;" : "=r"(r) : "r"(a), "r"(0x3c003c00u), "r"(b ^ 0x80008000u));
  }
  return r;
}

template <bool BF16>
SAGE_DEVICE float low_half(u32 w) {
  return bits_to_float<BF16>((u16)(w & 0xffffu));
}

template <bool BF16>
SAGE_DEVICE float high_half(u32 w) {
  return bits_to_float<BF16>((u16)(w >> 16));
}

// Element e (0..7) of a 16-byte row piece as fp32.
template <bool BF16>
SAGE_DEVICE float element(const u32x4 &w, int e) {
  const u32 word = e < 2 ? w.x : (e < 4 ? w.y : (e < 6 ? w.z : w.w));
  return (e & 1) ? high_half<BF16>(word) : low_half<BF16>(word);
}

// max |x| over the 8 values of a 16-byte piece, as a packed pair (both halves to be combined).
template <bool BF16>
SAGE_DEVICE u32 abs_max8_packed(const u32x4 &w) {
  return abs_max2<BF16>(abs_max2<BF16>(w.x & 0x7fff7fffu, w.y), abs_max2<BF16>(w.z & 0x7fff7fffu, w.w));
}

// The larger half of a packed pair of non-negative values, as fp32.
template <bool BF16>
SAGE_DEVICE float packed_max_to_float(u32 w) {
  return fmaxf(low_half<BF16>(w), high_half<BF16>(w));
}
