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
# # 02 · The built kernel's recorded experiments (Phase 1)
#
# Notebook 01 chose the structure: a producer warp and two consumer warpgroups in ping-pong
# (`kernels/attn_sm90.cu`, backend `cuda-sm90`), three consumers at head_dim 64. This notebook
# holds what was tried on it since, each against its baseline: splitting softmax and P.V into
# separate warpgroups, every schedule variant the sweeps timed, where a key block's cycles go,
# why the softmax runs slower beside the tensor cores, what the power cap does to the clock, how
# the tile scheduler shares the grid, and which closed experiments of the prior work the
# structure may reopen. Almost everything here is **recorded** on the H200 (`data/results/`) and
# shown as such; projections are labelled as projections.

# %% tags=["parameters"]
output_dir: str = "outputs/interactive/02_experiments"  # folder for results.json and figures (a run sets it)
batch: int = 2  # batch size of the modelled problem (at least 1)
heads: int = 32  # attention heads of the modelled problem (at least 1)
n_tokens: int = 16384  # tokens per sequence of the modelled problem (at least 1)
head_dims: list[int] = [64, 128]  # head dimensions studied (at least 1)
measure: bool = True  # measure live where a GPU is present
# %%
from IPython.display import Markdown, display

from sagelib.backends.kernels import sm90
from sagelib.measure import power
from sagelib.measure.hardware import H200
from sagelib.records import documents
from sagelib.records.results import Results
from sagelib.studies import (
    block_phases,
    kernel_records,
    ownership,
    plots,
    role_split,
    softmax_beside,
    sweep_records,
    tile_balance,
    unit_bounds,
)
from sagelib.studies.recorded_views import chart_block_phases, show_recorded_pair

results = Results("02_experiments", output_dir)
call = kernel_records.Call(batch, heads, n_tokens, tuple(head_dims))
units = unit_bounds.unit_rates(measure)  # the unit rates the projections below take (notebook 01 shows them)
measured_hw = units.hardware
display(Markdown(f"Unit rates: {units.note}."))

# %% [markdown]
# ## Softmax and P.V in separate warpgroups at head_dim 128: projected, built, slower
# At D=128 no third consumer fits, and the traced chain of a consumer is its softmax, then its own
# wgmma batch, then the fold. `sagelib.studies.role_split` models a split (record sm90-role-split): softmax
# warpgroups that own S, P and the row state and hand P (e4m3, in the wgmma A layout) and alpha to
# P.V warpgroups through shared memory; the P.V warpgroups own O, run P.V with P from shared memory
# in two 64-channel passes, fold and store. The table is the register fit per role; the chart
# projects the softmax warpgroup's period from the recorded trace. It was then built (experiment log):
# same bits, but 0.61-0.75x, because the hand-off cost ~900-1700 cycles per block, not ~60, and the
# softmax ran ~1600-2200 cycles, not ~1100. The measured rows follow the projection.

# %%
split = role_split.RoleSplit(head_dim=128)
results.add("role split: registers (model)", split.table())
display(plots.table(split.table()))
display(Markdown(f"Registers per CTA: {split.cta_registers:,} of the {split.launch_pool:,} a 640-thread launch gets "
                 f"({'fits' if split.fits else 'does not fit'}); P and alpha tiles: {split.p_smem_bytes:,} bytes. "
                 f"One P.V pass over all 128 channels would need "
                 f"{role_split.RoleSplit(head_dim=128, pv_channels=128).cta_registers:,}."))
