"""One attention interface, several implementations, chosen by name.

====================  =============================================================
name                  what runs
====================  =============================================================
reference             the executable contract (:mod:`sagelib.contract`), CPU or GPU
cuda                  our kernels in ``kernels/`` through CuPy (needs a CUDA GPU)
cuda-sm90             our Hopper kernel (sm_90 GPUs: H100, H200)
cuda-sm90-k64         its three-consumer geometry: the sm90 preset with cta_k 64
cuda-sm90-fp16-inner  the sm90 preset with the fp32+fp16 inner level (P.V in 64-key fp16 partials)
sdpa-*                PyTorch scaled_dot_product_attention with one SDPA backend
sage                  the ``sageattention`` package, when it is installed
sage2-*               SageAttention2's real CUDA kernels, built from source (``sagelib.backends.sage2``)
cudnn-fp8             cuDNN's FP8 attention, per-tensor scales (``sagelib.backends.cudnn_fp8``): the speed anchor
auto                  ``cuda-sm90`` on sm_90 (unless SAGELIB_HOPPER=off), ``cuda`` on other GPUs with CuPy, else
                      ``reference``
====================  =============================================================

Every backend answers the same call as :func:`sagelib.contract.attention`
(``q, k, v, causal, sm_scale, layout, return_lse``). A backend that cannot run
on this machine says why in :meth:`Backend.unavailable_reason`, naming what to
install; :func:`get` turns that into a clear error.
"""

from __future__ import annotations

import importlib
from typing import Callable

import torch

from sagelib.errors import InputError, KernelUnavailable


class Backend:
    """Base class: subclasses set ``name``/``description`` and implement ``attention``."""

    name: str = ""
    description: str = ""
    #: True when the backend computes with 8-bit operands (ours, SageAttention).
    quantized: bool = False

    def unavailable_reason(self) -> str | None:
        """None when usable here; otherwise what is missing and how to get it."""
        return None

    def attention(self, q, k, v, *, causal=False, sm_scale=None, layout="HND", return_lse=False):
        raise NotImplementedError

    def kernel_only(self, q, k, v, *, causal=False, sm_scale=None, layout="HND") -> Callable[[], torch.Tensor] | None:
        """A closure that runs only the attention kernel on inputs quantized ahead of time.

        None where the backend has no separate quantization step (SDPA, the reference).
        """
        return None


# name -> "module:attribute" of a zero-argument factory; imported lazily so that
# a backend with heavy or missing dependencies costs nothing until asked for.
_REGISTRY: dict[str, str] = {
    "reference": "sagelib.backends.reference:ReferenceBackend",
    "sdpa-flash": "sagelib.backends.sdpa:SdpaFlash",
    "sdpa-cudnn": "sagelib.backends.sdpa:SdpaCudnn",
    "sdpa-efficient": "sagelib.backends.sdpa:SdpaEfficient",
    "sage": "sagelib.backends.sage:SageBackend",
    "sage2-sm90": "sagelib.backends.sage2:Sage2Sm90",
    "sage2-sm89": "sagelib.backends.sage2:Sage2Sm89",
    "sage2-sm89-per-warp-fp16": "sagelib.backends.sage2:Sage2Sm89PerWarpFp16",
    "cudnn-fp8": "sagelib.backends.cudnn_fp8:CudnnFp8",
    "cuda": "sagelib.backends.cuda:CudaBackend",
    "cuda-per-warp-fp16": "sagelib.backends.cuda:CudaPerWarpFp16",
    "cuda-sm90": "sagelib.backends.cuda:CudaSm90Backend",
    "cuda-sm90-k64": "sagelib.backends.cuda:CudaSm90Rotation",
    "cuda-sm90-fp16-inner": "sagelib.backends.cuda:CudaSm90Fp16Inner",
}


def register(name: str, target: str) -> None:
    """Add a backend: ``target`` is ``"package.module:Factory"``."""
    _REGISTRY[name] = target


def names() -> list[str]:
    """Every registered backend name (available here or not), plus ``auto``."""
    return sorted(_REGISTRY) + ["auto"]


def _instantiate(name: str) -> Backend:
    module_name, _, attr = _REGISTRY[name].partition(":")
    return getattr(importlib.import_module(module_name), attr)()


def resolve_auto() -> str:
    """The fastest backend usable here: our Hopper kernel, else the portable one, else the reference."""
    if torch.cuda.is_available():
        for name in ("cuda-sm90", "cuda"):
            if name in _REGISTRY and _instantiate(name).unavailable_reason() is None:
                return name
    return "reference"


def get(name: str, *, require_available: bool = True) -> Backend:
    """The backend called ``name``; a ValueError naming the fix when unknown or unusable."""
    if name == "auto":
        name = resolve_auto()
    if name not in _REGISTRY:
        raise InputError(
            f"backend: unknown backend {name!r}; expected one of {', '.join(names())}"
        )
    backend = _instantiate(name)
    if require_available:
        reason = backend.unavailable_reason()
        if reason is not None:
            raise KernelUnavailable(f"backend: {name!r} cannot run on this machine: {reason}")
    return backend


def availability() -> dict[str, str | None]:
    """name -> None (usable) or the reason it is not, for every registered backend."""
    result = {}
    for name in sorted(_REGISTRY):
        try:
            result[name] = _instantiate(name).unavailable_reason()
        except Exception as exc:  # an import error is a reason, not a crash
            result[name] = f"failed to load: {exc}"
    return result
