# ---
# jupyter:
#   jupytext:
#     notebook_metadata_filter: -jupytext.text_representation.jupytext_version,-jupytext.text_representation.format_version
#     text_representation:
#       extension: .py
#       format_name: percent
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% [markdown]
# # 07 · Our attention in a model
#
# `sagelib.attention` takes `torch.nn.functional.scaled_dot_product_attention`'s arguments ([B, H, N, D], `is_causal`,
# `scale`, `enable_gqa`) and runs our 8-bit kernels: the Hopper kernel on sm_90, the portable one on other GPUs,
# the contract itself on the CPU. It is a PyTorch op (`torch.ops.sagelib.attention`) with a fake kernel, so
# `torch.compile(fullgraph=True)` and CUDA graphs take it. One line routes a model's SDPA calls to it:
#
# ```python
# import sagelib
# with sagelib.sdpa_routed():
#     logits = model(tokens)
# ```
#
# The model here is a small decoder built in torch (`sagelib.studies.in_a_model`: pre-norm blocks, grouped-query
# causal attention, SwiGLU) with **seeded random weights, not a trained checkpoint**: the numbers say how the
# 8-bit attention's error behaves through the layers of a model of this shape, not how a trained model's quality
# changes. What is compared: each layer's attention output against SDPA's, *isolated* (the layer's own SDPA inputs
# through ours: the kernel's error alone) and *carried* (the whole forward pass routed: the error as the layers
# pass it on), the logits, and the forward-pass time, eager and compiled.

# %% tags=["parameters"]
output_dir: str = "outputs/interactive/07_in_a_model"  # folder for results.json and figures (a run sets it)
device: str = "cuda"  # where the model runs (one of cpu, cuda)
dtype: str = "fp16"  # activation dtype (one of fp16, bf16)
layers: int = 8  # decoder layers (at least 1)
d_model: int = 2048  # model width (at least 1)
heads: int = 16  # query heads (at least 1)
kv_heads: int = 4  # key/value heads, dividing heads (at least 1)
ffn: int = 5632  # feed-forward width (at least 1)
vocab: int = 32000  # vocabulary size (at least 1)
batch: int = 4  # sequences per forward pass (at least 1)
seq_len: int = 2048  # tokens per sequence (at least 1)
seed: int = 0  # seed of the random weights and tokens (at least 0)
backend: str = "auto"  # our backend for the attention (a sagelib backend name, or auto)
compiled: bool = True  # also time the model under torch.compile
reps: int = 10  # timed forward passes per variant (at least 1)
host_overhead: bool = True  # also measure the host time per attention call (CUDA only)

# %%
import torch
from IPython.display import Markdown, display

import sagelib
from sagelib.inputs import parse_dtype
from sagelib.measure import host_time
from sagelib.measure import recordings as bench_records
from sagelib.ops import op
from sagelib.records.results import Results
from sagelib.studies import in_a_model

results = Results("07_in_a_model", output_dir)
not_live = bench_records.why_not_live(device)
run_on = torch.device("cuda" if not_live is None else "cpu")
chosen = op.resolve(backend, run_on)
config = in_a_model.ModelConfig(layers=layers, d_model=d_model, heads=heads, kv_heads=kv_heads, ffn=ffn, vocab=vocab,
                                seed=seed)
model, generator = in_a_model.build(config, run_on, parse_dtype(dtype))
tokens = in_a_model.tokens_for(config, batch, seq_len, generator, run_on)
results.add("setup", {"device": str(run_on), "backend": chosen, "config": config.__dict__, "batch": batch,
                      "seq_len": seq_len, "dtype": dtype})
display(Markdown(f"Running on **{run_on}** ({not_live or 'a CUDA GPU'}); `backend={backend!r}` is **{chosen}**; "
                 f"{layers} layers, d_model {d_model}, {heads} query heads over {kv_heads} K/V heads "
                 f"(head dim {config.head_dim}), batch {batch} x {seq_len} tokens, {dtype}."))

# %% [markdown]
# ## Agreement with SDPA, layer by layer
# Relative L1 of the attention output against SDPA's (the same layer), and at the end the logits and the share of
# positions whose most likely next token is the same.

# %%
agreement = in_a_model.layer_agreement(model, tokens, backend)
results.add("layer_agreement", agreement)
display(Markdown(bench_records.markdown_table(agreement)))
results.headline("top1_agreement", agreement[-1]["top-1 agreement"], note="logits' argmax, ours vs SDPA")
results.headline("worst_isolated_rel_l1", max(r["isolated rel L1"] for r in agreement[:-1]));

# %% [markdown]
# ## Forward-pass time
# Wall time of one forward pass with a synchronization after it (the median of `reps`), SDPA and ours, eager and
# compiled with `torch.compile(fullgraph=True)` (on the CPU only eager: inductor's compile there takes minutes).

# %%
times = in_a_model.forward_times(model, tokens, backend, compiled=compiled and run_on.type == "cuda", reps=reps)
results.add("forward_times", times)
display(Markdown(bench_records.markdown_table(times)))
for mode in dict.fromkeys(t["mode"] for t in times):
    sdpa_ms, ours_ms = (t["ms"] for t in times if t["mode"] == mode)
    results.headline(f"forward_speedup_{mode}", sdpa_ms / ours_ms, note="SDPA time / ours")

# %% [markdown]
# ## Host time per call
# What the host spends to enqueue one attention call (no sync; the median of 5 x 50 calls), for our backends with
# and without plans (validated and packed once per call signature), the `sagelib.attention` op, and SDPA; and the
# end-to-end TOPS back to back against a sync after each call. The same as `sagelib bench --host-overhead`.

# %%
if run_on.type == "cuda" and host_overhead:
    usable, skipped = bench_records.usable_backends(list(host_time.HOST_BACKENDS))
    overhead = host_time.host_overhead(run_on, usable)
    results.add("host_overhead", overhead)
    display(Markdown(f"```\n{host_time.format_host_overhead(overhead)}\n```"))
else:
    display(Markdown("Not measured here: host time is a GPU measurement (`sagelib bench --host-overhead`)."))

# %%
results.add("op", {"name": op.OP_NAME, "backends": list(op.BACKENDS), "version": sagelib.__version__})
print(results.path)