trace_doc, trace_path = documents.latest(schema=sweep_records.SCHEMA, stem="sm90-sweep-turns-batch-order")
if trace_doc is not None:
    gemm_cycles = 2 * 64 * 128 * 128 / H200.wgmma_8bit_ops_per_clk  # one 64 x 128 x 128 product
    traced = role_split.traced_costs(trace_doc["traces"], "trace 2:32:8192:128", tensor_per_gemm=gemm_cycles)
    split_rows = [{"softmax": f"softmax +{s:.0%}", **role_split.projected_period(traced, softmax_slowdown=1 + s)}
                  for s in (0.0, 0.1, 0.2, 0.3)]
    results.add("role split: projected period", split_rows)
    display(Markdown(f"Phase costs: the D=128 trace kept in `{trace_path.name}` (medians, cycles per block): "
                     f"softmax {traced.softmax:g}, turn {traced.turn:g}, issue {traced.issue:g}, "
                     f"wait {traced.wait:g}, fold {traced.fold:g}."))
    fig = plots.grouped_bars([r["softmax"] for r in split_rows],
                             {"speedup (projection)": [r["speedup (projection)"] for r in split_rows]},
                             ylabel="projected speed over today's kernel", value_format="%.2f",
                             title="Softmax and P.V in separate warpgroups, D=128: projection from the trace")
    results.figure(fig, "role_split_projection")
else:
    display(Markdown("No recorded trace (`data/results/*-sm90-sweep-turns-batch-order.json`) to project from."))
built_doc, built_path = documents.latest(schema=sweep_records.SCHEMA, stem="sm90-sweep-role-split")
if built_doc is not None:
    built_rows = sweep_records.role_split_rows(built_doc)
    results.add("role split: built (recorded)", built_rows)
    display(Markdown(f"Built and measured: `{built_path.name}` ({built_doc['date']}, {built_doc['device']['name']})."))
    display(plots.table(built_rows))

# %% [markdown]
# ## What the schedule experiments on the built kernel measured (recorded sweeps)
# Every build variant `sagelib sweep` timed on the H200, as its speed against the
# baseline build of the same call (kernel only; ratios across calls would mix in the card's
# drift). Each file is cited by an experiment-log record that says what was tried and why it
# was kept or closed. Variants whose output disagreed with the baseline's are listed under
# the chart instead of drawn (their times do not count). The charts keep one row per file, its
# best variant (split over charts of at most 20 rows); the table after them has every variant.
# Moving work into the softmax phase, or the softmax beside the same warpgroup's wgmma, lost every
# time; the traces and ncu point to a phase bound by its own instruction latency at two consumer
# warps per scheduler.

# %%
sweep_ratios = sweep_records.load_ratios()
results.add("schedule experiments (recorded)", sweep_ratios)
target_shapes = ["B2 H32 N16384 D128", "B2 H32 N16384 D128 causal", "B2 H32 N16384 D64", "B32 H32 N1024 D128"]
if sweep_ratios:  # first one row per recorded sweep (its best variant), then every variant
    best = sweep_records.best_per_experiment(sweep_ratios, target_shapes)
    charts = plots.pages(best)
    for page, chunk in enumerate(charts, 1):
        fig = plots.speedup_bars([f"{sweep_records.label(b.experiment, b.variant)} (best of {b.variants})"
                                  for b in chunk],
                                 {s: [b.speedup.get(s, float("nan")) for b in chunk] for s in target_shapes},
                                 title=f"Each recorded sweep's best variant ({page} of {len(charts)})")
        results.figure(fig, f"schedule_experiments_best_{page}")
    display(plots.table(sweep_records.variant_table(sweep_ratios, target_shapes)))
    for r in sweep_ratios:
        if not r.same_output:
            display(Markdown(f"- left out: `{r.experiment}` / `{r.variant}` at {r.shape}: "
                             "its output disagreed with the baseline's"))
else:
    display(Markdown("No recorded sweeps (`data/results/*-sm90-sweep*.json`) to show."))

# %% [markdown]
# ## Hiding a warpgroup's own Q.K^T: where a key block's cycles went (recorded)
# In the kernel as built, a consumer warpgroup runs its block's softmax, waits for its turn,
# issues P.V of the block with Q.K^T of the next, waits for both, and folds P.V into O. The two
# warpgroups' softmaxes take turns, each hiding the other's wgmma batch, so the period is about
# two softmaxes. The aliased build (record sm90-alias-inner) also hid a warpgroup's own Q.K^T: the
# score buffer a softmax has consumed becomes the block's P.V accumulator, then the buffer of the
# Q.K^T two blocks ahead, which fits the registers without a third buffer. Below, CTA 0's traced
# blocks at B2 N8192 D128 (`sagelib profile sm90 --trace`): turn, issue and wait shrank, the fold
# took the next Q.K^T's issue, and the softmax, now beside the warpgroup's own Q.K^T and the other
# softmax, grew by more. Its loop runs two blocks per pass (the buffers swap roles); the second
# half spills around the row max and is drawn apart. Kernel only it ran at 0.83-0.92x.

