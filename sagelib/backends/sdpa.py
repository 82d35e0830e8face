"""PyTorch's ``scaled_dot_product_attention`` pinned to one of its fused backends.

Three registered names, one class: ``sdpa-flash`` (FlashAttention-2 inside PyTorch),
``sdpa-cudnn`` (cuDNN's fused attention, the fastest fp16 peer on Hopper) and ``sdpa-efficient``
(the memory-efficient xformers-style kernel). Pinning matters: left to itself SDPA picks a backend
by heuristics, and a benchmark must say which kernel it timed. If the pinned backend cannot take
the inputs, PyTorch refuses rather than falls back, and the refusal is passed on as a ValueError.

These are the full-precision peers: fp16/bf16 operands end to end, no quantization, so
``quantized`` is False and there is no kernel-only closure.
"""

from __future__ import annotations

import torch

from sagelib.backends import Backend
from sagelib.contract.arguments import check_call
from sagelib.errors import InputError

_KINDS = {
    "sdpa-flash": ("FLASH_ATTENTION", "PyTorch SDPA, flash backend (FlashAttention-2)"),
    "sdpa-cudnn": ("CUDNN_ATTENTION", "PyTorch SDPA, cuDNN fused attention backend"),
    "sdpa-efficient": ("EFFICIENT_ATTENTION", "PyTorch SDPA, memory-efficient backend"),
}


class SdpaBackend(Backend):
    quantized = False

    def __init__(self, name: str):
        if name not in _KINDS:
            raise InputError(f"SdpaBackend: name must be one of {', '.join(_KINDS)}, got {name!r}")
        self.name = name
        self._sdp_name, self.description = _KINDS[name]

    def _sdp_backend(self):
        from torch.nn.attention import SDPBackend

        return getattr(SDPBackend, self._sdp_name, None)

    def unavailable_reason(self) -> str | None:
        if not torch.cuda.is_available():
            build = "a CPU-only build" if torch.version.cuda is None else f"built for CUDA {torch.version.cuda}"
            return (f"needs a CUDA GPU; torch {torch.__version__} ({build}) sees none. "
                    "Run on a GPU host with a CUDA build of torch")
        try:
            backend = self._sdp_backend()
        except ImportError:
            backend = None
        if backend is None:
            return (f"torch {torch.__version__} has no SDPBackend.{self._sdp_name}; "
                    "install torch>=2.5 (pip install -U torch)")
        if self.name == "sdpa-cudnn" and not torch.backends.cudnn.is_available():
            return "cuDNN is not available to this torch build; install a CUDA build of torch that bundles cuDNN"
        major, _ = torch.cuda.get_device_capability()
        if self.name == "sdpa-flash" and major < 8:
            return f"the flash backend needs compute capability 8.0 or newer; this GPU is {major}.x"
        return None

    def attention(self, q, k, v, *, causal=False, sm_scale=None, layout="HND", return_lse=False):
        from torch.nn.attention import sdpa_kernel

        check_call(causal=causal, sm_scale=sm_scale, return_lse=return_lse)
        if return_lse:
            raise InputError(f"return_lse: {self.name} does not return the log-sum-exp; "
                             "use the reference or cuda backend when lse is needed")
        if layout not in ("HND", "NHD"):
            raise InputError(f"layout: expected 'HND' or 'NHD', got {layout!r}")
        if layout == "NHD":  # SDPA reads [B, H, N, D]; a transposed view costs nothing
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        gqa = {"enable_gqa": True} if q.shape[1] != k.shape[1] else {}
        try:
            with sdpa_kernel(self._sdp_backend()):
                out = torch.nn.functional.scaled_dot_product_attention(
                    q, k, v, is_causal=causal, scale=sm_scale, **gqa)
        except RuntimeError as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(
                f"{self.name}: PyTorch refused these inputs (q {tuple(q.shape)} {q.dtype}, causal={causal}): "
                f"{first}; try another sdpa-* backend or change dtype/head_dim") from exc
        return out.transpose(1, 2) if layout == "NHD" else out


def SdpaFlash() -> SdpaBackend:
    return SdpaBackend("sdpa-flash")


def SdpaCudnn() -> SdpaBackend:
    return SdpaBackend("sdpa-cudnn")


def SdpaEfficient() -> SdpaBackend:
    return SdpaBackend("sdpa-efficient")
