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
# # 01 · Who owns which state (Phase 1): the structural choice
#
# The research this workbook grew from closed a series of micro-optimisations of the
# mma.sync kernel (register caps, narrowed scopes, score aliasing, early K prefetch,
# softmax interleaving, padded V staging, temporal pairing), each worth under one
# percent. Their common lesson: the next step in speed is structural, a change in
# **who owns which state, and when**: Q fragments, scores S, probabilities P, the O
# accumulator, the softmax row state, and the shared-memory stages.
#
# This notebook puts the candidate structures side by side, derives what each costs
# in registers, shared memory and occupancy, and the bounds it implies from the three
# units that can limit attention: the tensor cores, the special-function unit (one
# exp2 per score, plus the int32-to-float conversion if it runs there) and memory.
# **Bounds are projections**, arithmetic on stated rates; where a GPU is present the
# rates that decide are measured by microbenchmarks and the bounds recomputed. The built
# kernels follow, against their projections. Every schedule experiment recorded on the
# built kernel since is in notebook 02.

# %% tags=["parameters"]
output_dir: str = "outputs/interactive/01_ownership"  # folder for results.json and figures (a run sets it)
batch: int = 2  # batch size of the modelled problem (at least 1)
heads: int = 32  # attention heads of the modelled problem (at least 1)
n_tokens: int = 16384  # tokens per sequence of the modelled problem (at least 1)
head_dims: list[int] = [64, 128]  # head dimensions modelled (at least 1)
measure: bool = True  # measure the unit rates and built kernels where a GPU is present
step_study_tokens: int = 4096  # tokens of the 64-key step's numerics study (at least 1)
step_study_heads: int = 4  # heads of the 64-key step's numerics study (at least 1)
# %%
from IPython.display import Markdown, display

from sagelib import inputs as data
from sagelib.measure import recordings as bench_records
from sagelib.measure.hardware import H200
from sagelib.records import documents
from sagelib.records.results import Results
from sagelib.studies import (
    contract_sweeps,
    fp8_anchor,
    fp16_inner,
    kernel_records,
    ownership,
    plots,
    sweep_records,
    unit_bounds,
)
from sagelib.studies.recorded_views import show_recorded, show_recorded_pair

results = Results("01_ownership", output_dir)
architectures = ownership.CANDIDATES
call = kernel_records.Call(batch, heads, n_tokens, tuple(head_dims))

# %% [markdown]
# ## The candidates and who owns what

# %%
plots.table([{"structure": a.name, "MMA": a.mma, "query rows per MMA group": a.rows, "groups per CTA": a.groups,
              "keys per step": a.block_n, **{f"owner of {k}": v for k, v in a.owners.items()}, "note": a.note}
             for a in architectures])

# %% [markdown]
# ## Registers per consumer thread
# Peak live state of one consumer thread, with the two-level accumulator the contract
# requires (fp32+fp32: an inner fp32 P.V accumulator beside O). P is produced from S
# fragment by fragment and reuses its registers. The dashed lines are the hardware's
# 255, the 240 a consumer warpgroup keeps after a producer gives registers away with
# setmaxnreg, and the 160 each of three consumer warpgroups would keep; above a
# structure's line means spills.

# %%
fits = {(a.key, d): ownership.fit(a, d) for a in architectures for d in head_dims}
for d in head_dims:
    parts = [k for k in fits[(architectures[0].key, d)].registers if k != ownership.P_ALIASES_S]
    fig = plots.stacked_bars([a.key for a in architectures],
                             {part: [fits[(a.key, d)].registers[part] for a in architectures] for part in parts},
                             ylabel="32-bit registers per thread", title=f"Live state per consumer thread, D={d}",
                             limits={"255 (hardware)": 255, "240 (setmaxnreg consumers)": 240,
                                     "160 (three consumer warpgroups)": 160})
    results.figure(fig, f"registers_d{d}")
fit_rows = [{"structure": a.key, "head_dim": d, "registers needed": f.registers_needed, "limit": f.register_limit,
             "spills": f.spills, "shared memory (KiB)": f.smem_bytes / 1024, "CTAs per SM": f.ctas_per_sm,
             "consumer warps per SM": f.consumer_warps_per_sm}
            for (key, d), f in fits.items() for a in architectures if a.key == key]
results.add("fits", fit_rows)
plots.table(fit_rows)

