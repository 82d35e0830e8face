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
# # 00 · The numerical contract
#
# Every kernel in this workbook is judged against one executable contract: what an
# 8-bit attention kernel in SageAttention2's style computes, stage by stage
# (`NUMERICAL_CONTRACT.md` explains it; `sagelib.contract` is the code).
#
# | stage | what happens | kernel arithmetic |
# |---|---|---|
# | 1 | K smoothing | subtract the per-channel token mean of K |
# | 2 | Q, K to INT8 | symmetric scales per group (per_thread / per_warp / per_block) |
# | 3 | Q.K^T | exact int32, in CTA_K key blocks |
# | 4 | online softmax | base 2, fp32 state, running max offset by 8.807 |
# | 5 | P and V to e4m3 | P rounded, V with a per-channel scale |
# | 6 | P.V | FP22 inner accumulator flushed into fp32 every block |
# | 7 | output | divide by l, rescale V, round to fp16/bf16; lse with the smoothing correction |
#
# This report shows that the contract keeps its invariants, how much error each
# stage adds, and why two design choices (K smoothing, the two-level accumulator)
# are there. Everything runs on the CPU reference; no GPU is needed.

# %% tags=["parameters"]
output_dir: str = "outputs/interactive/00_contract"  # folder for results.json and figures (a run sets it)
device: str = "cpu"  # where the contract runs (one of cpu, cuda)
batch: int = 1  # batch size of the studied shape (at least 1)
heads: int = 4  # attention heads of the studied shape (at least 1)
n_tokens: int = 2048  # tokens per sequence of the studied shape (at least 1)
head_dim: int = 128  # head dimension (at least 1)
seq_sweep: list[int] = [256, 1024, 4096]  # sequence lengths of the error-against-N study (at least 1)
outlier_strengths: list[float] = [0, 2, 4, 8, 16]  # K outlier strengths of the outlier study (at least 0)
accumulation_sweep: list[int] = [1024, 4096, 16384, 32768]  # key counts of the accumulation study (at least 1)
# %%
import torch
from IPython.display import Markdown, display

from sagelib import contract
from sagelib import inputs as data
from sagelib.contract import invariants
from sagelib.records.results import Results
from sagelib.studies import contract_sweeps as studies
from sagelib.studies import plots

results = Results("00_contract", output_dir)
shape = data.Shape(batch=batch, heads=heads, tokens=n_tokens, head_dim=head_dim)
torch.set_num_threads(max(1, torch.get_num_threads()));

# %% [markdown]
# ## Inputs
# Canonical inputs are drawn from fixed seeds on the CPU and hashed, so the numbers
# below can be reproduced exactly (`sagelib.inputs`, `data/canonical_inputs.yaml`).

# %%
inputs = {name: data.make(name, shape, device=device) for name in ("gaussian", "k_outliers", "heavy_tails")}
results.add("inputs", [x.describe() for x in inputs.values()])
plots.table([x.describe() for x in inputs.values()])

# %% [markdown]
# ## Invariants
# Two properties hold in exact arithmetic and make the kernel's tricks free:
# smoothing K shifts each score row by a constant (softmax ignores it; the lse is
# corrected), and the fp8 offset scales P and l alike (it cancels in O / l).
# Both are checked here with every stage exact, in float64.

# %%
x = inputs["k_outliers"]
checks = [invariants.smoothing_invariance(x.q, x.k, x.v), invariants.offset_cancellation(x.q, x.k, x.v)]
for check in checks:
    results.add(f"invariant: {check.name}", {"max_abs_difference": check.max_abs_difference, "holds": check.holds})
results.headline("invariants hold", all(c.holds for c in checks))
plots.table([{"invariant": c.name, "why": c.statement, "max |difference|": c.max_abs_difference,
              "holds": c.holds} for c in checks])

# %% [markdown]
# ## Error budget
# Each bar runs the pipeline with **one** stage in kernel arithmetic and all others
# exact, against the float64 ground truth; the last group is the whole contract.
# Stages do not add linearly, so the full contract is measured, not summed.

# %%
configs = {
    "sm90 per_thread fp32+fp32 (H100/H200)": contract.ContractConfig(preset="sm90"),
    "sm89 per_warp fp32+fp16 (sm120/sm121)": contract.ContractConfig(preset="sm89", granularity="per_warp",
                                                                     pv_accum="fp32+fp16"),
}
budgets = {label: contract.error_budget(x.q, x.k, x.v, cfg) for label, cfg in configs.items()}
for label, rows in budgets.items():
    results.add(f"error budget: {label}", {r.stage: r.error.as_dict() for r in rows})
full = {label: rows[-1].error for label, rows in budgets.items()}
results.headline("sm90 contract relative L1 vs float64", full[next(iter(full))].relative_l1,
                 note=f"input k_outliers, {shape.label}")
