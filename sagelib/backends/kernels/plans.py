"""The fast host path of our attention backends: one plan per call signature, validated and packed once.

An attention call on our kernels is three launches on the stream: quantize Q (the same launch clears the K/V
quantizer's workspace and the tile counter: no memset launch), smooth and quantize K and V, attend. The general
path (:func:`sagelib.backends.kernels.quantizers.prepare_for` and the kernels' ``run_attention``) validates the
inputs, allocates every intermediate, encodes the Hopper kernel's three TMA descriptors and converts every launch
argument on each call: 270-470 us of host time on the H200 (issue 33). A :class:`Plan` does that work once per *signature* -- the backend, the shapes, strides, dtype and
device of q, k and v, the layout, causal mode and alignment, sm_scale, granularity, accumulation, cta_k and the
CUDA stream -- and keeps the intermediates (quantized operands, scales, the workspace) and the prepared launches
(:class:`sagelib.cuda.prepared.PreparedLaunch`) whose argument blocks name them. A call then checks the
alignment of three addresses, enqueues the two quantizers, allocates the output and enqueues the attention: the
GPU starts on Q while the host still works on the rest of the call.

What a plan shares between calls: its intermediates. Calls with one signature run on one stream (the stream is
part of the signature), so each call's kernels read what the previous call's left only after those finished.
A plan used while a stream is being captured into a CUDA graph is never evicted (the graph keeps reading its
buffers by address); others are, least recently used first, past :data:`MAX_PLANS` plans. ``SAGELIB_LAUNCH_PLANS=0``
turns plans off (every call takes the general path); :func:`clear` drops them (and their memory).

Calls the plan does not take (they go the general way, unchanged): ``return_lse``, the finite scan
(``check_finite``), head dims other than 64 and 128 (padded), inputs whose rows are not 16-byte aligned
(copied), explicit ``stages`` or build options.
"""

from __future__ import annotations

import os
from collections import OrderedDict

import torch

from sagelib.backends.kernels import mma, sm90
from sagelib.backends.kernels.operands import empty_like_layout, kernel_operand
from sagelib.backends.kernels.quantizers import (
    checked_call,
    kv_workspace_bytes,
    operand_specs,
)
from sagelib.contract.validate import to_hnd
from sagelib.cuda.prepared import PreparedLaunch, direct_launches

#: plans kept (least recently used dropped first; those made under graph capture are kept always)
MAX_PLANS = 32
#: bytes of the tile counter after the workspace (one int32, padded so the workspace's end stays 16-byte aligned)
_COUNTER_BYTES = 16

_PLANS: OrderedDict = OrderedDict()
_PINNED: dict = {}


def enabled() -> bool:
    """False when ``SAGELIB_LAUNCH_PLANS=0`` (every call takes the general path)."""
    return os.environ.get("SAGELIB_LAUNCH_PLANS", "1") != "0"


def clear() -> None:
    """Drop every plan that no captured CUDA graph needs (frees their intermediates)."""
    _PLANS.clear()


def count() -> int:
    return len(_PLANS) + len(_PINNED)