# %%
chart_block_phases(results, "sm90-alias-inner-traces",
                   {"default": ("default build", None), "aliased first half": ("-DSM90_ALIAS_INNER=1", 0),
                    "aliased second half (spills)": ("-DSM90_ALIAS_INNER=1", 1)},
                   "A key block's period by phase at D128: the kernel against the aliased build",
                   "block_phases_aliased");

# %% [markdown]
# The same reading at head_dim 64 with three consumer warpgroups (record
# sm90-max-under-pv-three-consumers): block j+1's row max moved under block j's P.V, as record
# sm90-max-under-pv had tried on two consumers. The softmax phase kept only its exp half, but the wait
# that now holds the row max, the issue (P.V behind Q.K^T) and the fold (ten O registers spilled at
# 160 registers) grew by more. Kernel only it ran at 0.82-0.89x at D64 and 0.95-0.97x at D128.

# %%
chart_block_phases(results, "sm90-max-under-pv-three-consumers-traces",
                   {"default": ("default build", None), "row max under P.V": ("--define SM90_MAX_UNDER_PV=1", None)},
                   "A key block's period by phase at D64 (three consumers): the kernel against the row max under P.V",
                   "block_phases_max_under_pv");

# %% [markdown]
# ## A third consumer at head_dim 128 through a shared score buffer (recorded)
# At D=128 a third consumer did not fit: O, S, the inner accumulator and P need 208 registers of the
# 160 that three consumers get. Record sm90-three-consumers-d128-shared-scores let block j's P.V
# accumulate into the score registers its softmax had consumed, fold them, and then take block
# j+1's Q.K^T into the same registers: 144 registers plus 16 spilled O registers. The bars are
# per key block of one warpgroup; the shared-score build has three warpgroups in flight where the
# preset has two, so the CTA finishes a block every third of its bar against every half of the
# preset's. It still lost (0.61-0.86x kernel only): three softmaxes per scheduler grew to ~1,700
# cycles, and P.V, the fold and the next Q.K^T now follow one another on each warpgroup's chain
# (in its bars "fold" runs from the P.V wait to the next softmax: the fold, then the next Q.K^T's
# issue and wait).

# %%
chart_block_phases(results, "sm90-three-consumers-d128-shared-scores-traces",
                   {"preset (two consumers)": ("trace_preset", None),
                    "shared scores, turn over P.V (three)": ("trace_s3_turn1", None)},
                   "A key block's period by phase at D128: the preset against three consumers sharing S",
                   "block_phases_shared_scores");

# %% [markdown]
# ## Why the softmax runs slower inside the kernel: beside the tensor cores
# Alone, one warpgroup's softmax step (64 x 128 scores, one warp per scheduler) takes ~820 cycles;
# traced inside the kernel, ~1,180. `kernels/microbench_softmax_beside.cu` runs the same step
# while a second warpgroup runs, back to back, tensor-core batches as the kernel issues them (with
# and without the fold) or the fold alone (record sm90-softmax-beside-tensor-work). A wgmma batch
# is about ten instructions, so what the bars show beyond "nothing" is the tensor cores' work
# itself slowing the softmax, not competition for issue slots. The last two kinds take parts away
# from a batch: its accumulator read-back (a run-time scale-d of 0) and its register operand (P from
# shared memory); neither changes the slowdown (record sm90-softmax-beside-what-slows-it). Measured
# now with `measure` on an sm_90 GPU; otherwise the newest recording.

# %%
hopper_reason = sm90.unavailable_reason()
if measure and hopper_reason is None:
    import torch

    beside_runs, beside_note, beside_gpu = [softmax_beside.measure()], "measured now", torch.cuda.get_device_name()
