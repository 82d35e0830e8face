"""Our attention as a drop-in for ``torch.nn.functional.scaled_dot_product_attention``.

:func:`attention` takes SDPA's arguments and conventions ([B, H, N, D], ``is_causal``, ``scale``, ``enable_gqa``)
and computes the 8-bit contract (sagelib.contract) with the best backend for the tensors' device: our Hopper
kernel on sm_90, the portable kernel on other CUDA GPUs, the contract itself on the CPU. It is a PyTorch custom op
(``torch.ops.sagelib.attention``, :mod:`sagelib.ops.op`) with a fake implementation, so ``torch.compile``
(fullgraph) and CUDA graph capture take it. :func:`sdpa_routed` sends a model's SDPA calls to it::

    import sagelib
    with sagelib.sdpa_routed():
        logits = model(tokens)          # every supported F.scaled_dot_product_attention call runs ours
"""

from sagelib.ops.op import BACKENDS, attention, unsupported_reason
from sagelib.ops.routing import RoutingStats, sdpa_routed

__all__ = ["BACKENDS", "attention", "unsupported_reason", "sdpa_routed", "RoutingStats"]
