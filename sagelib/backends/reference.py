"""The ``reference`` backend: the executable contract itself."""

from __future__ import annotations

from sagelib import contract
from sagelib.backends import Backend


class ReferenceBackend(Backend):
    name = "reference"
    description = "the numerical contract in torch (sm90 preset, per_thread, fp32+fp32)"
    quantized = True

    def __init__(self, preset: str = "sm90", granularity: str = "per_thread", pv_accum: str = "fp32+fp32"):
        self.preset = preset
        self.granularity = granularity
        self.pv_accum = pv_accum

    def attention(self, q, k, v, *, causal=False, sm_scale=None, layout="HND", return_lse=False):
        return contract.attention(
            q, k, v, causal=causal, sm_scale=sm_scale, layout=layout, preset=self.preset,
            granularity=self.granularity, pv_accum=self.pv_accum, return_lse=return_lse,
        )
