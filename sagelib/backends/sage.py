"""The ``sageattention`` package from PyPI (1.0.6: SageAttention 1, Triton kernels) as a peer.

SageAttention 1 quantizes Q and K to int8 per block (with K smoothing) and keeps P.V in fp16;
its kernels are Triton, so it runs wherever Triton and a CUDA GPU do. It is the 8-bit peer the
workbook can install with pip; SageAttention 2's CUDA kernels are built from source and are not
on PyPI.

Two differences from calling ``sageattn`` directly, both so the comparison is fair and safe:

* ``sageattn(smooth_k=True)`` subtracts K's mean *in place*, changing the caller's tensor. This
  backend subtracts into a new tensor and calls the package with ``smooth_k=False``: the same
  arithmetic and the same memory traffic (read K, write K), and the caller's K is left alone.
* :meth:`SageBackend.kernel_only` quantizes ahead of time with the package's own quantizer and
  returns a closure that launches only the attention kernel, to set beside the end-to-end time.
"""

from __future__ import annotations

import importlib
import importlib.metadata

import torch

from sagelib.backends import Backend
from sagelib.contract.arguments import check_call
from sagelib.errors import InputError

TESTED_VERSION = "1.0.6"
_INSTALL = f"pip install sageattention=={TESTED_VERSION} (needs triton and a CUDA GPU)"


def _package():
    return importlib.import_module("sageattention")


def installed_version() -> str | None:
    try:
        return importlib.metadata.version("sageattention")
    except importlib.metadata.PackageNotFoundError:
        return None


class SageBackend(Backend):
    name = "sage"
    description = "sageattention package (SageAttention 1: int8 QK per block, fp16 PV, Triton)"
    quantized = True

    def unavailable_reason(self) -> str | None:
        if not torch.cuda.is_available():
            return f"needs a CUDA GPU, and this machine has none; on a GPU host: {_INSTALL}"
        try:
            importlib.import_module("triton")
        except ImportError:
            return f"triton is not installed; {_INSTALL}"
        try:
            _package()
        except ImportError as exc:
            return f"the sageattention package is not installed ({exc}); {_INSTALL}"
        return None

    @staticmethod
    def _check(q, layout):
        if layout not in ("HND", "NHD"):
            raise InputError(f"layout: expected 'HND' or 'NHD', got {layout!r}")
        if q.shape[-1] not in (64, 96, 128):
            raise InputError(f"head_dim: sageattention supports 64, 96 or 128, got {q.shape[-1]}; "
                             "pad head_dim or use the reference backend")
        if q.dtype not in (torch.float16, torch.bfloat16):
            raise InputError(f"dtype: sage backend takes float16 or bfloat16, got {q.dtype}; convert with q.half()")

    def attention(self, q, k, v, *, causal=False, sm_scale=None, layout="HND", return_lse=False):
        check_call(causal=causal, sm_scale=sm_scale, return_lse=return_lse)
        if return_lse:
            raise InputError("return_lse: the sageattention package does not return the log-sum-exp; "
                             "use the reference or cuda backend when lse is needed")
        self._check(q, layout)
        seq_dim = 2 if layout == "HND" else 1
        k_smoothed = k - k.mean(dim=seq_dim, keepdim=True)
        return _package().sageattn(q, k_smoothed, v, tensor_layout=layout, is_causal=causal,
                                   sm_scale=sm_scale, smooth_k=False)

    def kernel_only(self, q, k, v, *, causal=False, sm_scale=None, layout="HND"):
        """Quantize now with the package's quantizer; the closure runs only the attention kernel.

        None when the installed version lacks the 1.0.6 module layout, or for head_dim 96 (which
        1.0.6 sends to separate kernels this closure does not wrap).
        """
        check_call(causal=causal, sm_scale=sm_scale)
        self._check(q, layout)
        if q.shape[-1] == 96:
            return None
        try:
            quant = importlib.import_module("sageattention.quant_per_block")
            kernel = importlib.import_module(
                "sageattention.attn_qk_int8_per_block_causal" if causal else "sageattention.attn_qk_int8_per_block")
        except ImportError:
            return None
        seq_dim = 2 if layout == "HND" else 1
        k_smoothed = k - k.mean(dim=seq_dim, keepdim=True)
        q_int8, q_scale, k_int8, k_scale = quant.per_block_int8(q, k_smoothed, sm_scale=sm_scale, tensor_layout=layout)
        v16 = v if v.dtype == torch.float16 else v.to(torch.float16)
        out_dtype = q.dtype
        return lambda: kernel.forward(q_int8, k_int8, v16, q_scale, k_scale, tensor_layout=layout,
                                      output_dtype=out_dtype)