else:
    if measure:  # asked for, and not possible here: say why (no sm_90 GPU, or the Hopper paths switched off)
        display(Markdown(f"**Not measured now:** {hopper_reason}"))
        results.add("softmax beside tensor work not measured because", hopper_reason)
    beside_runs, beside_doc, beside_path = softmax_beside.latest_recording()
    beside_note = f"recorded: `{beside_path.name}`" if beside_path else None
    beside_gpu = beside_doc["device"].splitlines()[-1].split(",")[0] if beside_doc else None
if beside_runs:
    results.add("softmax step beside another warpgroup's work",
                [{"run": i + 1, **row} for i, rows in enumerate(beside_runs) for row in rows])
    display(Markdown(f"{beside_note}; cycles per step, median over the SMs."))
    kinds = [r["kind"] for r in beside_runs[0]]
    fig = plots.grouped_bars(kinds, {f"run {i + 1}": [r["cycles_per_step"] for r in rows]
                                     for i, rows in enumerate(beside_runs)},
                             ylabel="cycles per softmax step (64 x 128)",
                             title=f"One warpgroup's softmax step beside another warpgroup's work ({beside_gpu})")
    traced, _ = block_phases.load("sm90-three-consumers-d128-shared-scores-traces")
    if traced:
        in_kernel = block_phases.period_parts(traced, "trace_preset", 0)["softmax"]
        fig.axes[0].axhline(in_kernel, linestyle="--", color="black", linewidth=1)
        fig.axes[0].text(-0.4, in_kernel, f" in the kernel, traced ({in_kernel:.0f})", va="bottom", fontsize=8)
    results.figure(fig, "softmax_beside")
else:
    display(Markdown("Nothing measured here (`measure` off, or no sm_90 GPU) and no recording "
                     "(`data/results/*-softmax-beside.json`) to show."))

# %% [markdown]
# The other side of the same runs: how long each batch kind takes on the tensor cores, alone (the
# softmax warpgroup asleep) and beside the softmax, against the cycles its operations need at the
# wgmma rate (the datasheet's, or the microbenchmark's above). A batch waited for as a whole pays a
# fixed latency beside its operations; the kernel waits for one per key block on each chain.

# %%
if beside_runs and "batches_per_kcycle_alone" in beside_runs[0][0]:
    peak = measured_hw.wgmma_8bit_ops_per_clk
    tensor_rows = [r for r in beside_runs[0] if r["kind"] in softmax_beside.TENSOR_OPS]
    batch_cycles = [{"kind": r["kind"], "at the wgmma rate": softmax_beside.TENSOR_OPS[r["kind"]] / peak,
                     "alone": 1000 / r["batches_per_kcycle_alone"],
                     "beside the softmax": 1000 / r["batches_per_kcycle"]} for r in tensor_rows]
    results.add("tensor-core batch cycles, alone and beside the softmax", batch_cycles)
    columns = ("at the wgmma rate", "alone", "beside the softmax")
    fig = plots.grouped_bars([r["kind"] for r in batch_cycles], {k: [r[k] for r in batch_cycles] for k in columns},
                             ylabel="cycles per batch",
                             title=f"One warpgroup's wgmma batches: cycles each ({beside_gpu})")
    results.figure(fig, "batch_cycles")
else:
    display(Markdown("The recording shown has no batch rates alone (schema /1): nothing to draw here."))

# %% [markdown]
# The same numbers as a projection of the D=128 kernel: in ping-pong a consumer's softmax runs
# beside the other consumer's batch and then its fold, and the two softmaxes take turns, so the
# period of two 64 x 128 blocks is twice that step, turned into TOPS at the SM count and clock the
# model assumes (`measured_hw`: 132 SMs at 1.98 GHz on the H200). Beside it, the newest recorded
# kernel-only figure (above), and the step time that 1000 TOPS kernel only would need (end to end
# needs more: the quantizers' passes come on top). On the 2026-11-30 recordings the projection
# gave 876 TOPS against 874 measured, and 1000 would need a step of ~1,100 cycles beside the other
# consumer's work: less than beside its batch alone, without the fold. The clock is the cold one:
# within ~0.2 s of N=16384 load the card reaches its power cap, and there the kernel runs at a median
# 1,875 MHz and cuDNN at 1,515 (experiment log), so a sustained run lands ~5% below the projection.

