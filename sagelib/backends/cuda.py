"""The ``cuda`` backends: our quantizers and attention kernels (``kernels/``).

One call runs three launches on torch's current stream: Q to INT8
(``quant_qk.cu``), K smoothing + INT8 K + V to e4m3 in one persistent kernel
(``quant_kv.cu``), then attention (``attn_mma.cu``). The numerics are the
contract's ``sm89`` preset (sagelib.contract); ``kernel_only`` quantizes first
and returns a closure that launches only the attention kernel.

``cuda-sm90`` is the Hopper kernel (``attn_sm90.cu``: TMA, wgmma, warp
specialisation) with the ``sm90`` preset's numerics; it runs on sm_90 GPUs only.
``cuda-sm90-k64`` is its three-consumer geometry: the ``sm90`` preset with 64-key
online-softmax steps (the contract's ``cta_k=64``); ``cuda-sm90-fp16-inner`` the preset
with the ``fp32+fp16`` inner level.

``attention`` takes the fast host path (:mod:`sagelib.backends.kernels.plans`: validated and packed once per call
signature, launched through the driver) whenever it can, and the general path otherwise
(:meth:`CudaBackend.general_attention`, also what tests compare the plans with).
"""

from __future__ import annotations

import torch

from sagelib.backends import Backend
from sagelib.backends.kernels import plans


class CudaBackend(Backend):
    name = "cuda"
    quantized = True

    def __init__(self, granularity: str = "per_thread", pv_accum: str = "fp32+fp32", check_finite: bool = False):
        self.granularity = granularity
        self.pv_accum = pv_accum
        #: The NaN/Inf scan reads q, k and v once more and synchronizes with the host;
        #: off by default on this fast path (sagelib.backends.kernels.mma.attention keeps it on).
        self.check_finite = check_finite
        self.description = (f"our kernels: INT8 QK / e4m3 PV mma.sync, sm89 preset, {granularity}, {pv_accum}")

    def unavailable_reason(self) -> str | None:
        if not torch.cuda.is_available():
            return "needs a CUDA GPU; torch sees none on this machine (run on a GPU host with a CUDA build of torch)"
        from sagelib.cuda import cupy_missing_reason

        missing = cupy_missing_reason()
        if missing:
            return missing
        from sagelib.cuda.build import arch_for_capability, nvrtc_version

        if nvrtc_version() is None:
            return "needs NVRTC (libnvrtc); install it with pip install -e '.[cuda13]' or a CUDA toolkit"
        major, minor = torch.cuda.get_device_capability()
        try:
            arch_for_capability(major, minor)
        except ValueError as exc:
            return str(exc)
        return None

    #: which host code runs the kernel on the fast path (sagelib.backends.kernels.plans)
    kernel = "mma"
    cta_k: int | None = None

    def attention(self, q, k, v, *, causal=False, sm_scale=None, layout="HND", return_lse=False,
                  causal_alignment="bottom_right"):
        """The contract's call; ``causal_alignment`` 'top_left' is SDPA's for N_q != N_kv."""
        if not return_lse and not self.check_finite and plans.enabled():
            out = plans.run(self.kernel, q, k, v, causal=causal, sm_scale=sm_scale, layout=layout,
                            granularity=self.granularity, pv_accum=self.pv_accum, causal_alignment=causal_alignment,
                            cta_k=self.cta_k)
            if out is not None:
                return out
        return self.general_attention(q, k, v, causal=causal, sm_scale=sm_scale, layout=layout,
                                      return_lse=return_lse, causal_alignment=causal_alignment)

    def general_attention(self, q, k, v, *, causal=False, sm_scale=None, layout="HND", return_lse=False,
                          causal_alignment="bottom_right"):
        """Every call the way it went before plans: validated, allocated and packed anew (what plans must match)."""
        from sagelib.backends.kernels import mma

        return mma.attention(q, k, v, causal=causal, sm_scale=sm_scale, layout=layout, granularity=self.granularity,
                             pv_accum=self.pv_accum, return_lse=return_lse, check_finite=self.check_finite,
                             causal_alignment=causal_alignment)

    def kernel_only(self, q, k, v, *, causal=False, sm_scale=None, layout="HND"):
        from sagelib.backends.kernels import mma

        prepared = mma.prepare(q, k, v, causal=causal, sm_scale=sm_scale, layout=layout,
                               granularity=self.granularity, pv_accum=self.pv_accum, check_finite=self.check_finite)
        return lambda: mma.run_attention(prepared)