# %% [markdown]
# ## Bounds (projections)
# For B=`batch`, H=`heads`, N=`n_tokens`: the time each unit needs, the **floor**
# (everything hidden under the busiest unit, which no structure beats) and the
# **serial** time (tensor work and softmax one after the other). Ping-pong overlaps by
# construction and can approach the floor; a single group per CTA relies on other CTAs
# to overlap. Shown with the int32-to-float conversion on the special unit (stated
# rate: 16 per clock per SM, the same as exp2: `cvt`) and with the float-bias conversion
# that moves it to the integer pipe (`float-bias`).

# %%
stated = unit_bounds.bound_table(H200, "stated", head_dims, batch, heads, n_tokens)
results.add("bounds (stated rates, projections)", stated)
for d in head_dims:
    fig = plots.bound_bars(stated, d, "float-bias", f"Projected bounds, D={d}, N={n_tokens}, float-bias conversion")
    results.figure(fig, f"bounds_d{d}")
    pingpong = next(r for r in stated if (r["structure"], r["head_dim"], r["conversion"]) == ("fa3_pingpong", d, "cvt"))
    results.headline(f"ping-pong floor, D={d} (TOPS)", round(pingpong[unit_bounds.FLOOR]),
                     note="projection from the H200's stated rates, computed now")
plots.table(stated)

# %% [markdown]
# ## Measured: the rates that decide
# One CTA per SM; each CTA counts its own SM clocks, so the rates are per clock per SM
# whatever clock the card runs at (`kernels/microbench/`). Without a GPU (or with `measure`
# off) the newest recording is shown, labelled as recorded.

# %%
units = unit_bounds.unit_rates(measure)
if units.reason is not None:
    display(Markdown(bench_records.recorded_banner(units.recording, units.recording_path, units.reason)))
if units.recording:
    results.add("microbenchmarks recorded", {"file": str(units.recording_path),
                                             "created_utc": units.recording["created_utc"]})
results.add("microbenchmarks", units.rates)
if units.rates:
    display(plots.table([{"unit": r.key, "what": r.what, "rate": r.value, "per": r.unit,
                          "replaces": r.hardware_field or "", "not measured because": r.reason or ""}
                         for r in units.rates]))
for r in units.rates:
    if r.value:
        results.headline(f"{r.key} ({r.unit})", r.value, note=units.note)

# %% [markdown]
# The pair rate of exp2 and cvt interleaved says whether the conversion competes with
# exp2 for the special-function unit (half the exp2 rate if it does, about the same
# if not). With these rates the bounds become:

# %%
measured = unit_bounds.bound_table(units.hardware, "measured" if units.measured else "stated", head_dims, batch,
                                   heads, n_tokens)
if units.measured:
    display(Markdown(f"cvt.rn.f32.s32 shares the exp2 unit: **{units.hardware.convert_shares_exp2_unit}**"))
    results.add("bounds (measured rates, projections)", measured)
    for d in head_dims:
        fig = plots.bound_bars(measured, d, "cvt", f"Bounds from measured rates, D={d}, N={n_tokens}")
        results.figure(fig, f"bounds_measured_d{d}")
    display(plots.table(measured))
else:
    display(Markdown("No measured or recorded rates: the stated bounds above stand."))

# %% [markdown]
# ## The structure built, against its projection
# The decision above became `kernels/attn_sm90.cu` (backend `cuda-sm90`; docs/design/sm90-kernel.md).
# Its kernel-only speed as recorded by `sagelib bench --suite default` on the H200 (never measured
# here: notebook 04 measures it live), beside the projected bounds of the same structure
# from the measured unit rates. The gap to the serial bound is what the next step has to
# explain: a clock64 trace of the consumer loop puts the softmax phase of one 64 x 128 tile
# at about 1330 of a warpgroup's 2420 cycles per block, latency-bound rather than exp2-bound.

# %%
recorded_bench, recorded_bench_path = kernel_records.newest_with(call, "cuda-sm90")
built = kernel_records.against_projection(
    kernel_records.kernel_only_records(recorded_bench or {}, call, "cuda-sm90"),
    unit_bounds.projected_bounds(measured, "fa3_pingpong"), conversion="cvt", ratio_to="serial")
results.add("built structure against projection", built)
show_recorded(built, recorded_bench, recorded_bench_path, "`cuda-sm90`", call.describe());

