"""What the sm_120/sm_121 study stands on without a card: ptxas' resources, what the ISA accepts, the decision.

* :func:`ptxas_table`: registers, spills and shared memory of the built portable kernel for sm_121a, compiled now
  with nvcc (``sagelib kernels check``) or read from the committed report :data:`PTXAS_RECORDING`.
* :data:`PROBES` and :func:`probe`: which instructions each candidate needs ptxas accepts for sm_121a (one tiny
  kernel each: wgmma, TMA, TMA multicast, setmaxnreg, e4m3 mma.sync with an f16 accumulator). Compiling says what
  the ISA allows, not how fast the card runs it.
* :data:`RECOMMENDATION`, :data:`CONFIRM_OR_FALSIFY`: the decision and what would overturn it on the card.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

from sagelib import paths

ARCH = "sm_121a"
#: `sagelib kernels check --arch sm_120a --arch sm_121a --json ...` as committed (nvcc 13.0, no card)
PTXAS_RECORDING = paths.RESULTS_DIR / "2026-12-02-nvcc-13.0-sm120-sm121-kernels-check.json"


def ptxas_from_report(document: dict, arch: str = ARCH, file: str = "attn_mma.cu") -> dict:
    """instance name -> {registers, spill_stores, smem} of ``file``'s kernels for ``arch`` in a check report."""
    return {k["kernel"]: {"registers": k["registers"], "spill_stores": k["spill_stores"],
                          "smem": k["smem_bytes"] + k.get("dynamic_smem_bytes", 0)}
            for t in document["targets"] if t["file"] == file and t["arch"] == arch for k in t["kernels"]}


def ptxas_table(live: bool, arch: str = ARCH) -> tuple[dict, str]:
    """(table, where it comes from): compiled now when ``live`` and nvcc is here, else the committed report."""
    from sagelib.cuda import check

    if live and check.nvcc_path() is not None:
        result = check.run_check(["attn_mma.cu"], [arch], jobs=2)
        if result.targets and all(t.ok for t in result.targets):
            return ptxas_from_report(check.to_json(result), arch), f"compiled now (nvcc, {arch})"
    if PTXAS_RECORDING.is_file():
        return ptxas_from_report(json.loads(PTXAS_RECORDING.read_text()), arch), \
            f"recorded: {PTXAS_RECORDING.relative_to(paths.REPO_ROOT)}"
    return {}, "no nvcc here and no committed report"


@dataclass(frozen=True)
class Probe:
    key: str
    needed_by: str
    source: str  #: a CUDA translation unit with one kernel
    expected: str  #: what nvcc 13.0 did for sm_121a when this was written: "accepted", "refused" or "advisory"


_TMA = """#include <cstdint>
__global__ void k(const __grid_constant__ uint64_t desc, int *p) {
  __shared__ __align__(128) char buf[4096]; __shared__ uint64_t bar;
  uint32_t s = (uint32_t)__cvta_generic_to_shared(buf), b = (uint32_t)__cvta_generic_to_shared(&bar);
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"(b));
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes%5 [%0], [%1, {%2, %3}],"
               " [%4]%6;" :: "r"(s), "l"(&desc), "r"(0), "r"(0), "r"(b) MULTICAST : "memory");
  p[0] = buf[3];
}
"""

PROBES = (
    Probe("wgmma", "the Hopper structures (not a candidate here)",
          '__global__ void k(int *p) { asm volatile("wgmma.fence.sync.aligned;"); p[0] = 1; }\n', "refused"),
    Probe("tma", "the producer warp",
          _TMA.replace("%5", "").replace("%6", "").replace(" MULTICAST", ""), "accepted"),
    Probe("tma_multicast", "sharing K/V between CTAs of a cluster",
          _TMA.replace("%5", ".multicast::cluster").replace("%6", ", %5")
          .replace(" MULTICAST", ', "h"((uint16_t)3)'), "advisory"),
    Probe("setmaxnreg", "the producer warp (its registers to the consumers)",
          "__global__ void __launch_bounds__(160, 2) k(int *p) {\n"
          '  if (threadIdx.x >= 128) asm volatile("setmaxnreg.dec.sync.aligned.u32 24;");\n'
          '  else asm volatile("setmaxnreg.inc.sync.aligned.u32 240;");\n  p[threadIdx.x] = 1;\n}\n', "accepted"),
    Probe("mma_e4m3_f16_accumulator", "the fp16 inner accumulator",
          "#include <cstdint>\n__global__ void k(uint32_t *p) {\n  uint32_t c0 = p[6], c1 = p[7];\n"
          '  asm volatile("mma.sync.aligned.m16n8k32.row.col.f16.e4m3.e4m3.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, '
          '{%0,%1};" : "+r"(c0), "+r"(c1) : "r"(p[0]), "r"(p[1]), "r"(p[2]), "r"(p[3]), "r"(p[4]), "r"(p[5]));\n'
          "  p[8] = c0; p[9] = c1;\n}\n", "accepted"),
)


def probe(p: Probe, arch: str = ARCH, nvcc: str | None = None) -> str:
    """Compile ``p`` for ``arch``: "accepted", "advisory" (accepted with a ptxas advisory or warning) or "refused"."""
    from sagelib.cuda import check, toolkit

    nvcc = nvcc or check.nvcc_path()
    if nvcc is None:
        raise FileNotFoundError(toolkit.not_found("nvcc"))
    with tempfile.TemporaryDirectory(prefix="sagelib-probe-") as tmp:
        unit = Path(tmp) / f"{p.key}.cu"
        unit.write_text(p.source)
        done = subprocess.run([nvcc, "-std=c++17", check.gencode(arch), "-cubin", "-o", str(unit.with_suffix(".cubin")),
                               str(unit)], capture_output=True, text=True)
    if done.returncode != 0:
        return "refused"
    return "advisory" if "advisory" in (done.stdout + done.stderr).lower() else "accepted"