# %%
if beside_runs:
    pingpong = softmax_beside.pingpong_projection(beside_runs[0], measured_hw)
    pingpong["measured kernel-only TOPS (recorded bench)"] = kernel_records.recorded_tops(call, 128)
    results.add("ping-pong period from the softmax-beside microbenchmark (projection)", pingpong)
    display(plots.table([{"quantity": k, "value": v} for k, v in pingpong.items()]))

# %% [markdown]
# ### The other structure: two softmaxes side by side (recorded)
# Instead of taking turns, both consumers could run their softmaxes together (two warps per
# scheduler) while the tensor cores run their batches, each consumer's next Q.K^T in flight during
# its own softmax (FlashAttention-3's in-warpgroup overlap). `--softmax-warpgroups 2` times two
# softmax warpgroups side by side beside a batch stream (record sm90-two-softmaxes-beside-tensor-work).
# The projection below takes that step as the period with every batch hidden and nothing else on the
# chain (no fold, no waits): an upper bound. The structure needs a second 64-register score buffer,
# which does not fit beside O, S, the inner accumulator and P at head_dim 128 (272 registers of 240).

# %%
two_runs, two_doc, two_path = softmax_beside.latest_recording(stem=softmax_beside.TWO_SOFTMAX_STEM)
if two_runs:
    display(Markdown(f"Recorded: `{two_path.name}`; cycles per step of both warpgroups together."))
    display(plots.table([{"run": i + 1, **row} for i, rows in enumerate(two_runs) for row in rows]))
    side_by_side = softmax_beside.side_by_side_projection(two_runs[0], measured_hw)
    results.add("two softmaxes side by side (recorded) and the upper bound they give (projection)", side_by_side)
    display(plots.table([{"quantity": k, "value": v} for k, v in side_by_side.items()]))
else:
    display(Markdown("No recording (`data/results/*-two-softmaxes-beside.json`) to show."))

# %% [markdown]
# Beside the kernel's batch (P.V with the next Q.K^T) the step takes ~1.37x its lone time, and
# ~1.53x when the fold follows each batch; that is the traced in-kernel softmax. In ping-pong
# each warpgroup's softmax runs beside the other's batch and fold, so the D=128 period is two such
# softmaxes (~2 x 1,170 cycles): the 1000-TOPS target needs ~1,930. A schedule that keeps the
# softmax away from the tensor cores pays the batches on its chain instead, which is what the
# recorded sweeps above found each time work moved. Two softmaxes side by side beside the batches
# (~1,790 cycles for both) would leave room for ~1.3x over ping-pong before the fold's share: the
# next structure has to find the 64 registers per consumer that it needs (for example with O kept in
# shared memory and folded there).

# %% [markdown]
# ## What each unit's work costs under the power cap (recorded)
# The cycles above are only half of speed: under sustained N=16384 load the card holds its board
# power at the 700 W cap by lowering the SM clock, so a unit's energy per operation costs clock.
# `sagelib sweep --ablate --sustain 4` runs each leave-one-out build back to back for 4 s
# from idle while nvidia-smi samples the clock and the instantaneous power (`sagelib.measure.power`), and
# keeps what follows the first second (record sm90-energy-per-unit). A build that leaves the cap
# runs at 1,980 MHz: its gain is cycles and clock together. Leaving out the K/V copies (the L2-to-SM
# traffic) took D=128 off the cap (1.05x), which bounds what sharing each stage between two CTAs
# could return; D=64 ran below the cap then, and the score conversion was its dearest instruction.
# That sharing was then built (record sm90-kv-multicast: two CTAs of a cluster, each multicasting
# half of every stage): under the cap it raised the clock from ~1,870 to ~1,915 MHz, as predicted,
# and the two CTAs' lockstep took as much per cycle, so D=128 came out level and N=1024 slower.