# %% [markdown]
# ## The portable kernel, against its projection
# The same comparison for `mma_sync_4warp`, which `kernels/attn_mma.cu` is (backends `cuda` and
# `cuda-per-warp-fp16`). Its tensor time counts Q.K^T at the int8 mma.sync rate and P.V at its own:
# sm_90 has no e4m3 mma.sync, so there the kernel widens P and V to f16 and issues m16n8k16, which
# the H200 ran at half the int8 rate (2683 against 5377 ops per clock per SM, recorded 2026-11-30).

# %%
portable_doc, portable_path = kernel_records.newest_with(call, "cuda-per-warp-fp16")
portable = kernel_records.against_projection(  # the kernel converts scores by the float bias
    [r for backend in ("cuda", "cuda-per-warp-fp16")
     for r in kernel_records.kernel_only_records(portable_doc or {}, call, backend)],
    unit_bounds.projected_bounds(measured, "mma_sync_4warp"), conversion="float-bias", ratio_to="floor",
    with_backend=True)
results.add("portable kernel against projection", portable)
show_recorded(portable, portable_doc, portable_path, "portable-kernel", call.describe());

# %% [markdown]
# ## The three-consumer rotation, built
# The candidate `three_consumer_rotation` (in the tables above) became a geometry of the kernel
# (backend `cuda-sm90-k64`):
# three consumer warpgroups at 160 registers, 64-key steps (the sm90 preset with `cta_k=64`, the
# contract's answer further down), and at D=128 P.V in two 64-channel passes. Its recorded
# kernel-only speed beside the two-consumer kernel's from the same recording: on the H200 it was
# slower at D=128 (about 0.9x) and within a few percent either way at D=64 (ahead only when
# causal). Three softmax warps per scheduler did not shorten a step as much as halving the step
# lengthened the per-key overheads (row max, turns, waits and fold every 64 keys instead of 128).
# The chart compares the two backends of one recording: `cuda-sm90` runs two consumers at D=128
# and, since 2026-11-30 (next section), three on 128-key steps at D=64.

# %%
rotation_doc, rotation_path = kernel_records.newest_with(call, "cuda-sm90-k64", (False, True))
rotation_rows = kernel_records.geometry_rows(rotation_doc, call) if rotation_doc else []
results.add("three-consumer rotation, built (recorded)", rotation_rows)
if rotation_rows:
    display(Markdown(f"Recorded in `{rotation_path.name}` ({rotation_doc['created_utc'][:10]}, "
                     f"{rotation_doc['device']['name']}), kernel only, {call.describe()}."))
    fig = plots.grouped_bars([f"D={r['head_dim']}{', causal' if r['causal'] else ''}" for r in rotation_rows],
                             {k: [r[k] for r in rotation_rows] for k in ("cuda-sm90, 128-key steps",
                                                                         "cuda-sm90-k64, 64-key steps")},
                             ylabel="kernel-only TOPS (recorded)", value_format="%.0f",
                             title="The Hopper kernel's two geometries")
    results.figure(fig, "three_consumer_built")
else:
    display(Markdown(f"No recording with `cuda-sm90-k64` kernel-only figures for {call.describe()} "
                     "in data/results: run `sagelib bench --suite default --out FILE.json` on an sm_90 GPU and keep the file there."))

# %% [markdown]
# ## Three consumers on the preset's own step (head_dim 64)
# The rotation above paid for its third softmax warp per scheduler with twice as many steps.
# At D=64 a consumer can keep the preset's 128-key step at 160 registers (candidate
# `three_consumer_preset`: S 64 + O 32 + inner 32 + P 16), so the third warp comes without extra
# steps and without changing the contract's configuration. Built and timed against the
# two-consumer build on the same prepared inputs (experiment log), it gave the same bits and became
# the D=64 geometry of `cuda-sm90`; at D=128 the same structure would need 222 registers.

# %%
d64_doc, d64_path = documents.latest(schema=sweep_records.SCHEMA, stem="sm90-sweep-d64-three-consumers")
d64_rows = sweep_records.three_consumer_rows(d64_doc) if d64_doc else []
results.add("three consumers at head_dim 64 (recorded)", d64_rows)
if d64_rows:
    show_recorded_pair(results, d64_doc, d64_path, d64_rows, ("two consumers (TOPS)", "three consumers (TOPS)"),
                       "Head_dim 64 on the sm90 preset's 128-key step: two against three consumers",
                       "three_consumers_d64")
else:
    display(Markdown("No recording `data/results/*-sm90-sweep-d64-three-consumers.json` to show."))

