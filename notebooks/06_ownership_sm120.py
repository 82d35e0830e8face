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
# # 06 · Phase 1 for sm_120/sm_121 (GB10, RTX 50xx): the structure of the mma.sync kernel
#
# Notebook 01 answered Phase 1 for Hopper, where wgmma runs asynchronously and a producer warp with two
# consumer warpgroups in ping-pong paid. sm_120 and sm_121 have no wgmma, no tcgen05/TMEM and (GB10) no useful
# TMA multicast; they have TMA, mbarriers and mma.sync with a native e4m3 form. This notebook asks the same
# question for them: **which state-ownership structure should the mma.sync kernel take next?**
#
# The candidates: the monolithic 4-warp CTA built today (`kernels/attn_mma.cu`); a producer warp feeding
# consumer warps by TMA; two consumer warp groups in ping-pong; and, across all three, the fp16 inner P.V
# accumulator of SageAttention2++ (the contract's `pv_accum="fp32+fp16"`). For each: registers (ptxas for
# sm_121a where built), shared memory per block against GB10's 99 KB, occupancy, and the time each unit needs.
# **Every number about GB10 here is a projection** from stated figures (sources listed below) until the card
# measures it; the last section says what would confirm or overturn the recommendation.

# %% tags=["parameters"]
output_dir: str = "outputs/interactive/06_ownership_sm120"  # folder for results.json and figures (a run sets it)
batch: int = 2  # batch size of the projected shape (at least 1)
heads: int = 32  # attention heads of the projected shape (at least 1)
n_tokens: int = 16384  # tokens per sequence of the projected shape (at least 1)
head_dims: list[int] = [64, 128]  # head dimensions to project (at least 1)
ptxas_live: bool = True  # compile the candidates for sm_121a with nvcc now (else the recorded ptxas figures)
probe_isa: bool = True  # compile tiny probes to see which instructions sm_121a accepts
measure: bool = True  # run the microbenchmarks of the units this GPU has

# %%
from IPython.display import Markdown, display

from sagelib.measure.hardware import GB10
from sagelib.records.results import Results
from sagelib.studies import plots, sm120, sm120_evidence

results = Results("06_ownership_sm120", output_dir)

# %% [markdown]
# ## The card's figures, and where each comes from
# Stated, not measured. The clock only turns per-clock rates into seconds; the microbenchmarks count clocks.

# %%
figures = [{"figure": k, "value": getattr(GB10, k), "source": v} for k, v in GB10.source.items()]
results.add("GB10 stated figures", figures)
display(plots.table(figures))

# %% [markdown]
# ## What the ISA accepts for sm_121a
# One tiny kernel per instruction a candidate needs, compiled with nvcc for sm_121a (no card needed). Compiling
# says what the ISA allows, not how fast the card runs it: ptxas accepts TMA multicast for sm_121a but warns that
# it is expected to run with substantially reduced performance there.

# %%
if probe_isa:
    from sagelib.cuda.check import nvcc_path

    probed = nvcc_path() is not None
else:
    probed = False
isa_rows = [{"instruction": p.key, "needed by": p.needed_by,
             "nvcc for sm_121a": sm120_evidence.probe(p) if probed else "not probed here",
             "when this was written (nvcc 13.0)": p.expected} for p in sm120_evidence.PROBES]
results.add("ISA probes for sm_121a", isa_rows)
display(plots.table(isa_rows))
if not probed:
    display(Markdown("Not probed in this run (`probe_isa` off, or no nvcc): the last column is what nvcc 13.0 did."))

# %% [markdown]
# ## The candidates and who owns what
# Every candidate keeps the built kernel's per-warp state: 32 query rows per math warp (two m16 tiles), their
# S, P, O and row state in registers, 64-key steps. They differ in who loads K and V, how warps take turns,
# and how P.V accumulates.

# %%
display(plots.table([{"candidate": c.name, "math warps": c.math_warps, "producer warps": c.producer_warps,
                      "query rows per CTA": c.rows, "K/V stages": c.kv_stages, "loads": c.loads,
                      "tensor work beside softmax": c.turns, "built": c.built or "no", "note": c.note}
                     for c in sm120.CANDIDATES]))

# %% [markdown]
# ## Registers, shared memory and occupancy on GB10
# Registers needed are ptxas' for the built kernel at sm_121a (the same per-warp state in every candidate, so
# the projection for the unbuilt ones). The register cap is what a math thread may hold at the chosen occupancy:
# the launch's share of the 64K registers, or with a producer warp what setmaxnreg hands over once the producer
# keeps 24. "Register cap at 8 math warps per SM" compares the candidates at the built kernel's occupancy.

# %%
ptxas, ptxas_source = sm120_evidence.ptxas_table(ptxas_live)
display(Markdown(f"ptxas resources: {ptxas_source}."))
rows = sm120.bound_rows(head_dims, batch, heads, n_tokens, ptxas)
fit_columns = ["candidate", "head_dim", "pv_accum", "registers needed (ptxas sm_121a)", "spill bytes (ptxas)",
               "register cap", "register cap at 8 math warps per SM", "spills", "smem per block", "smem limit",
               "smem fits", "CTAs per SM", "math warps per scheduler", "built"]