# %%
energy_doc, energy_path = documents.latest(schema=sweep_records.SCHEMA, stem=power.ABLATIONS_STEM)
energy_rows = power.sustained_rows(energy_doc) if energy_doc else []
results.add("leave-one-out builds run back to back: clock and power (recorded)", energy_rows)
if energy_rows:
    display(Markdown(f"Recorded: `{energy_path.name}` ({energy_doc['date']}, {energy_doc['device']['name']}); "
                     "wrong outputs on purpose: each build leaves one unit's work out."))
    energy_shapes = list(dict.fromkeys(r["shape"] for r in energy_rows))
    energy_variants = [v for v in dict.fromkeys(r["variant"] for r in energy_rows) if v != "default"]
    ratio = {(r["shape"], r["variant"]): r["x default"] for r in energy_rows}
    fig = plots.speedup_bars(energy_variants, {s: [ratio.get((s, v), float("nan")) for v in energy_variants]
                                               for s in energy_shapes},
                             title="Each unit's work left out: sustained speed (4 s back to back), kernel only",
                             xlabel="speed / default build")
    results.figure(fig, "energy_per_unit")
    display(plots.table(energy_rows))
else:
    display(Markdown(f"No recording `data/results/*-{power.ABLATIONS_STEM}.json` to show."))

# %% [markdown]
# ## Who owns the grid: the tile scheduler (model)
# A persistent grid (one CTA per SM) shares the tiles among 132 CTAs. With a static stride each
# CTA draws a fixed sum of causal tile lengths and the unlucky ones finish last; a global counter
# hands each tile to whichever CTA is free. The kernel now takes tiles from a counter, causal ones
# heaviest first across the heads whose K and V fit 24 MB of L2 (`kernels/include/attn_sm90/scheduler.cuh`).
# Modelled below (`sagelib.studies.tile_balance`: a tile costs its key blocks plus half a block): the
# share of the card busy until the last CTA finishes. Measured: causal kernel-only +5-6% at
# N=16384 and +14-15% at N=1024, B=32 (experiment log, record sm90-tile-scheduler). The model
# knows nothing of L2: at N=1024, B=32 the window measured 4% slower than the plain head-major
# order it beats here. The three-consumer geometries have 192-row tiles (at D=64 the preset's,

# %%
balance_problems = [tile_balance.causal_problem(b, heads, n, d, sm90.geometry_for(None, d))
                    for b, n in ((2, 16384), (4, 8192), (1, 4096), (32, 1024)) for d in head_dims]
balance_problems += [tile_balance.causal_problem(b, heads, n, 128, sm90.ROTATION_GEOMETRY)
                     for b, n in ((2, 16384), (32, 1024))]
balance_rows = tile_balance.balance_table(balance_problems)
results.add("tile scheduler balance (model)", balance_rows)
schedules = [k for k in balance_rows[0] if k != "shape"]
fig = plots.grouped_bars([r["shape"] for r in balance_rows], {k: [r[k] for r in balance_rows] for k in schedules},
                         ylabel="mean CTA load / largest (model)", title="Tile scheduler balance over 132 CTAs",
                         value_format="%.2f")
results.figure(fig, "tile_scheduler_balance");

# %% [markdown]
# ## What a tile change costs, and what taking the next tile early bought (recorded)
# A consumer's tile is its key blocks plus a change: waiting for the next Q slot and decoding the
# tile, the first Q.K^T, and the epilogue's stores. CTA 0's traced walk (`sagelib profile sm90
# --trace`, record sm90-tile-change) put that change at about a quarter of an 8-block tile at
# N=1024: the same key blocks run at the same period at every N, so short sequences paid it in full.
# The kernel now decodes tiles by multiply-high division, takes the next tile before the epilogue
# (its scale loads then land under the stores), reads the V channel scales from the tile's Q slot,
# and stores the output through a per-warp staging tile as whole 16-byte chunks. Below: the
# recorded A/B of the build that closed the record (d7ce787) against the one before, same call, same
# bits (kernel only); where the decode's divisors live was settled after it at the same speed
# (record sm90-tile-decode-divisors).

