"""SageAttention2 (thu-ml/SageAttention, built from source) as a peer: its real CUDA kernels.

SageAttention2's CUDA kernels are not on PyPI; ``scripts/build_peer.sh`` builds them from the public
source into ``.peer/SageAttention`` in about four minutes on a GPU machine (docs/design/peers.md). This module imports that build (or any installed ``sageattention`` 2.x) and exposes the
three configurations the workbook measures against:

=========================  ======================================================================
backend                    the peer's call
=========================  ======================================================================
sage2-sm90                 ``sageattn_qk_int8_pv_fp8_cuda_sm90``: per_thread, fp32+fp32 (Hopper)
sage2-sm89                 ``sageattn_qk_int8_pv_fp8_cuda``: per_thread, fp32+fp32 (mma.sync family)
sage2-sm89-per-warp-fp16   ``sageattn_qk_int8_pv_fp8_cuda``: per_warp, fp32+fp16 (its sm120/121 choice)
=========================  ======================================================================

The peer's conventions, which its contract twin must match (see :func:`contract_options`): causal
masks are top-left aligned, and the lse's smoothing correction is computed in the input dtype.
The peer never modifies the caller's tensors on these paths (its K mean goes to the quantizer).
"""

from __future__ import annotations

import importlib
import os
import sys
from dataclasses import dataclass

import torch

from sagelib import paths
from sagelib.backends import Backend
from sagelib.errors import InputError

#: Where the peer script leaves the built source tree (git-ignored); SAGELIB_PEER_DIR overrides it.
DEFAULT_PEER_DIR = paths.REPO_ROOT / ".peer" / "SageAttention"
_BUILD_HINT = ("build it with `scripts/build_peer.sh source && scripts/build_peer.sh build` on a GPU machine "
               "(docs/design/peers.md), or install SageAttention 2 from source")


@dataclass(frozen=True)
class PeerConfig:
    """One configuration of the peer and its contract twin."""

    name: str
    entry: str  #: the peer's function
    preset: str  #: the contract preset of its geometry
    granularity: str
    pv_accum: str
    capability: tuple[int, int] | None = None  #: the only GPU it runs on (None: sm_89 and newer)


CONFIGS = {
    "sage2-sm90": PeerConfig("sage2-sm90", "sageattn_qk_int8_pv_fp8_cuda_sm90", "sm90", "per_thread", "fp32+fp32",
                             capability=(9, 0)),
    "sage2-sm89": PeerConfig("sage2-sm89", "sageattn_qk_int8_pv_fp8_cuda", "sm89", "per_thread", "fp32+fp32"),
    "sage2-sm89-per-warp-fp16": PeerConfig("sage2-sm89-per-warp-fp16", "sageattn_qk_int8_pv_fp8_cuda", "sm89",
                                           "per_warp", "fp32+fp16"),
}


def peer_dir():
    return os.environ.get("SAGELIB_PEER_DIR") or str(DEFAULT_PEER_DIR)


def package():
    """The peer's ``sageattention`` package (2.x): the peer build first, then whatever is installed."""
    where = peer_dir()
    if os.path.isdir(os.path.join(where, "sageattention")) and where not in sys.path:
        sys.path.insert(0, where)
    module = importlib.import_module("sageattention")
    if not hasattr(module, "sageattn_qk_int8_pv_fp8_cuda"):
        raise ImportError(f"the sageattention found at {getattr(module, '__file__', '?')} is not SageAttention 2 "
                          "(no sageattn_qk_int8_pv_fp8_cuda; the PyPI package is SageAttention 1)")
    return module


def contract_options(config: PeerConfig) -> dict:
    """The contract keywords that reproduce ``config``'s numerics (its conventions included)."""
    return dict(preset=config.preset, granularity=config.granularity, pv_accum=config.pv_accum,
                causal_alignment="top_left", lse_correction="input_dtype")


class Sage2Backend(Backend):
    quantized = True
    config: PeerConfig

    def __init__(self, name: str = "sage2-sm90"):
        self.config = CONFIGS[name]
        self.name = name
        self.description = (f"SageAttention2 (real kernels, built from source): {self.config.entry}, "
                            f"{self.config.granularity}, {self.config.pv_accum}")

    def unavailable_reason(self) -> str | None:
        if not torch.cuda.is_available():
            return f"needs a CUDA GPU, and this machine has none; {_BUILD_HINT}"
        cap = torch.cuda.get_device_capability()
        if self.config.capability and cap != self.config.capability:
            return f"{self.config.entry} runs on sm_{''.join(map(str, self.config.capability))} only, this GPU is " \
                   f"sm_{cap[0]}{cap[1]}"
        if cap < (8, 9):
            return f"needs an fp8 GPU (sm_89 or newer), this GPU is sm_{cap[0]}{cap[1]}"
        try:
            module = package()
        except ImportError as exc:
            return f"SageAttention 2 does not import ({exc}); {_BUILD_HINT}"
        if self.config.capability == (9, 0) and not getattr(importlib.import_module("sageattention.core"),
                                                            "SM90_ENABLED", False):
            return f"the SageAttention 2 build at {module.__file__} has no sm90 extension; {_BUILD_HINT}"
        return None

    def attention(self, q, k, v, *, causal=False, sm_scale=None, layout="HND", return_lse=False):
        if layout not in ("HND", "NHD"):
            raise InputError(f"layout: expected 'HND' or 'NHD', got {layout!r}")
        if q.dtype not in (torch.float16, torch.bfloat16):
            raise InputError(f"q: SageAttention2 takes float16 or bfloat16, got {q.dtype}; convert with q.half()")
        if q.shape[-1] > 128:
            raise InputError(f"head_dim: SageAttention2 supports up to 128, got {q.shape[-1]}")
        fn = getattr(package(), self.config.entry)
        extra = {} if self.config.capability == (9, 0) else {"pv_accum_dtype": self.config.pv_accum}
        return fn(q, k, v, tensor_layout=layout, is_causal=causal, qk_quant_gran=self.config.granularity,
                  sm_scale=sm_scale, return_lse=return_lse, **extra)


class Sage2Sm90(Sage2Backend):
    def __init__(self):
        super().__init__("sage2-sm90")


class Sage2Sm89(Sage2Backend):
    def __init__(self):
        super().__init__("sage2-sm89")


class Sage2Sm89PerWarpFp16(Sage2Backend):
    def __init__(self):
        super().__init__("sage2-sm89-per-warp-fp16")
