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
# # 05 · Inside the kernels: compiler resources and hardware counters
#
# Timings say how fast; this report says why. Two sources, each reported as absent when absent:
#
# * **ptxas** (through `sagelib.cuda.check`, no GPU needed, only `nvcc`): registers, spills,
#   stack and shared memory of every kernel for every target architecture. A spill or a register
#   count that caps occupancy shows here before anything runs.
# * **Nsight Compute** (on a GPU host): one launch of each backend's kernels, profiled with
#   `--clock-control none` (the card's clocks are left alone), and the figures that decide an
#   attention kernel put side by side: tensor-pipe utilisation, achieved occupancy, registers,
#   local-memory traffic, shared-memory bank conflicts and wavefronts, DRAM throughput and the
#   dominant issue stall.

# %% tags=["parameters"]
output_dir: str = "outputs/interactive/05_profile"  # folder for results.json and figures (a run sets it)
device: str = "cuda"  # where the profiled launches run (one of cpu, cuda)
backends: list[str] = ["sdpa-flash", "sdpa-cudnn", "sage", "cuda", "cuda-sm90"]  # backends profiled
shape: str = "1:32:4096:128"  # the profiled problem, B:H:N:D
causal: bool = False  # causal masking in the profiled problem
mode: str = "end_to_end"  # the whole call or the attention kernel alone (one of end_to_end, kernel_only)
launch_count: int = 8  # most launches Nsight Compute profiles (at least 1)
ptxas_archs: list[str] = []  # architectures of the ptxas table, e.g. sm_90a; empty: every one
read_sass: bool = True  # count the exp pass's instructions in the SASS (needs nvcc)
recorded_dir: str = "data/results"  # folder of recorded GPU results
# %%
from pathlib import Path

from IPython.display import Markdown, display

from sagelib.cuda import sass
from sagelib.measure import profiling
from sagelib.measure import recordings as bench_records
from sagelib.records import documents
from sagelib.records.results import Results
from sagelib.studies import plots

results = Results("05_profile", output_dir)
tools = profiling.tools()
display(Markdown(bench_records.markdown_table([
    {"tool": name, "found": status.path or "no",
     "version or reason": status.version if status.available else status.reason}
    for name, status in tools.items()])))
results.add("tools", {name: {"path": s.path, "version": s.version, "reason": s.reason} for name, s in tools.items()});

# %% [markdown]
# ## ptxas: resources per kernel and architecture

# %%
ptxas = profiling.ptxas_table(archs=ptxas_archs)
results.add("ptxas", ptxas)
if ptxas["reason"] is None:
    display(Markdown(bench_records.markdown_table(profiling.ptxas_by_arch(ptxas["rows"]))))
    for failure in ptxas["failures"]:
        display(Markdown(f"- **check failure:** {failure}"))
    results.headline("ptxas_kernels_compiled", len(ptxas["rows"]), note="kernel x architecture pairs")
    results.headline("ptxas_spilling_kernels", sum(1 for r in ptxas["rows"] if r.get("spill_stores")),
                     note="kernel x architecture pairs with spill stores")
else:
    display(Markdown(f"**No ptxas table:** {ptxas['reason']}."))

# %% [markdown]
# ## SASS: what the exp pass issues per score
# A softmax-bound loop is as fast as its instructions per score allow. The contract fixes the least a score
# costs: its conversion from INT32 (I2FP, or the integer add of the float-bias form), one FFMA (scale and
# running max), one exp2, one FADD into the row sum and half an e4m3 pack: 4.5 instructions. `sagelib kernels
# sass` compiles the attention kernels here with nvcc, reads their SASS with cuobjdump and counts, by family,
# the basic block with the most MUFU.EX2 (the unmasked exp pass). These are compiler facts, not timings; on
# the sm_90a kernel the block is the exp pass alone, while the portable kernel's compiler interleaves P.V's
# mma.sync and its operand loads into the same block (the `mma` and `smem` shares).

# %%
sass_table = sass.exp_pass_table() if read_sass else {"mixes": [], "reason": "read_sass is off"}
results.add("sass exp pass", {"reason": sass_table["reason"], "rows": sass.rows(sass_table["mixes"])})
if sass_table["reason"] is None:
    mixes = sass_table["mixes"]
    fig = plots.stacked_bars([f"{m.kernel.replace('_kernel', '')} {m.arch}" for m in mixes],
                             {name: [m.per_exp2(name) for m in mixes] for name in sass.FAMILY_NAMES},
                             ylabel="instructions per exp2 in the block",
                             title="The exp pass by instruction family (SASS, compiled here)",
                             limits={"the contract's 4.5 per score": 4.5})
    results.figure(fig, "sass_exp_pass")
    display(Markdown(bench_records.markdown_table(sass.rows(mixes))))
    hopper = [m for m in mixes if m.arch == "sm_90a"]
    if hopper:
        results.headline("sm90_exp_pass_instructions_per_exp2", round(max(m.per_exp2() for m in hopper), 2),
                         note="the sm_90a kernel's worst instance; the contract's floor is 4.5 per score")
else:
    display(Markdown(f"**No SASS table:** {sass_table['reason']}."))

# %% [markdown]
# ## Nsight Compute: one launch of each backend, side by side

# %%
not_live = bench_records.why_not_live(device)
if not_live is None and not tools["ncu"].available:
    not_live = tools["ncu"].reason
if not_live is None:
    usable, skipped = bench_records.usable_backends(backends)
    for name, reason in skipped.items():
        display(Markdown(f"- `{name}` left out: {reason}"))
    document = bench_records.profile_backends(usable, shape, causal=causal, mode=mode,
                                              log_dir=Path(output_dir) / "ncu", launch_count=launch_count)
    display(Markdown(f"Measured now: `{shape}`, causal={causal}, {mode}, ncu {document['tool']['ncu']}."))
else:
    document, path = documents.latest(recorded_dir, bench_records.NCU_SCHEMA)
    display(Markdown(bench_records.recorded_banner(document, path, not_live)))

# %%
if document is not None:
    rows = bench_records.ncu_rows(document)
    display(Markdown(bench_records.markdown_table(rows)))
    results.add("ncu", document)
    results.add("ncu_rows", rows)
    for profile in document["profiles"]:
        if profile.get("reason"):
            display(Markdown(f"- `{profile['backend']}`: {profile['reason']}"))