# %% [markdown]
# ## The rotation's numerics: a 64-key softmax step (contract, CPU)
# `three_consumer_rotation` fits its 160 registers only with 64-key steps, while the
# sm90 preset takes the row max and flushes the inner accumulator per 128 keys. Keeping that
# exactly would need the S of 128 keys live again. The alternative is a preset whose step is
# 64 keys. This asks the contract, on the canonical inputs against float64, whether that costs
# accuracy (`cta_k` overrides the preset's traversal block; every other stage stays sm90's).

# %%
step_rows = [row for d in head_dims for row in contract_sweeps.traversal_step_errors(
    [128, 64], ["gaussian", "k_outliers", "heavy_tails"],
    data.Shape(batch=1, heads=step_study_heads, tokens=step_study_tokens, head_dim=d))]
results.add("traversal step study", step_rows)
error = {(r["input"], r["head_dim"], r["cta_k"]): r["relative_l1"] for r in step_rows}
cases = list(dict.fromkeys((r["input"], r["head_dim"]) for r in step_rows))
fig = plots.grouped_bars([f"{name}, D={d}" for name, d in cases],
                         {"64-key step / 128-key step": [error[(name, d, 64)] / error[(name, d, 128)]
                                                         for name, d in cases]},
                         ylabel="ratio of relative L1 against float64", value_format="%.4f",
                         title="sm90 preset with a 64-key step: its error over the preset's (1 = no change)")
results.figure(fig, "traversal_step")
results.headline("64-key / 128-key step error, worst case",
                 max(error[(name, d, 64)] / error[(name, d, 128)] for name, d in cases),
                 note=f"contract against float64, computed now ({step_study_tokens} tokens)")
plots.table(step_rows)

# %% [markdown]
# ## An fp16 inner accumulator at D=128 (the projection made before it was built)
# At D=128 O (fp32), the fp32 inner P.V accumulator and the scores take 192 of the SM's 256 KB of
# registers, so a second score buffer does not fit. The contract's `fp32+fp16` mode halves the inner
# accumulator; on the sm90 preset it is joined into O every 64 keys, two fp16 partials per 128-key block
# (NUMERICAL_CONTRACT.md, stage 6), so one fp16 accumulator serves a block only with a join between the
# halves of P.V (two partials in flight would take fp32's registers). The table is the same per-thread
# arithmetic as above (row state and addresses estimated at 30 registers); below it, what the mode costs
# against float64 on the CPU, beside the sm90 default and SageAttention2's sm89-family `fp32+fp16`.

# %%
budget_rows = fp16_inner.register_budget(128)
results.add("fp16 inner accumulator, register budget at D=128 (projection)", budget_rows)
display(plots.table(budget_rows))
fp16_rows = [row for d in head_dims for row in contract_sweeps.fp16_inner_errors(
    ["gaussian", "k_outliers", "heavy_tails"],
    data.Shape(batch=1, heads=step_study_heads, tokens=step_study_tokens, head_dim=d))]
results.add("fp16 inner accumulator, error against float64", fp16_rows)
results.headline("sm90 fp32+fp16 / fp32+fp32 error, worst case",
                 max(r["sm90 fp32+fp16"] / r["sm90 fp32+fp32"] for r in fp16_rows),
                 note=f"contract against float64, computed now ({step_study_tokens} tokens); the bar is 1.10")
plots.table(fp16_rows)

# %% [markdown]
# ## How fast FP8 attention runs on this card: cuDNN's FP8 graph (recorded)
# A yardstick for any structure built next: cuDNN's fused FP8 attention (`cudnn-fp8`, the cudnn-frontend
# `sdpa_fp8` graph), which quantizes Q, K, V and P with one scale per tensor and smooths nothing. Its
# graph alone (operands quantized ahead, O as cuDNN writes it: e4m3 on Hopper) is timed beside our Hopper
# kernel's kernel-only call in the same run (`scripts/fp8_anchor.py`); its error against float64 on the
# canonical inputs is shown beside ours, because the speed comes with coarser numerics.