class CudaPerWarpFp16(CudaBackend):
    """The sm120/sm121 configuration of SageAttention2 (per_warp, fp32+fp16), on our kernel."""

    name = "cuda-per-warp-fp16"

    def __init__(self):
        super().__init__(granularity="per_warp", pv_accum="fp32+fp16")


class CudaSm90Backend(CudaBackend):
    """The sm_90a kernel (kernels/attn_sm90.cu), the contract's sm90 preset: per_thread, fp32+fp32."""

    name = "cuda-sm90"
    kernel = "sm90"

    #: The contract's traversal block the kernel computes (None: the preset's 128 keys); with the head dim it
    #: picks the kernel's geometry (sm90.geometry_for).
    cta_k: int | None = None

    def __init__(self, granularity: str = "per_thread", check_finite: bool = False, pv_accum: str = "fp32+fp32"):
        super().__init__(granularity=granularity, pv_accum=pv_accum, check_finite=check_finite)
        self.description = f"our Hopper kernel: INT8 QK / e4m3 PV wgmma, TMA, sm90 preset, {granularity}, {pv_accum}"

    def unavailable_reason(self) -> str | None:
        from sagelib.cuda.features import switched_off_reason

        # the setting first: with the Hopper paths off the reason names it on any machine
        reason = switched_off_reason() or super().unavailable_reason()
        if reason is not None:
            return reason
        from sagelib.backends.kernels import sm90

        return sm90.unavailable_reason()

    def general_attention(self, q, k, v, *, causal=False, sm_scale=None, layout="HND", return_lse=False,
                          causal_alignment="bottom_right"):
        from sagelib.backends.kernels import sm90

        return sm90.attention(q, k, v, causal=causal, sm_scale=sm_scale, layout=layout,
                              granularity=self.granularity, pv_accum=self.pv_accum, return_lse=return_lse,
                              check_finite=self.check_finite, cta_k=self.cta_k, causal_alignment=causal_alignment)

    def kernel_only(self, q, k, v, *, causal=False, sm_scale=None, layout="HND"):
        from sagelib.backends.kernels import sm90

        prepared = sm90.prepare(q, k, v, causal=causal, sm_scale=sm_scale, layout=layout, granularity=self.granularity,
                                pv_accum=self.pv_accum, check_finite=self.check_finite)
        return lambda: sm90.run_attention(prepared, cta_k=self.cta_k)


class CudaSm90Rotation(CudaSm90Backend):
    """The sm_90a kernel's three-consumer geometry: the sm90 preset with cta_k 64."""

    name = "cuda-sm90-k64"
    cta_k = 64

    def __init__(self, granularity: str = "per_thread", check_finite: bool = False):
        super().__init__(granularity=granularity, check_finite=check_finite)
        self.description = ("our Hopper kernel, three consumer warpgroups: INT8 QK / e4m3 PV wgmma, TMA, "
                            f"sm90 preset with 64-key steps (cta_k 64), {granularity}, fp32+fp32")


class CudaSm90Fp16Inner(CudaSm90Backend):
    """The sm_90a kernel with the fp32+fp16 inner level: each 128-key block's P.V is two 64-key partials in f16
    registers (V at 2.25), both joined into the fp32 O after the block's wgmma batch
    (kernels/include/attn_sm90/fp16_inner.cuh). As accurate as ``cuda-sm90``, about 0.9x its speed at D128."""

    name = "cuda-sm90-fp16-inner"

    def __init__(self, granularity: str = "per_thread", check_finite: bool = False):
        super().__init__(granularity=granularity, check_finite=check_finite, pv_accum="fp32+fp16")
