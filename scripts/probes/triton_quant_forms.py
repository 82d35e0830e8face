"""Which float32 forms reproduce SageAttention2's Triton per-thread INT8 quantizer bit for bit (a GPU probe).

    SAGELIB_PEER_DIR=.peer/SageAttention OUT=DIR [TRITON_CACHE_DIR=DIR/tc] python3 scripts/probes/triton_quant_forms.py

Runs the peer's Triton quantizer (its source file alone: no build needed) on four inputs and compares every scale
with seven float32 forms of ``amax / 127. + 1e-7`` and every code, given the real scale, with seven forms of
``x / scale`` (inline PTX through CuPy, explicit roundings so ptxas cannot fuse them). Writes DIR/triton_probe.json
and, with TRITON_CACHE_DIR, DIR/triton_cache.tgz (the kernels' PTX and cubin: read the SASS with nvdisasm).
Measured on the H200 on 2026-12-02 (EXPERIMENT_LOG seq 198): the scale is fma(amax, fl32(1/127), 1e-7) in every
case; the codes are x * rcp.approx(scale) (div.full.f32).
"""
import importlib.util
import json
import os
import sys
import tarfile

import cupy
import torch

from sagelib.backends import sage2

out = os.environ["OUT"]
spec = importlib.util.spec_from_file_location(
    "peer_qpt", os.path.join(sage2.peer_dir(), "sageattention", "triton", "quant_per_thread.py"))
qpt = importlib.util.module_from_spec(spec)
spec.loader.exec_module(qpt)

SRC = r'''
extern "C" __global__ void scale_forms(const float *amax, float *out, int n, int form, float eps) {
  int i = blockIdx.x * blockDim.x + threadIdx.x; if (i >= n) return;
  float a = amax[i], r, c = 127.0f, inv = 1.0f / 127.0f;
  switch (form) {
    case 0: asm("div.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(c)); asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(r), "f"(eps)); break;
    case 1: asm("mul.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(inv)); asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(r), "f"(eps)); break;
    case 2: asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(r) : "f"(a), "f"(inv), "f"(eps)); break;
    case 3: asm("div.full.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(c)); asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(r), "f"(eps)); break;
    case 4: asm("div.approx.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(c)); asm("add.rn.f32 %0, %1, %2;" : "=f"(r) : "f"(r), "f"(eps)); break;
    case 5: { float rc; asm("rcp.approx.f32 %0, %1;" : "=f"(rc) : "f"(c)); asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(r) : "f"(a), "f"(rc), "f"(eps)); } break;
    case 6: asm("div.full.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(c)); r = r + eps; break;
  }
  out[i] = r;
}
extern "C" __global__ void code_forms(const float *x, const float *s, signed char *out, long long n, int form) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x; if (i >= n) return;
  float a = x[i], b = s[i], q, h, rc;
  switch (form) {
    case 0: asm("div.rn.f32 %0, %1, %2;" : "=f"(q) : "f"(a), "f"(b)); break;
    case 1: asm("div.full.f32 %0, %1, %2;" : "=f"(q) : "f"(a), "f"(b)); break;
    case 2: asm("div.approx.f32 %0, %1, %2;" : "=f"(q) : "f"(a), "f"(b)); break;
    case 3: asm("rcp.rn.f32 %0, %1;" : "=f"(rc) : "f"(b)); asm("mul.rn.f32 %0, %1, %2;" : "=f"(q) : "f"(a), "f"(rc)); break;
    case 4: asm("rcp.approx.f32 %0, %1;" : "=f"(rc) : "f"(b)); asm("mul.rn.f32 %0, %1, %2;" : "=f"(q) : "f"(a), "f"(rc)); break;
    case 5: asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(rc) : "f"(b)); asm("mul.rn.f32 %0, %1, %2;" : "=f"(q) : "f"(a), "f"(rc)); break;
    case 6: asm("div.full.f32 %0, %1, %2;" : "=f"(q) : "f"(a), "f"(b)); break;
  }
  h = q >= 0.0f ? 0.5f : -0.5f;
  if (form == 6) { float t; asm("rcp.approx.f32 %0, %1;" : "=f"(rc) : "f"(b)); asm("fma.rn.f32 %0, %1, %2, %3;" : "=f"(t) : "f"(a), "f"(rc), "f"(h)); q = t; }
  else asm("add.rn.f32 %0, %1, %2;" : "=f"(q) : "f"(q), "f"(h));
  int v; asm("cvt.rzi.sat.s32.f32 %0, %1;" : "=r"(v) : "f"(q));
  v = v > 127 ? 127 : (v < -128 ? -128 : v);
  out[i] = (signed char)v;
}
'''
mod = cupy.RawModule(code=SRC)
SCALE_FORMS = ["div_rn+add", "mul_inv+add", "fma_inv", "div_full+add", "div_approx+add", "fma_rcpapprox", "div_full+c_add"]
CODE_FORMS = ["div_rn", "div_full", "div_approx", "rcp_rn*x", "rcp_approx*x", "rcp_approx_ftz*x", "fma(x,rcp_approx,h)"]
EPS = float(torch.tensor(1e-7, dtype=torch.float32))