results.add("fit on GB10 (ptxas for the built kernel, projections for the others)",
            [{k: r[k] for k in fit_columns} for r in rows])
display(plots.table(rows, fit_columns))

# %% [markdown]
# ## Unit bounds on GB10 (projections)
# For B x H x N x N, non-causal: the tensor pipe (Q.K^T int8 at 2048 ops per clock per SM, P.V e4m3 at 1024
# with fp32 accumulation or 2048 with the fp16 inner accumulator), the exp2 unit (16 per clock per SM; the
# scores convert by the float-bias trick, off that unit), device memory for the kernel and, separately, for the
# quantizers (end to end), and the K/V bytes per second the L2 must serve when the tensor pipe runs at its floor.
# The softmax's other instructions (scale, max, sum, fp8 packing) are issue slots this model does not count.

# %%
bound_columns = ["candidate", "head_dim", "pv_accum", "tensor ms", "exp2 ms", "memory ms", "quantizers ms",
                 "floor TOPS (projection)", "serial TOPS (projection)", "end to end at the floor TOPS (projection)",
                 "L2 K/V GB/s at the floor"]
results.add("unit bounds on GB10 (projections)", [{k: r[k] for k in bound_columns} for r in rows])
display(plots.table(rows, bound_columns))
for d in head_dims:
    shown = [r for r in rows if r["head_dim"] == d]
    fig = plots.grouped_bars([f"{r['candidate']}, {r['pv_accum']}" for r in shown],
                             {"floor": [r["floor TOPS (projection)"] for r in shown],
                              "serial": [r["serial TOPS (projection)"] for r in shown]},
                             ylabel="TOPS (projection)", title=f"GB10 bounds, D={d}, N={n_tokens} (projections)")
    results.figure(fig, f"gb10_bounds_d{d}")
best = max(rows, key=lambda r: r["floor TOPS (projection)"])
results.headline("gb10_floor_tops_projection", round(best["floor TOPS (projection)"], 1), unit="TOPS",
                 note=f"projection: {best['candidate']}, {best['pv_accum']}, D={best['head_dim']}");

# %% [markdown]
# ## The card's unit rates, measured where this runs on one
# On an sm_120 or sm_121 GPU with `measure` on, the microbenchmarks (compiled for the card) replace the stated
# rates, and the bounds are recomputed with them; elsewhere the projections stand.

# %%
rate_rows, card, rate_note = sm120_evidence.card_rates(measure)
results.add("unit rates: projected against measured", rate_rows)
display(Markdown(f"{rate_note}."))
display(plots.table(rate_rows))
if card is not GB10:
    measured_rows = sm120.bound_rows(head_dims, batch, heads, n_tokens, ptxas, hw=card)
    results.add("unit bounds with the measured rates (projections)", [{k: r[k] for k in bound_columns}
                                                                      for r in measured_rows])
    display(plots.table(measured_rows, bound_columns))

# %% [markdown]
# ## Recommendation

# %%
display(Markdown(sm120_evidence.RECOMMENDATION))
results.add("recommendation", sm120_evidence.RECOMMENDATION)
results.headline("sm120_recommendation", "monolithic 4-warp CTA, fp32+fp16 inner accumulator",
                 note="projection; the log's sm120_ownership_structure record");

# %% [markdown]
# ## What would confirm or overturn it on the card

# %%
results.add("confirm or falsify on the card", list(sm120_evidence.CONFIRM_OR_FALSIFY))
display(plots.table(list(sm120_evidence.CONFIRM_OR_FALSIFY)))

# %% [markdown]
# ## Reading
# * On GB10's stated figures the tensor pipe bounds every candidate: at D=128 mma.sync needs about four times
#   the exp2 unit's time. That is the opposite of Hopper, where wgmma and exp2 needed the same time and only a
#   structure that overlaps them by construction could pass the serial bound.
# * So the lever is P.V's rate, not the structure: the fp16 inner accumulator halves P.V's time (1.5x at the
#   floor), the one change the card's ISA offers for it. Its accuracy cost is the contract's (notebook 00); it is
#   SageAttention2's own choice on these cards.
# * The built kernel already fits GB10: two CTAs per SM within 100 KB of shared memory and 64K registers, 48 KB
#   per block at D=128 against 99 KB. At D=128 the sm_120a/sm_121a build takes a register-lean key loop
#   (`ATTN_LEAN` in `kernels/attn_mma.cu`): 255 registers and no spills with nvcc 13.0, where the sm_89 form
#   spilled 8 (fp16 inner accumulator) and 20 bytes; what the lean loop costs in time needs a card.
# * A producer warp would keep the built kernel's registers only at one CTA per SM (one math warp per
#   scheduler), or give up 15 a thread at two. Ping-pong keeps 8 math warps per SM and halves the K/V bytes the
#   L2 serves (about 800 GB/s at the floor for 128-row CTAs, three times the card's DRAM bandwidth, so those
#   reads must hit the L2); it is the next candidate if ncu on the card names the L2.
# * At memory's 273 GB/s the separate quantization passes cost about a tenth of a long call end to end, more
#   at short ones: fusing them matters more on GB10 than on the H200.
