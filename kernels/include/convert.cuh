// Number-format conversions as the contract defines them.
//
//   fp16 / bf16 -> fp32      exact (cvt.f32.f16, or a 16-bit shift for bf16)
//   fp32 -> fp16 / bf16      round to nearest even (cvt.rn)
//   fp64 -> fp16 / bf16      correctly rounded, one rounding (the contract's k mean)
//   fp32 x2 -> e4m3 x2       cvt.rn.satfinite.e4m3x2.f32 (sm_89+): RNE, saturate at 448
// Stages 1, 2, 5 and 7 use these. Per-thread register conversions, no shared state, no sync.
// Targets: sm_89+ (the e4m3 packs need sm_89; everything else is plain PTX).
#pragma once
#include "common.cuh"

SAGE_DEVICE float half_bits_to_float(u16 h) {
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(h));
  return f;
}

SAGE_DEVICE float bf16_bits_to_float(u16 b) { return __uint_as_float(((u32)b) << 16); }

template <bool BF16>
SAGE_DEVICE float bits_to_float(u16 x) {
  if (BF16) return bf16_bits_to_float(x);
  return half_bits_to_float(x);
}

SAGE_DEVICE u16 float_to_half_bits(float f) {
  u16 h;
  asm("cvt.rn.f16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

SAGE_DEVICE u16 float_to_bf16_bits(float f) {
  u16 h;
  asm("cvt.rn.bf16.f32 %0, %1;" : "=h"(h) : "f"(f));
  return h;
}

template <bool BF16>
SAGE_DEVICE u16 float_to_bits(float f) {
  if (BF16) return float_to_bf16_bits(f);
  return float_to_half_bits(f);
}

// fp32 rounded through the input dtype and back (the triton flavour's k - km).
template <bool BF16>
SAGE_DEVICE float round_through(float f) {
  return bits_to_float<BF16>(float_to_bits<BF16>(f));
}

// Two fp32 values -> packed 16-bit pair, `lo` in the low half (memory order lo, hi).
template <bool BF16>
SAGE_DEVICE u32 pack2(float lo, float hi) {
  u32 r;
  if (BF16) {
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  } else {
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(hi), "f"(lo));
  }
  return r;
}

SAGE_DEVICE u16 double_to_half_bits(double d) {
  u16 h;
  asm("cvt.rn.f16.f64 %0, %1;" : "=h"(h) : "d"(d));
  return h;
}

// fp64 -> bf16 with a single round-to-nearest-even on the fp64 bits (normal range;
// a result below bf16's normal range goes through fp32, where double rounding is
// then possible but needs a mean under 1e-38).
SAGE_DEVICE u16 double_to_bf16_bits(double d) {
  const u64 bits = (u64)__double_as_longlong(d);
  const u32 sign = (u32)(bits >> 63);
  const int exp = (int)((bits >> 52) & 0x7ff);
  if (exp == 0x7ff) return (u16)((sign << 15) | 0x7fc0);  // nan / inf never occur in a mean
  const int e = exp - 1023;
  if (e < -126) return float_to_bf16_bits((float)d);
  u64 mant = bits & 0xfffffffffffffull;     // 52 bits
  u64 keep = mant >> 45;                    // 7 bits
  const u64 rest = mant & ((1ull << 45) - 1);
  const u64 half = 1ull << 44;
  int be = e + 127;
  if (rest > half || (rest == half && (keep & 1))) {
    keep += 1;
    if (keep == 128) { keep = 0; be += 1; }
  }
  if (be >= 255) return (u16)((sign << 15) | 0x7f80);
  return (u16)((sign << 15) | ((u32)be << 7) | (u32)keep);
}

template <bool BF16>
SAGE_DEVICE u16 double_to_bits(double d) {
  if (BF16) return double_to_bf16_bits(d);
  return double_to_half_bits(d);
}

// Two fp32 -> two e4m3 bytes, `lo` in the low byte.
SAGE_DEVICE u32 e4m3x2(float lo, float hi) {
  u16 r;
  asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(r) : "f"(hi), "f"(lo));
  return (u32)r;
}

// Two fp32 -> e4m3 (RNE, satfinite, as e4m3x2 above) -> f16x2, `lo` in the low half: a
// P value rounded to e4m3 and handed to an f16 mma without a packed e4m3 register in between.
SAGE_DEVICE u32 e4m3_rounded_f16x2(float lo, float hi) {
  u32 r;
  asm("{ .reg .b16 e; cvt.rn.satfinite.e4m3x2.f32 e, %2, %1; cvt.rn.f16x2.e4m3x2 %0, e; }" : "=r"(r) : "f"(lo), "f"(hi));
  return r;
}

// Four fp32 -> four e4m3 bytes in one register, a in the lowest byte.
SAGE_DEVICE u32 e4m3x4(float a, float b, float c, float d) {
  return e4m3x2(a, b) | (e4m3x2(c, d) << 16);
}

// f16x2 register -> two fp32. Unpacked in PTX (mov.b32 {lo, hi}) so ptxas reads each half in place
// (HADD2.F32 with an .H0_H0 / .H1_H1 selector) instead of shifting the high half down first.
SAGE_DEVICE void half2_bits_to_float2(u32 h2, float &lo, float &hi) {
  asm("{\n\t.reg .f16 l, h;\n\tmov.b32 {l, h}, %2;\n\tcvt.f32.f16 %0, l;\n\tcvt.f32.f16 %1, h;\n\t}"
      : "=f"(lo), "=f"(hi) : "r"(h2));
}

// Fast exp2 (ex2.approx.ftz): the kernels' softmax arithmetic (contract section 4).
SAGE_DEVICE float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