# %%
anchor_doc, anchor_path = documents.latest(schema=documents.FP8_ANCHOR.id)
anchor_speed = fp8_anchor.speed_rows(anchor_doc) if anchor_doc else []
anchor_error = fp8_anchor.accuracy_rows(anchor_doc) if anchor_doc else []
results.add("FP8 anchor: cuDNN's FP8 graph beside cuda-sm90 (recorded)", anchor_speed)
results.add("FP8 anchor: error against float64 (recorded)", anchor_error)
if anchor_speed:
    display(Markdown(f"Recorded in `{anchor_path.name}` ({anchor_doc['created_utc'][:10]}, "
                     f"{fp8_anchor.device_name(anchor_doc)}); both kernels in one run, on the same buffers."))
    fig = plots.grouped_bars([r["case"] for r in anchor_speed],
                             {k: [r[k] for r in anchor_speed] for k in ("cuDNN FP8 graph (TOPS)", "cuda-sm90 (TOPS)")},
                             ylabel="TOPS (recorded)", value_format="%.0f",
                             title="cuDNN's FP8 attention graph alone against our Hopper kernel, kernel only")
    results.figure(fig, "fp8_anchor")
    results.headline("cuda-sm90 / cuDNN FP8 graph at D128 N16384",
                     next(r["ours / cuDNN FP8"] for r in anchor_speed if r["case"] == "B2 H32 N16384 D128"),
                     note=f"recorded in {anchor_path.name}")
    display(plots.table(anchor_speed))
    display(plots.table(anchor_error))
else:
    display(Markdown("No recording `data/results/*-fp8-anchor-*.json` to show: run `python3 scripts/fp8_anchor.py "
                     "--out FILE.json` on an sm_90 GPU with cudnn-frontend installed and keep the file there."))

# %% [markdown]
# ## The fp16 inner level as built (measured)
# The level is built (`kernels/include/attn_sm90/fp16_inner.cuh`, backend `cuda-sm90-fp16-inner`): each 128-key
# block's P.V runs as two 64-key partials in f16 registers, both in flight with the next block's Q.K^T, joined into
# the fp32 O after the wait. It matches its contract twin (`tests/test_cuda_sm90.py`). Below, from the newest
# recordings: its speed beside the default and the peers in one bench, its error against float64, and where its
# time goes: the trace's block period and Nsight Compute's instruction count of both builds. From those, the bound
# of the two-score-buffer structure the freed registers were meant for: the two consumers' softmaxes side by side
# (log seq 95) plus the joins' measured cost, with nothing for the fold or P.V's round trip (so optimistic).

# %%
level = fp16_inner.find_recordings()
level_rows = fp16_inner.speed_rows(level.bench) if level.bench else []
results.add("fp16 inner level: speed beside the default and the peers (recorded)", level_rows)
if level_rows:
    display(Markdown(f"Bench recorded in `{level.bench_path.name}` ({level.bench['created_utc'][:10]}), "
                     "B2 H32 N16384 fp16, every backend in the same run."))
    bars = ("fp32+fp16 end to end", "fp32+fp32 end to end", "sage2-sm90", "cudnn-fp8")
    fig = plots.grouped_bars([r["case"] for r in level_rows], {k: [r[k] or 0 for r in level_rows] for k in bars},
                             ylabel="TOPS end to end (recorded)", value_format="%.0f",
                             title="The fp32+fp16 inner level against the default and the peers, B2 H32 N16384")
    results.figure(fig, "fp16_inner_speed")
    d128 = next((r for r in level_rows if r["case"] == "D128"), None)
    if d128:
        results.headline("fp32+fp16 / fp32+fp32 end to end at D128 N16384", d128["fp32+fp16 / fp32+fp32"],
                         note=f"recorded in {level.bench_path.name}")
    display(plots.table(level_rows))
    if level.accuracy:
        display(plots.table(fp8_anchor.accuracy_rows(level.accuracy)))
    if level.trace_text and level.ncu and d128 and d128["fp32+fp32 kernel only"]:
        periods = fp16_inner.block_periods(level.trace_text)
        instructions = {mode: fp16_inner.warp_instructions(doc) for mode, doc in level.ncu.items()}
        display(Markdown(f"Warp instructions per launch (ncu, B1 H32 N4096 D128): fp32+fp32 "
                         f"{instructions['fp32+fp32']:,}, fp32+fp16 {instructions['fp32+fp16']:,} "
                         f"({instructions['fp32+fp16'] / instructions['fp32+fp32'] - 1:+.0%}); block periods from "
                         f"`{level.trace_path.name}`."))
        bound_rows = fp16_inner.period_bound(d128["fp32+fp32 kernel only"], periods)
        results.add("fp16 inner level: block periods and the two-buffer bound", bound_rows)
        results.headline("two score buffers with the fp16 level, best-case kernel-only TOPS at D128",
                         next(r["kernel-only TOPS"] for r in bound_rows if r["period from"] == "projection"),
                         note="projection from the recorded trace and seq 95; the target is 1050")
        display(plots.table(bound_rows))
