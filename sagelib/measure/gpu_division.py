"""The GPU's float32 divisions, elementwise on torch tensors: what the real quantizers' ``/`` compiles to.

The contract divides exactly (IEEE, correctly rounded). SageAttention2's CUDA quantizers are built with
``--use_fast_math`` and its per-thread INT8 quantizer is a Triton kernel; both divide approximately, with the
GPU's reciprocal unit, which no CPU reproduces bit for bit. :func:`divider` gives each form as a torch function
so the peer parity can put it in the contract's place (:func:`sagelib.contract.quantize.division`) and count
which bytes each form explains:

* ``fast_math``: ``a / b`` compiled by NVRTC with ``--use_fast_math`` (how the peer's CUDA quantizers divide);
* ``div_full``: PTX ``div.full.f32`` (full-range approximation, 2 ulp);
* ``div_approx``: PTX ``div.approx.f32`` (``a * rcp.approx(b)``);
* ``ieee``: torch's own ``a / b`` (the contract's).
"""

from __future__ import annotations

from functools import cache

import torch

KINDS = ("ieee", "fast_math", "div_full", "div_approx")

_BODY = {
    "fast_math": "out[i] = a[i] / b[i];",
    "div_full": 'asm("div.full.f32 %0, %1, %2;" : "=f"(out[i]) : "f"(a[i]), "f"(b[i]));',
    "div_approx": 'asm("div.approx.f32 %0, %1, %2;" : "=f"(out[i]) : "f"(a[i]), "f"(b[i]));',
}


@cache
def _kernel(kind: str):
    import cupy

    source = ('extern "C" __global__ void divide(const float *a, const float *b, float *out, long long n) {\n'
              '  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n'
              f'  if (i < n) {{ {_BODY[kind]} }}\n}}\n')
    options = ("--use_fast_math",) if kind == "fast_math" else ()
    return cupy.RawKernel(source, "divide", options=options)


def divider(kind: str):
    """``divide(a, b)`` for float32 CUDA tensors of one shape, the quotient as the GPU's ``kind`` computes it."""
    if kind not in KINDS:
        raise ValueError(f"kind: expected one of {', '.join(KINDS)}, got {kind!r}")
    if kind == "ieee":
        return lambda a, b: a / b

    def divide(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        import cupy

        if a.shape != b.shape or a.dtype != torch.float32 or b.dtype != torch.float32 or not a.is_cuda:
            raise ValueError(f"a, b: expected float32 CUDA tensors of one shape, got {a.dtype} {tuple(a.shape)} "
                             f"on {a.device} and {b.dtype} {tuple(b.shape)}")
        a, b = a.contiguous(), b.contiguous()
        out = torch.empty_like(a)
        n = a.numel()
        if n:
            with cupy.cuda.ExternalStream(torch.cuda.current_stream(a.device).cuda_stream):
                _kernel(kind)(((n + 255) // 256,), (256,),
                              (cupy.asarray(a), cupy.asarray(b), cupy.asarray(out), cupy.int64(n)))
        return out

    return divide
