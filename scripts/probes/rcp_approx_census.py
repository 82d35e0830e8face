"""How often the GPU's rcp.approx.f32 differs from the correctly rounded reciprocal, over every float32 mantissa.

    OUT=DIR python3 scripts/probes/rcp_approx_census.py

Five exponents; per exponent: how many of the 2^23 mantissas differ from rcp.rn.f32, how many by more than one
ulp, and how many give another mantissa than at exponent 0. Writes DIR/mufu_probe.json. On the H200 on 2026-12-02
(EXPERIMENT_LOG seq 198): 1,108,522 differ (13.2%), none by more than one ulp, none depends on the exponent: a
table of 2 bits per mantissa would let a CPU reproduce the GPU's approximate divisions exactly.
"""
import json
import os

import cupy

src = r'''
extern "C" __global__ void count(unsigned long long *out, int exp_shift) {
  unsigned m = blockIdx.x * blockDim.x + threadIdx.x; if (m >= (1u << 23)) return;
  float x = __uint_as_float(((127u + exp_shift) << 23) | m), a, r, a0, x0 = __uint_as_float((127u << 23) | m);
  asm("rcp.approx.f32 %0, %1;" : "=f"(a) : "f"(x)); asm("rcp.rn.f32 %0, %1;" : "=f"(r) : "f"(x));
  asm("rcp.approx.f32 %0, %1;" : "=f"(a0) : "f"(x0));
  int d = (int)__float_as_uint(a) - (int)__float_as_uint(r);
  if (d != 0) atomicAdd(&out[0], 1ull);
  if (d > 1 || d < -1) atomicAdd(&out[1], 1ull);
  // exponent independence: a == a0 * 2^-shift (mantissa bits equal)
  if ((__float_as_uint(a) & 0x7fffffu) != (__float_as_uint(a0) & 0x7fffffu)) atomicAdd(&out[2], 1ull);
}'''
k = cupy.RawKernel(src, "count")
res = {}
for shift in (0, -20, -5, 7, 30):
    out = cupy.zeros(3, dtype=cupy.uint64)
    k(((1 << 23) // 256,), (256,), (out, cupy.int32(shift)))
    res[shift] = [int(v) for v in out.get()]
    print(f"exponent shift {shift:>4}: differ from rcp.rn {res[shift][0]} of 8388608 mantissas, "
          f">1 ulp {res[shift][1]}, mantissa differs from shift 0: {res[shift][2]}")
json.dump(res, open(os.path.join(os.environ["OUT"], "mufu_probe.json"), "w"))