else:
    display(Markdown("No bench recording with `cuda-sm90-fp16-inner` in `data/results/`: run `sagelib bench "
                     "--backends cuda-sm90,cuda-sm90-fp16-inner,sage2-sm90,sdpa-cudnn,cudnn-fp8 --shapes "
                     "2:32:16384:128,2:32:16384:64 --causal no,yes --out FILE.json` on an sm_90 GPU."))

# %% [markdown]
# ## Reading: the structure to build on
# * The portable 4-warp kernel cannot hold two-level accumulation, Q fragments and a
#   64-key S tile in 255 registers at D=128: the spills the research log fought are
#   structural (ncu on our mma.sync kernel in notebook 05 shows the local-memory traffic).
# * One wgmma warpgroup fits, but waits on itself: it can only approach its serial bound,
#   which is where SageAttention2's sm90 kernel sits.
# * Producer + two consumer warpgroups in ping-pong fits at D=128 with 240 registers and
#   can approach the floor; a second S buffer for intra-warpgroup overlap does **not**
#   fit beside the fp32 inner accumulator at D=128 (it does at D=64).
# * On the H200 (recorded 2026-11-29) cvt.rn.f32.s32 ran at about 39 per clock per SM
#   and did not slow exp2 when interleaved, so the conversion does not compete with exp2;
#   mma.sync 8-bit reached about two thirds of wgmma's rate and the f16 mma.sync that carries
#   P.V on sm_90 one third, which caps the portable path on Hopper near 940 TOPS at D=128
#   (the floor above, at the 1.98 GHz the model assumes). The first recording's e4m3 figure
#   (5673 ops per clock) timed the FADDs ptxas leaves in the loop after hoisting the HMMAs
#   of loop-invariant operands; the bench now changes its operands every iteration.
# * At D=128 the tensor cores and exp2 need the same time (8192 ops and 16 exp2 per clock
#   per SM, 4*128 ops per score): only a structure that overlaps them by construction can
#   pass the serial bound. At D=64 exp2 alone bounds every structure near 1070 TOPS.
# * The recommendation, built: producer + two consumer warpgroups in ping-pong (`cuda-sm90`).
#   Its limit is its softmax phase, bound by instruction latency at two consumer warps per
#   scheduler. `three_consumer_rotation` puts three there, with 64-key steps (and at D=128 P.V in
#   two passes). The traversal-step chart says what such a preset costs against float64 (ratios
#   at 1: nothing). Built, it ran slower than the two-consumer kernel at D=128 and within a few
#   percent at D=64: more warps do not pay if each takes twice the steps. At D=64 three consumers
#   fit on the preset's own 128-key step (`three_consumer_preset`), and that paid: 1.14-1.23x at N
#   of 4096 and more, 1.04x at N=1024, the same bits. At D=128 nothing fits a third consumer.
# * An fp16 inner accumulator (the projection above) frees 32 registers a thread at D=128 (190 of
#   240 with one score buffer), but two full score buffers still need 254 by this model's estimate of row
#   state and addresses: 14 short. A second buffer of 64 keys (the next block's first half) fits at 222.
#   Built and measured (log seq 201-202, the section above): exact to its contract and as accurate as
#   fp32+fp32 (k_outliers 0.0380 against 0.0379; SageAttention2's sm89 fp32+fp16 0.0384), but 0.90x the
#   default's speed at D=128 and 0.95-0.98x at D=64. It costs instructions, not registers: a conversion and an
#   add per O element per 64-key partial, +37% warp instructions at D=128, and the period grew from 2,291 to
#   2,614 cycles. Wgmma runs e4m3 into f16 at the f32 rate on Hopper, so registers are all it buys, and with
#   the softmaxes side by side and its joins the two-buffer structure would at best reach ~940 TOPS kernel
#   only, under the 1,050 target; it was not built.
# * cuDNN's FP8 graph (the anchor above, recorded 2026-12-02) ran 6% faster than our kernel at D=128
#   and 12% faster causal, and 8-9% slower at D=64, with per-tensor scales that triple the error on the
#   K-biased input: the 1000 TOPS that issue 37 sets is above what any FP8 attention reached on this card.
# * What the built kernel was tried against since (schedules, role splits, the softmax beside the
#   tensor cores, the power cap, the tile scheduler) and which closed experiments it may reopen:
#   notebook 02.
