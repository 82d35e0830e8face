"""``sagelib.attention``: SDPA's call on our 8-bit attention, registered as the PyTorch op ``sagelib::attention``.

What it supports (anything else raises an :class:`~sagelib.errors.InputError` that says what to do):

* q, k, v of shape [B, H, N, D] (SDPA's layout; our HND), fp16 or bf16; fp32 only with ``cast=torch.float16`` or
  ``torch.bfloat16`` (computed in that dtype, returned as fp32);
* ``is_causal`` (aligned top-left as SDPA aligns it when N_q != N_kv), ``scale`` (default 1/sqrt(D)),
  ``enable_gqa`` (k and v with fewer heads than q, which it must divide);
* no ``attn_mask`` and ``dropout_p`` 0: the kernels have neither;
* head dim up to 128 on the GPU kernels (256 on the contract).

``backend``: ``auto`` picks our Hopper kernel on sm_90, the portable kernel on other CUDA GPUs with CuPy, and
the contract (the ``reference`` backend, exact torch code of what the kernels compute, slow) for CPU tensors;
any name of :data:`BACKENDS` forces one. The numerics are the contract's (INT8 Q.K^T with K smoothing, e4m3 P.V),
not fp16 SDPA's: expect a relative L1 error of a few percent against exact attention.

The op is defined with ``torch.library`` (``torch.ops.sagelib.attention``) with CPU and CUDA kernels and a fake
(meta) kernel, so ``torch.compile(fullgraph=True)`` traces through it and CUDA graphs capture its launches. It is
forward-only (no autograd formula): call it under ``torch.no_grad()`` or ``torch.inference_mode()``.
"""

from __future__ import annotations

import torch

from sagelib.errors import InputError

#: what ``backend`` may name: auto, the contract, our kernels
BACKENDS = ("auto", "reference", "cuda-sm90", "cuda-sm90-k64", "cuda-sm90-fp16-inner", "cuda",
            "cuda-per-warp-fp16")
CAST_DTYPES = (torch.float16, torch.bfloat16)
OP_NAME = "sagelib::attention"

_LIB = torch.library.Library("sagelib", "DEF")
_LIB.define("attention(Tensor query, Tensor key, Tensor value, bool is_causal=False, float? scale=None, "
            "str backend='auto') -> Tensor")

_AUTO: dict[int, str] = {}
_INSTANCES: dict[str, object] = {}


def resolve(backend: str, device: torch.device) -> str:
    """The backend ``backend`` means for tensors on ``device`` (``auto`` resolved once per CUDA device)."""
    if backend != "auto":
        return backend
    if device.type != "cuda":
        return "reference"
    index = device.index if device.index is not None else torch.cuda.current_device()
    name = _AUTO.get(index)
    if name is None:
        from sagelib import backends as registry

        with torch.cuda.device(index):
            name = _AUTO[index] = registry.resolve_auto()
    return name


def _instance(name: str):
    backend = _INSTANCES.get(name)
    if backend is None:
        from sagelib import backends as registry

        backend = _INSTANCES[name] = registry.get(name)
    return backend


def _kernel(query, key, value, is_causal=False, scale=None, backend="auto"):
    """The op's CPU and CUDA kernel: one call of the chosen backend on HND tensors."""
    name = resolve(backend, query.device)
    if name == "reference":
        from sagelib import contract

        out = contract.attention(query, key, value, causal=is_causal, sm_scale=scale, layout="HND",
                                 causal_alignment="top_left", check_finite=False)
    else:
        out = _instance(name).attention(query, key, value, causal=is_causal, sm_scale=scale, layout="HND",
                                        causal_alignment="top_left")
    return out if out.is_contiguous() else out.contiguous()


_LIB.impl("attention", _kernel, "CPU")
_LIB.impl("attention", _kernel, "CUDA")


@torch.library.register_fake(OP_NAME)
def _fake(query, key, value, is_causal=False, scale=None, backend="auto"):
    return query.new_empty(query.shape)


def unsupported_reason(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                       enable_gqa=False, *, backend="auto", cast=None) -> str | None:
    """None when :func:`attention` takes this call; otherwise what it cannot do and what to do instead."""
    if backend not in BACKENDS:
        return f"backend: expected one of {', '.join(BACKENDS)}, got {backend!r}"
    if attn_mask is not None:
        return ("attn_mask: sagelib.attention takes no mask (the kernels mask only causally); got a "
                f"{type(attn_mask).__name__}; pass is_causal=True for a causal mask, or use "
                "torch.nn.functional.scaled_dot_product_attention for other masks")
    if dropout_p:
        return (f"dropout_p: sagelib.attention has no dropout (inference only), got {dropout_p}; pass 0.0 "
                "(model.eval()) or use scaled_dot_product_attention in training")
    for name, x in (("query", query), ("key", key), ("value", value)):
        if not isinstance(x, torch.Tensor) or x.dim() != 4:
            shape = tuple(x.shape) if isinstance(x, torch.Tensor) else type(x).__name__
            return (f"{name}: expected a 4-d tensor [batch, heads, tokens, head_dim] (SDPA's layout), got {shape}; "
                    "add the missing dimensions with unsqueeze")
    if query.dtype == torch.float32 and cast is None:
        return ("query: fp32 inputs need cast=torch.float16 or cast=torch.bfloat16 (the kernels read 16-bit "
                "inputs; the output is cast back to fp32)")
    if cast is not None and cast not in CAST_DTYPES:
        return f"cast: expected torch.float16 or torch.bfloat16, got {cast}"
    if query.dtype not in (*CAST_DTYPES, torch.float32):
        return f"query: expected fp16, bf16 (or fp32 with cast=...), got {query.dtype}"
    if not query.dtype == key.dtype == value.dtype:
        return f"key, value: expected the dtype of query ({query.dtype}), got {key.dtype} and {value.dtype}"
    if key.shape[1] != query.shape[1] and not enable_gqa:
        return (f"key: {key.shape[1]} heads against {query.shape[1]} query heads needs enable_gqa=True "
                "(as in scaled_dot_product_attention)")
    if query.shape[-1] > 128 and query.is_cuda and backend != "reference":
        return (f"query: our kernels take head_dim up to 128, got {query.shape[-1]}; use backend='reference' "
                "(slow) or scaled_dot_product_attention")
    return None


def attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False, *,
              backend: str = "auto", cast: torch.dtype | None = None) -> torch.Tensor:
    """``torch.nn.functional.scaled_dot_product_attention``'s call on our 8-bit attention ([B, H, N, D]).

    ``backend``: one of :data:`BACKENDS` (``auto``: the fastest for the tensors' device); ``cast``: the 16-bit
    dtype fp32 inputs are computed in (fp16 and bf16 inputs are computed as they are). The module docstring lists what is supported; anything else raises an
    InputError naming the fix.
    """
    reason = unsupported_reason(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                                backend=backend, cast=cast)
    if reason is not None:
        raise InputError(reason)
    from_fp32 = query.dtype == torch.float32
    if from_fp32:
        query, key, value = (x.to(cast) for x in (query, key, value))
    query, key, value = (x if x.stride(-1) == 1 else x.contiguous() for x in (query, key, value))
    out = torch.ops.sagelib.attention(query, key, value, bool(is_causal),
                                      None if scale is None else float(scale), backend)
    return out.float() if from_fp32 else out
