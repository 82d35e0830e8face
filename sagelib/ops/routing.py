"""Routing a model's ``F.scaled_dot_product_attention`` calls to :func:`sagelib.attention`.

SageAttention's users write ``F.scaled_dot_product_attention = sageattn``; :func:`sdpa_routed` does the same for
the length of a ``with`` block and puts PyTorch's function back afterwards, even on an error::

    with sagelib.sdpa_routed() as routed:
        logits = model(tokens)
    print(routed)    # how many calls ran ours, and why any did not

Calls that :func:`sagelib.attention` cannot take (a mask, dropout, fp32 without ``cast``, head dim over 128 on the
GPU kernels) go to PyTorch's own SDPA with ``fallback=True`` (the default) and raise with ``fallback=False``.
Only code that looks the function up through the module at call time is routed (``F.scaled_dot_product_attention``
or ``torch.nn.functional.scaled_dot_product_attention``); a model that imported the function by name before the
block keeps PyTorch's. Compiled code (``torch.compile``) sees the routing that was in place when it was traced,
and its calls are not counted: a count that traced code incremented would be a guard that fails on every call
(a recompilation per call, and ``fullgraph=True`` stops after eight).
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from sagelib.errors import InputError
from sagelib.ops.op import BACKENDS, attention, unsupported_reason


@dataclass
class RoutingStats:
    """Calls seen inside one :func:`sdpa_routed` block: routed to ours, or passed to SDPA with the reason."""

    backend: str
    routed: int = 0
    fallback: int = 0
    reasons: dict[str, int] = field(default_factory=dict)

    def __str__(self) -> str:
        text = f"sdpa_routed({self.backend!r}): {self.routed} call(s) ran sagelib.attention, {self.fallback} SDPA"
        return text + "".join(f"\n  {n} x {reason}" for reason, n in self.reasons.items())


@contextlib.contextmanager
def sdpa_routed(backend: str = "auto", *, fallback: bool = True, cast=None):
    """Inside the block ``torch.nn.functional.scaled_dot_product_attention`` is :func:`sagelib.attention`
    (with ``backend`` and ``cast``) for every call it supports; yields a :class:`RoutingStats`."""
    if backend not in BACKENDS:
        raise InputError(f"backend: expected one of {', '.join(BACKENDS)}, got {backend!r}")
    original = F.scaled_dot_product_attention
    stats = RoutingStats(backend)

    def routed(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        reason = unsupported_reason(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                                    backend=backend, cast=cast)
        counting = not torch.compiler.is_compiling()
        if reason is None:
            if counting:
                stats.routed += 1
            return attention(query, key, value, None, 0.0, is_causal, scale, enable_gqa, backend=backend,
                             cast=cast)
        if not fallback:
            raise InputError(f"sdpa_routed(fallback=False): {reason}")
        if counting:
            stats.fallback += 1
            stats.reasons[reason] = stats.reasons.get(reason, 0) + 1
        return original(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                        scale=scale, enable_gqa=enable_gqa)

    routed.__wrapped__ = original
    F.scaled_dot_product_attention = routed
    try:
        yield stats
    finally:
        F.scaled_dot_product_attention = original
