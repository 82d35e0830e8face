"""Our attention inside a model: a small decoder built in torch, run with SDPA and with ``sagelib.attention``.

The model (:class:`TinyDecoder`) is a pre-norm causal transformer with grouped-query attention whose weights are
drawn from a seeded normal distribution (no trained checkpoint: the numbers say how the 8-bit attention's error
behaves through the layers of a model of this shape, not how a trained model's quality changes). Its attention
calls ``torch.nn.functional.scaled_dot_product_attention`` through the module at call time, as model code does,
so :func:`sagelib.sdpa_routed` routes it.

:func:`layer_agreement` compares, layer by layer, ours against SDPA two ways: *isolated* (each layer's own SDPA
inputs through ours: the kernel's error alone) and *carried* (the whole forward pass routed: the error as the
layers pass it on). :func:`forward_times` times the forward pass eager and compiled, with SDPA and with ours.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from sagelib.contract.metrics import relative_l1
from sagelib.ops import attention, sdpa_routed


@dataclass(frozen=True)
class ModelConfig:
    layers: int = 4
    d_model: int = 1024
    heads: int = 8
    kv_heads: int = 2
    ffn: int = 2816
    vocab: int = 4096
    seed: int = 0

    @property
    def head_dim(self) -> int:
        return self.d_model // self.heads


class Attention(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.c = c
        self.qkv = nn.Linear(c.d_model, (c.heads + 2 * c.kv_heads) * c.head_dim, bias=False)
        self.out = nn.Linear(c.d_model, c.d_model, bias=False)
        self.record: list | None = None  #: a list: each call appends (q, k, v, attention output)

    def forward(self, x):
        b, n, _ = x.shape
        c = self.c
        q, k, v = self.qkv(x).view(b, n, c.heads + 2 * c.kv_heads, c.head_dim).transpose(1, 2).split(
            [c.heads, c.kv_heads, c.kv_heads], dim=1)
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=c.heads != c.kv_heads)
        if self.record is not None:
            self.record.append((q, k, v, o))
        return self.out(o.transpose(1, 2).reshape(b, n, c.d_model))


class Block(nn.Module):
    def __init__(self, c: ModelConfig):
        super().__init__()
        self.norm1, self.norm2 = nn.RMSNorm(c.d_model), nn.RMSNorm(c.d_model)
        self.attn = Attention(c)
        self.up, self.gate = nn.Linear(c.d_model, c.ffn, bias=False), nn.Linear(c.d_model, c.ffn, bias=False)
        self.down = nn.Linear(c.ffn, c.d_model, bias=False)

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class TinyDecoder(nn.Module):
    """Embedding, ``layers`` pre-norm blocks (GQA causal attention, SwiGLU), a final norm and the logits."""

    def __init__(self, c: ModelConfig):
        super().__init__()
        self.c = c
        self.embed = nn.Embedding(c.vocab, c.d_model)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.layers))
        self.norm = nn.RMSNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.vocab, bias=False)

    def forward(self, tokens):
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


def build(config: ModelConfig, device, dtype=torch.float16) -> tuple[TinyDecoder, torch.Generator]:
    """The model with seeded weights (normal, std 0.02; norms at 1), in eval mode, and a generator for tokens."""
    g = torch.Generator().manual_seed(config.seed)
    model = TinyDecoder(config)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.ones_like(p) if "norm" in name else torch.randn(p.shape, generator=g) * 0.02)
    return model.to(device=device, dtype=dtype).eval(), g


def tokens_for(config: ModelConfig, batch: int, n: int, generator: torch.Generator, device) -> torch.Tensor:
    return torch.randint(0, config.vocab, (batch, n), generator=generator).to(device)


def _recording(model: TinyDecoder, tokens, route: str | None):
    for block in model.blocks:
        block.attn.record = []
    try:
        if route is None:
            logits = model(tokens)
        else:
            with sdpa_routed(route, fallback=False):
                logits = model(tokens)
        return logits, [block.attn.record[0] for block in model.blocks]
    finally:
        for block in model.blocks:
            block.attn.record = None


@torch.inference_mode()
def layer_agreement(model: TinyDecoder, tokens, backend: str = "auto") -> list[dict]:
    """One row per layer, and one for the logits: relative L1 of ours against SDPA, isolated and carried."""
    logits_ref, ref = _recording(model, tokens, None)
    logits_ours, carried = _recording(model, tokens, backend)
    gqa = model.c.heads != model.c.kv_heads
    rows = []
    for i, ((q, k, v, o_ref), (*_, o_carried)) in enumerate(zip(ref, carried)):
        isolated = attention(q, k, v, is_causal=True, enable_gqa=gqa, backend=backend)
        rows.append({"layer": i, "isolated rel L1": relative_l1(isolated, o_ref),
                     "carried rel L1": relative_l1(o_carried, o_ref)})
    top_ref, top_ours = logits_ref.argmax(-1), logits_ours.argmax(-1)
    rows.append({"layer": "logits", "isolated rel L1": float("nan"),
                 "carried rel L1": relative_l1(logits_ours, logits_ref),
                 "top-1 agreement": float((top_ref == top_ours).float().mean())})
    return rows


def _median_ms(fn, device, reps: int, warmup: int) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(reps):
        if device.type == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) * 1e3)
    return sorted(times)[len(times) // 2]


@torch.inference_mode()
def forward_times(model: TinyDecoder, tokens, backend: str = "auto", compiled: bool = True, reps: int = 10,
                  warmup: int = 3) -> list[dict]:
    """Forward-pass wall time (synchronized, median), SDPA and ours, eager and (``compiled``) torch.compile'd."""
    device = tokens.device
    rows = []
    for mode in ("eager", "compiled") if compiled else ("eager",):
        for route in (None, backend):
            torch._dynamo.reset()
            run = torch.compile(model, fullgraph=True) if mode == "compiled" else model
            if route is None:
                ms = _median_ms(lambda: run(tokens), device, reps, warmup)
            else:
                with sdpa_routed(route, fallback=False):
                    ms = _median_ms(lambda: run(tokens), device, reps, warmup)
            rows.append({"mode": mode, "attention": "sdpa" if route is None else f"sagelib ({route})", "ms": ms})
    torch._dynamo.reset()
    return rows
