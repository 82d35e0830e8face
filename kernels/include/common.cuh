// Shared scalar types and qualifiers for every kernel in kernels/.
//
// The kernels are compiled by NVRTC (through sagelib.cuda.build) and by nvcc
// (sagelib kernels check), so they include nothing from the C++ standard
// library or the CUDA math headers: fp16, bf16 and e4m3 values travel as raw
// bits and are converted with explicit PTX (convert.cuh).
// No contract stage, no state, no sync: scalar types, SAGE_DEVICE and the
// contract's constants (log2 e, the fp8 offset, the mask score).
// Targets: every preset.
#pragma once

typedef unsigned char u8;
typedef signed char i8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef int i32;
typedef unsigned long long u64;
typedef long long i64;

#define SAGE_DEVICE __device__ __forceinline__

// Constants of the numerical contract (sagelib/contract/presets.py).
#define SAGE_LOG2E 1.44269504f
#define SAGE_FP8_OFFSET 8.807f
// The running row max starts below every real score (the lowest finite float); a hidden key's
// exp2 argument and an all-hidden block's row max are -inf, so a hidden key's P is exactly 0
// whatever the magnitude of the real scores (contract stages 3-4).
#define SAGE_ROW_MAX_INIT (-3.40282347e38f)
#define SAGE_NEG_INF __int_as_float(0xff800000)

struct alignas(16) u32x4 {
  u32 x, y, z, w;
};
struct alignas(8) u32x2 {
  u32 x, y;
};

SAGE_DEVICE int ceil_div(int a, int b) { return (a + b - 1) / b; }