RECOMMENDATION = (
    "Keep the monolithic 4-warp mma.sync CTA on sm_120/sm_121 and run it with the fp16 inner accumulator "
    "(per_warp, fp32+fp16: backend cuda-per-warp-fp16, SageAttention2's own configuration there). Build neither a "
    "producer warp nor ping-pong now. On GB10's stated figures the tensor pipe is the limit by about 4x over exp2 "
    "(D128: 42.6 ms of mma.sync against 10.7 ms of exp2 at B2 H32 N16384 with the fp16 inner accumulator), so "
    "overlapping softmax with tensor work can buy at most the serial-to-floor gap (1.25x, and less since two math "
    "warps per scheduler already overlap across warps), while halving P.V's time buys 1.5x. The producer warp "
    "saves only the copies' issue slots (about 8 cp.async per thread per 64-key block) and costs 15 registers a "
    "consumer thread below the 255 the built kernel already needs at D128; ping-pong keeps the same 8 math warps "
    "per SM and adds barriers. Ping-pong is the next structure if the card shows the L2 serving K/V as the limit "
    "(it halves that traffic)."
)

CONFIRM_OR_FALSIFY = (
    {"measure on the card": "sagelib's microbenchmarks (notebook 01 with measure on): mma_sync_e4m3_f16acc "
                            "against mma_sync_e4m3",
     "confirms": "the f16 accumulator runs near 2x the fp32 one (projection: 2048 against 1024 ops/clk/SM)",
     "falsifies": "the two run at the same rate: the fp16 inner accumulator then buys no speed; keep fp32+fp32 "
                  "(more accurate)"},
    {"measure on the card": "sagelib bench, D128 N16384: cuda-per-warp-fp16 against cuda, kernel only",
     "confirms": "at least 1.3x (projection: 1.5x at the tensor floor)",
     "falsifies": "under 1.1x: the tensor pipe is not what limits the kernel; profile before any structure"},
    {"measure on the card": "sagelib bench: the fp16 inner accumulator's kernel-only TOPS against its projected "
                            "floor",
     "confirms": "60% or more of the floor: the monolithic structure is adequate",
     "falsifies": "under 50% with ncu's tensor pipe under 60% busy: latency between a warp's own mma.sync and "
                  "softmax is not hidden; build ping-pong (or a producer warp if ncu names the copies)"},
    {"measure on the card": "ncu on attn_mma_kernel: L2 (lts) throughput and DRAM read bytes",
     "confirms": "L2 throughput well below its peak and DRAM reads near one pass over each head's K/V",
     "falsifies": "L2 near its peak: K/V traffic limits; ping-pong's 256-row CTAs halve it"},
    {"measure on the card": "sagelib kernels check --arch sm_121a (no card needed) after any change",
     "confirms": "the kernels compile for sm_121a within 99 KB of shared memory per block",
     "falsifies": "new spills or a block over 99 KB"},
)


#: microbenchmark key -> the figure of sagelib.measure.hardware.GB10 (per clock per SM) it would replace
PROJECTED_RATES = {"mma_sync_s8": ("mma_sync_8bit_ops_per_clk", 1.0), "mma_sync_e4m3": ("mma_sync_pv_ops_per_clk", 1.0),
                   "mma_sync_e4m3_f16acc": ("mma_sync_pv_ops_per_clk", 2.0), "ex2": ("mufu_per_clk", 1.0)}


def card_rates(measure: bool) -> tuple[list[dict], object, str]:
    """(rows of projected against measured unit rates, the card's Hardware, a note). Measured only on an sm_120 or
    sm_121 GPU with ``measure``; elsewhere the rows hold the projections alone and the note says why."""
    import torch

    from sagelib.measure import microbench
    from sagelib.measure.hardware import GB10

    rates, note = [], None
    if not measure:
        note = "measure is off: nothing measured"
    elif not torch.cuda.is_available():
        note = "no CUDA GPU here: nothing measured"
    elif torch.cuda.get_device_capability()[0] != 12:
        major, minor = torch.cuda.get_device_capability()
        note = (f"this GPU is sm_{major}{minor}, not sm_120/sm_121: its rates are not GB10's, nothing measured here "
                "(notebook 01 measures this card's)")
    else:
        rates = [r for r in microbench.run() if r.key in PROJECTED_RATES]
        note = f"measured now on {torch.cuda.get_device_name()}"
    by_key = {r.key: r for r in rates}
    rows = [{"unit": key, "projected (GB10, per clock per SM)": getattr(GB10, field) * factor,
             "measured": by_key[key].value if key in by_key else None,
             "not measured because": (by_key[key].reason if key in by_key else note) or ""}
            for key, (field, factor) in PROJECTED_RATES.items()]
    measured = [r for r in rates if r.value and r.key != "mma_sync_e4m3_f16acc"]
    hardware = microbench.measured_hardware(measured, base=GB10) if measured else GB10
    if measured:  # this card's SM count; its clock stays GB10's stated one (the rates are per clock)
        hardware = replace(hardware, name=f"{torch.cuda.get_device_name()} (measured rates)",
                           sms=torch.cuda.get_device_properties(0).multi_processor_count)
    return rows, hardware, note