results.headline("sm90 contract cosine vs float64", full[next(iter(full))].cosine)
fig = plots.error_budget_bars(budgets, title=f"Error each stage adds alone, k_outliers, N={n_tokens}, D={head_dim}")
results.figure(fig, "error_budget");

# %%
plots.table([{"configuration": label, "stage": r.label, **r.error.as_dict()}
             for label, rows in budgets.items() for r in rows])

# %% [markdown]
# INT8 Q.K^T and the e4m3 P dominate: they decide the contract's accuracy. The fp32
# state and the accumulator (when flushed every block) add orders of magnitude less.

# %% [markdown]
# ## Error against sequence length, with and without K smoothing

# %%
by_tokens = studies.error_vs_tokens(seq_sweep, shape, device=device)
results.add("error vs tokens", by_tokens)
fig = plots.lines(by_tokens.x, by_tokens.series, "tokens (N_q = N_kv)", "relative L1 vs float64",
                  title="k_outliers input: error as the sequence grows", logx=True)
results.figure(fig, "error_vs_tokens");

# %% [markdown]
# ## Error against K-outlier strength
# Real LLM keys carry a large per-channel bias. Without smoothing the INT8 scale
# must cover the bias and the tokens' own variation drowns in rounding; with
# smoothing the error stays where the gaussian case is.

# %%
by_outliers = studies.error_vs_outlier_strength(outlier_strengths,
                                                data.Shape(batch=1, heads=heads, tokens=min(n_tokens, 1024),
                                                           head_dim=head_dim), device=device)
results.add("error vs outlier strength", by_outliers)
fig = plots.lines(by_outliers.x, by_outliers.series, "per-channel bias of K (x N(0,1))", "relative L1 vs float64",
                  title="K smoothing against channel outliers", logy=True)
results.figure(fig, "error_vs_outliers");
results.headline("raw/smoothed error at strongest outliers",
                 by_outliers.series["raw K"][-1] / by_outliers.series["smoothed K"][-1]);

# %% [markdown]
# ## Why the inner accumulator is flushed
# The fp8 tensor core accumulates in FP22 (13 mantissa bits). One accumulator
# across the whole row loses about 2^-13 of the running sum at every k32 step,
# and the sum keeps growing; a fresh inner accumulator per key block, added into
# true fp32, bounds the loss. Every other stage is exact here, so the error is the
# accumulator's alone.

# %%
accumulation = studies.accumulation_vs_tokens(accumulation_sweep, head_dim=head_dim, device=device)
results.add("accumulation vs tokens", accumulation)
fig = plots.lines(accumulation.x, accumulation.series, "key tokens", "relative L1 vs float64 (accumulator only)",
                  title="One-level vs two-level P.V accumulation", logx=True, logy=True)
results.figure(fig, "accumulation");
one, two = (accumulation.series["fp32 (one FP22 accumulator)"][-1],
            accumulation.series["fp32+fp32 (flushed every block)"][-1])
results.headline(f"one-level / two-level accumulator error at N={accumulation.x[-1]}", one / two)
display(Markdown(f"At {accumulation.x[-1]} keys the single accumulator's error is **{one / two:.0f}x** "
                 "the flushed one's."))

# %% [markdown]
# ## Phase 0: provenance
# Nothing builds on earlier work until its artifacts are rehashed. The reference
# inventory (`data/reference_inventory.json`) lists every artifact results rest on;
# where provenance is missing it is recorded as a blocker, never filled in by guess.

# %%
from sagelib.records import inventory, ledger, prior_work

artifacts = [row.as_dict() for row in inventory.verify_inventory()]
results.add("inventory", artifacts)
results.headline("inventory artifacts unchanged", f"{sum(r['status'] == 'ok' for r in artifacts)}/{len(artifacts)}")
plots.table([{**r, "recorded_sha256": (r["recorded_sha256"] or "")[:12],
              "current_sha256": (r["current_sha256"] or "")[:12]}
             for r in artifacts])

# %% [markdown]
# ### Blockers: provenance that is missing

# %%
blockers = [b.as_dict() for b in inventory.blockers()]
results.add("blockers", blockers)
plots.table(blockers)

# %% [markdown]
# ### Closed prior work and the rule that reopens each
# `sagelib log propose` refuses a proposal that matches a closed experiment unless
# the rule's condition is declared with evidence, and refuses an unchanged repeat outright.

# %%
prior = prior_work.load().table_rows()
results.add("prior work", prior)
plots.table(prior)

# %% [markdown]
# ### The experiment log's hash chain

# %%
log_report = ledger.verify()
results.headline("experiment log chain intact", log_report.ok)
results.add("experiment log", {"records": log_report.records, "head_sha256": log_report.head_sha256,
                               "problems": log_report.rows(), "notes": log_report.notes})
display(Markdown(f"`{log_report.summary()}`"))
display(Markdown("\n\n".join(log_report.notes)))  # which commit the log was held to, or why it was not
if log_report.rows():
    display(plots.table(log_report.rows()))