class Plan:
    """The prepared launches of one signature and the intermediates they share."""

    def __init__(self, kernel: str, q, k, v, *, causal, sm_scale, layout, granularity, pv_accum, causal_alignment,
                 cta_k, stream: int):
        target = sm90.TARGET if kernel == "sm90" else mma.MMA_TARGET
        shapes, width, flavour = checked_call(target, q, k, v, causal=causal, sm_scale=sm_scale, layout=layout,
                                              granularity=granularity, pv_accum=pv_accum, flavour=None,
                                              smooth_k=True, causal_alignment=causal_alignment, check_finite=False)
        operands = tuple(to_hnd(x, layout) for x in (q, k, v))
        self.supported = width == shapes.head_dim and all(kernel_operand(x, width) is x for x in operands)
        if not self.supported:
            return  # padded or copied operands: the general path
        self.device_index = q.get_device()
        self.stream = stream
        b, h_kv, _, d = operands[1].shape
        ws_bytes = kv_workspace_bytes(b, h_kv, d)
        self.scratch = torch.zeros(ws_bytes + _COUNTER_BYTES, dtype=torch.uint8, device=q.device)
        workspace = self.scratch[:ws_bytes]
        tile_counter = self.scratch[ws_bytes:ws_bytes + 4].view(torch.int32)
        self.direct = direct_launches()
        # on the direct path the Q quantizer clears the scratch on each call; the general launcher zeroes it apart
        q_spec, kv_spec, prepared = operand_specs(target, q, *operands, shapes=shapes, layout=layout,
                                                  granularity=granularity, pv_accum=pv_accum, flavour=flavour,
                                                  causal=causal, causal_alignment=causal_alignment,
                                                  sm_scale=sm_scale, workspace=workspace,
                                                  zero=self.scratch if self.direct else None)
        self.prepared = prepared
        b, h_q, n_q, _ = prepared.q_int8.shape
        self.out_shape = (b, h_q, n_q, width) if layout == "HND" else (b, n_q, h_q, width)
        self.dtype, self.device, self.layout = q.dtype, q.device, layout
        out, out_hnd = empty_like_layout((b, h_q, n_q, width), q.dtype, layout, q.device)
        if kernel == "sm90":
            attn = sm90.attention_spec(prepared, out_hnd, None, cta_k=cta_k, tile_counter=tile_counter)
        else:
            attn = mma.attention_spec(prepared, out_hnd, None)
        self.quant_q = PreparedLaunch(q_spec, ("x",), direct=self.direct)
        self.quant_kv = PreparedLaunch(kv_spec, ("k", "v"), direct=self.direct)
        self.attend = PreparedLaunch(attn, ("out",), direct=self.direct)
        prepared.q_hnd = None  # (kept for the lse only, which plans do not return) no caller's tensor stays alive

    def __call__(self, q, k, v) -> torch.Tensor:
        stream, index = self.stream, self.device_index
        if self.direct:
            self.quant_q(stream, index, q.data_ptr())
            self.quant_kv(stream, index, k.data_ptr(), v.data_ptr())
            out = torch.empty(self.out_shape, dtype=self.dtype, device=self.device)
            self.attend(stream, index, out.data_ptr())
        else:  # the general launcher: tensors (HND views) in place of addresses
            layout = self.layout
            out = torch.empty(self.out_shape, dtype=self.dtype, device=self.device)
            self.scratch.zero_()  # on the direct path the Q quantizer's launch clears it
            self.quant_q(stream, index, to_hnd(q, layout))
            self.quant_kv(stream, index, to_hnd(k, layout), to_hnd(v, layout))
            self.attend(stream, index, to_hnd(out, layout))
        return out


def run(kernel: str, q, k, v, *, causal=False, sm_scale=None, layout="HND", granularity="per_thread",
        pv_accum="fp32+fp32", causal_alignment="bottom_right", cta_k=None):
    """The output of one attention call through its plan, or None when the plan cannot take the call (the caller
    then takes the general path, which validates and says what is wrong)."""
    try:
        index = q.get_device()
        if index < 0 or (q.data_ptr() | k.data_ptr() | v.data_ptr()) & 15:
            return None
        stream = torch._C._cuda_getCurrentRawStream(index)
        key = (kernel, q.shape, k.shape, v.shape, q.stride(), k.stride(), v.stride(), q.dtype, k.dtype, v.dtype,
               index, k.get_device(), v.get_device(), layout, causal, sm_scale, granularity, pv_accum,
               causal_alignment, cta_k, stream)
    except (AttributeError, TypeError):
        return None
    plan = _PLANS.get(key) or _PINNED.get(key)
    if plan is None:
        plan = _make(key, kernel, q, k, v, causal=causal, sm_scale=sm_scale, layout=layout, granularity=granularity,
                     pv_accum=pv_accum, causal_alignment=causal_alignment, cta_k=cta_k, stream=stream)
    elif key in _PLANS:
        if torch.cuda.is_current_stream_capturing():  # a graph now reads its buffers: keep it for good
            _PINNED[key] = _PLANS.pop(key)
        else:
            _PLANS.move_to_end(key)
    if not plan.supported:
        return None
    return plan(q, k, v)


def _make(key, kernel, q, k, v, **options) -> Plan:
    plan = Plan(kernel, q, k, v, **options)
    if torch.cuda.is_current_stream_capturing():
        _PINNED[key] = plan
    else:
        _PLANS[key] = plan
        while len(_PLANS) > MAX_PLANS:
            _PLANS.popitem(last=False)
    return plan