def scale_form(amax, form):
    amax = amax.contiguous().float()
    o = torch.empty_like(amax)
    n = amax.numel()
    mod.get_function("scale_forms")(((n + 255) // 256,), (256,), (cupy.asarray(amax), cupy.asarray(o), cupy.int32(n), cupy.int32(form), cupy.float32(EPS)))
    torch.cuda.synchronize()
    return o


def code_form(x, s, form):
    x, s = x.contiguous().float(), s.contiguous().float()
    o = torch.empty(x.shape, dtype=torch.int8, device=x.device)
    n = x.numel()
    mod.get_function("code_forms")(((n + 255) // 256,), (256,), (cupy.asarray(x), cupy.asarray(s), cupy.asarray(o), cupy.int64(n), cupy.int32(form)))
    torch.cuda.synchronize()
    return o


def groups_q(n, warpq):  # row -> group index within [B,H,G]
    row = torch.arange(n, device="cuda")
    return (row // warpq) * 8 + (row % 8)


def groups_k(n, warpk=64):
    row = torch.arange(n, device="cuda")
    return (row // warpk) * 4 + ((row % warpk) % 8) // 2


def study(x, kind, warpq=32):
    """x: [B,H,N,D] fp16 input of the quantizer (already smoothed for K)."""
    n = x.shape[2]
    if kind == "q":
        qi, qs, _, _ = qpt.per_thread_int8(x, x[:, :, :64].contiguous(), None, WARPQ=warpq)
        g = groups_q(n, warpq)
    else:
        _, _, qi, qs = qpt.per_thread_int8(x[:, :, :128].contiguous(), x, None, WARPQ=warpq)
        g = groups_k(n)
    xf = x.float()
    ng = qs.shape[-1]
    row_amax = xf.abs().amax(-1)
    amax = torch.zeros(*xf.shape[:2], ng, device="cuda").scatter_reduce(2, g.expand(*xf.shape[:2], n), row_amax, "amax")
    res = {"scales": int(qs.numel()), "scale_exact": {}, "codes": int(qi.numel()), "code_differ_given_real_scale": {},
           "code_differ_given_form_scale": {}}
    for f, name in enumerate(SCALE_FORMS):
        res["scale_exact"][name] = int((scale_form(amax, f) == qs).sum())
    sx = qs[:, :, g].unsqueeze(-1).expand_as(xf)
    for f, name in enumerate(CODE_FORMS):
        res["code_differ_given_real_scale"][name] = int((code_form(xf, sx, f) != qi).sum())
    # where the best scale form differs, show examples
    best = max(res["scale_exact"], key=res["scale_exact"].get)
    bs = scale_form(amax, SCALE_FORMS.index(best))
    bad = (bs != qs).nonzero()[:5].tolist()
    res["scale_examples"] = [{"amax": float(amax[tuple(i)]), "real": float(qs[tuple(i)]).hex(), "best": float(bs[tuple(i)]).hex()} for i in bad]
    bad = (code_form(xf, sx, 1) != qi).nonzero()[:5].tolist()
    res["code_examples"] = [{"x": float(xf[tuple(i)]).hex(), "s": float(sx[tuple(i)]).hex(), "real": int(qi[tuple(i)])} for i in bad]
    return res


torch.manual_seed(0)
results = {}
for name, shape, bias in [("randn_N4096_D128", (2, 16, 4096, 128), 0.0), ("kbias_N4096_D128", (2, 16, 4096, 128), 3.0),
                          ("randn_N4096_D64", (2, 16, 4096, 64), 0.0), ("wide_N4096_D128", (2, 16, 4096, 128), 0.0)]:
    x = torch.randn(shape, device="cuda", dtype=torch.float16)
    if name.startswith("wide"):
        x = (x * 40).half()
    if bias:
        x = (x + bias * torch.randn(1, shape[1], 1, shape[3], device="cuda", dtype=torch.float16)).half()
        x = x - x.mean(dim=2, keepdim=True)
    for kind in ("q", "k"):
        results[f"{name}:{kind}"] = study(x, kind)
json.dump(results, open(os.path.join(out, "triton_probe.json"), "w"), indent=1)
for k, r in results.items():
    print(k, "scales", r["scales"], r["scale_exact"])
    print("   codes", r["codes"], "given real scale:", r["code_differ_given_real_scale"])
    print("   ", r["scale_examples"][:2], r["code_examples"][:2])
cache = os.environ.get("TRITON_CACHE_DIR")
if cache:
    with tarfile.open(os.path.join(out, "triton_cache.tgz"), "w:gz") as t:
        t.add(cache, arcname="triton_cache")
import triton

print("triton", triton.__version__, file=sys.stderr)