# %%
tile_doc, tile_path = documents.latest(schema=sweep_records.SCHEMA, stem="sm90-sweep-tile-change")
tile_rows, before_name, after_name = sweep_records.tile_change_rows(tile_doc) if tile_doc else ([], None, None)
results.add("tile change (recorded)", tile_rows)
if tile_rows:
    show_recorded_pair(results, tile_doc, tile_path, tile_rows, ("before (TOPS)", "after (TOPS)"),
                       "The tile change: kernel only before and after, by shape", "tile_change",
                       note=f": `{before_name}` against `{after_name}`")
else:
    display(Markdown("No recording `data/results/*-sm90-sweep-tile-change.json` to show."))

# %% [markdown]
# ## The closed experiments against the leading structure
# Each closed experiment of the prior work reopens only when its condition holds.
# The producer + two consumer warpgroup structure changes ownership, the pipeline and
# the staging, so most may be reopened inside it, each by a proposal that declares
# the condition with evidence (`sagelib log propose`). The sm121 items stay closed:
# nothing here changes the toolchain or the ISA of that target.

# %%
review = ownership.reopening_review(ownership.candidate("fa3_pingpong"))
results.add("reopening review (fa3_pingpong)", review)
plots.table(review)

# %% [markdown]
# ## Reading: what the built kernel's experiments found
# * The ping-pong kernel's limit is its softmax phase, bound by instruction latency at two consumer
#   warps per scheduler. Every recorded schedule that moved work into that phase, or put the softmax
#   beside the same warpgroup's own wgmma, lost against the baseline of the same call; so did the
#   role split (0.61-0.75x) and a third consumer at D=128 through a shared score buffer (0.61-0.86x).
# * The softmax runs ~1.45x its lone time because the other consumer's tensor-core batch and fold
#   run beside it (the softmax-beside section): its period is two such softmaxes, which projects to
#   ~876 TOPS kernel only, where it measures. Two softmaxes side by side beside the batches leave
#   room for ~1,220 (an upper bound), but need each consumer's next Q.K^T in flight during its own
#   softmax: a second S buffer. `o_in_smem_overlap` (notebook 01) finds its registers by keeping O in
#   shared memory (238 of 240 registers, 64 KB more shared memory). Built, it ran at 0.64-0.67x of
#   ping-pong, and so did the same walk with O in registers and P.V in halves: without turns, P.V's
#   round trip and the fold sit on each consumer's chain after its softmax, where ping-pong hides
#   them under the other consumer's softmax.
# * Sustained, the power cap sets the clock (the energy section): D=128 runs near 1,900 MHz at 700 W,
#   D=64 ran at 1,980 below it. Leaving the K/V copies out took D=128 off the cap (1.05x); sharing them
#   between two CTAs (built, record sm90-kv-multicast) bought ~2.4% of clock and lost as much to the
#   two CTAs' lockstep, so D=128 came out level. The score conversion was D=64's dearest instruction
#   (1.07x without it): folded into the FMA (an integer add in place of I2FP, the bias leaving through
#   the row's subtrahend) it gave 1.02x at D=64 and lost 3-5% at D=128, so `cuda-sm90` folds at
#   head_dim 64 only. With it D=64 now touches the cap too.
# * What is left is not instruction count. The exp pass of the built kernel issues 4.74 (D=128) and
#   4.77 (D=64) instructions per exp2 against the contract's 4.5 per score (notebook 05's SASS table,
#   `sagelib kernels sass`), and under ncu the exp2 unit runs at 68% of its peak at D=64 with the
#   issue slots 61% busy, while at D=128 no unit passes half: D=64 sits ~1.45x from its exp2 bound,
#   D=128 on the latency of the ping-pong chain above.
# * Who transposes V was left to measurement (the quantizer or the kernel, whichever is faster). The
#   K/V quantizer writes V^T through a shared-memory tile; written token-major straight from registers
#   instead, the pass took 0.981-0.993x of its time, at most 0.5% of the whole call (B32 N1024 D128).
#   That is all an in-kernel transpose could win back before the same shared-memory work lands on the
#   attention kernel's warps, so V^T stays in the quantizer.
# * The closed experiments of the prior work may reopen inside the ping-pong structure, each only by a
#   proposal that declares its condition with evidence; the sm121 items stay closed.
