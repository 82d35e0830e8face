"""Microbenchmarks of the units that decide an attention kernel (Phase 1, notebook 01).

Each kernel in ``kernels/microbench/`` runs one CTA per SM; thread 0 of every CTA
records how many SM clocks the CTA took. Work per CTA over those clocks gives a
rate per clock per SM, which does not depend on the clock the card happens to run
at. The rates replace the stated figures of :class:`sagelib.measure.hardware.Hardware`.

Needs a CUDA GPU and CuPy; without them :func:`run` returns every rate with the
reason it was not measured.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

from sagelib.measure.hardware import H200
from sagelib.records import documents, provenance
from sagelib.records.datafile import utc_stamp

CHAINS = 8  # independent chains per thread in microbench.cu


@dataclass(frozen=True)
class Micro:
    key: str
    kernel: str
    source: str
    threads: int
    iters: int
    work_per_thread_iter: float  #: results (or ops) one thread produces per loop iteration
    unit: str
    what: str
    hardware_field: str | None = None  #: the Hardware rate it measures
    needs: str = "sm_89"  #: oldest architecture that has the instruction
    arch_suffix: str = ""


MICROBENCHES = (
    Micro("ex2", "bench_ex2", "microbench.cu", 1024, 4096, CHAINS, "results/clk/SM",
          "ex2.approx.ftz.f32: one per score", "mufu_per_clk"),
    Micro("cvt_s32_f32", "bench_cvt_s32_f32", "microbench.cu", 1024, 4096, CHAINS, "results/clk/SM",
          "cvt.rn.f32.s32: int32 score to fp32", "cvt_i2f_per_clk"),
    Micro("ex2_and_cvt", "bench_ex2_and_cvt", "microbench.cu", 1024, 4096, CHAINS, "pairs/clk/SM",
          "ex2 and cvt interleaved: half of either rate if they share a unit"),
    Micro("magic_s32_f32", "bench_magic_s32_f32", "microbench.cu", 1024, 4096, CHAINS, "results/clk/SM",
          "int32 to fp32 by the float-bias trick (integer add + float add)"),
    Micro("cvt_e4m3x2", "bench_cvt_e4m3x2", "microbench.cu", 1024, 4096, CHAINS, "instructions/clk/SM",
          "cvt.rn.satfinite.e4m3x2.f32: two P values to fp8"),
    Micro("mma_sync_s8", "bench_mma_sync_s8", "microbench.cu", 512, 2048, 4 * 2 * 16 * 8 * 32 / 32, "ops/clk/SM",
          "mma.sync m16n8k32 int8 (Q.K^T, portable path)", "mma_sync_8bit_ops_per_clk"),
    Micro("mma_sync_e4m3", "bench_mma_sync_e4m3", "microbench.cu", 512, 2048, 4 * 2 * 16 * 8 * 32 / 32,
          "ops/clk/SM", "mma.sync m16n8k32 e4m3 with changing operands (P.V, portable path; on sm_90 "
          "ptxas widens it to f16 HMMA)"),
    Micro("mma_sync_e4m3_f16acc", "bench_mma_sync_e4m3_f16acc", "microbench.cu", 512, 2048,
          4 * 2 * 16 * 8 * 32 / 32, "ops/clk/SM", "mma.sync m16n8k32 e4m3 with an f16 accumulator (P.V of the fp16 "
          "inner accumulator; said to run at twice the fp32 form's rate on sm_120/sm_121)"),
    Micro("mma_sync_f16", "bench_mma_sync_f16", "microbench.cu", 512, 2048, 4 * 2 * 16 * 8 * 16 / 32,
          "ops/clk/SM", "mma.sync m16n8k16 f16 -> fp32 (the portable kernel's P.V on sm_90)"),
    Micro("wgmma_s8", "bench_wgmma_s8", "microbench_wgmma.cu", 256, 512, 8 * 2 * 64 * 128 * 32 / 128, "ops/clk/SM",
          "wgmma m64n128k32 int8 from shared memory (Q.K^T, Hopper path)", "wgmma_8bit_ops_per_clk",
          needs="sm_90a", arch_suffix="a"),
    Micro("wgmma_e4m3", "bench_wgmma_e4m3", "microbench_wgmma.cu", 256, 512, 8 * 2 * 64 * 128 * 32 / 128,
          "ops/clk/SM", "wgmma m64n128k32 e4m3 from shared memory (P.V, Hopper path)", needs="sm_90a",
          arch_suffix="a"),
)


@dataclass
class Rate:
    key: str
    what: str
    unit: str
    value: float | None
    hardware_field: str | None
    reason: str | None = None  #: why there is no value


def unavailable_reason() -> str | None:
    if not torch.cuda.is_available():
        return "no CUDA GPU on this machine: nothing measured"
    from sagelib.cuda import cupy_missing_reason

    return cupy_missing_reason()


def pv_microbench(capability: tuple[int, int]) -> str:
    """The microbenchmark of the portable kernel's P.V instruction on a GPU of ``capability``:
    e4m3 mma.sync, except on sm_90, which has none and where the kernel widens to f16."""
    return "mma_sync_f16" if tuple(capability) == (9, 0) else "mma_sync_e4m3"


def run(repeats: int = 5) -> list[Rate]:
    """Measure every microbenchmark on the current GPU (median over ``repeats`` launches)."""
    reason = unavailable_reason()
    if reason:
        return [Rate(m.key, m.what, m.unit, None, m.hardware_field, reason) for m in MICROBENCHES]
    from sagelib.cuda.features import hopper_unavailable_reason

    major, minor = torch.cuda.get_device_capability()
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    rates = []
    for micro in MICROBENCHES:
        field = "mma_sync_pv_ops_per_clk" if micro.key == pv_microbench((major, minor)) else micro.hardware_field
        if micro.needs == "sm_90a" and (hopper := hopper_unavailable_reason((major, minor))) is not None:
            rates.append(Rate(micro.key, micro.what, micro.unit, None, field, f"needs {micro.needs}: {hopper}"))
            continue
        try:
            rates.append(Rate(micro.key, micro.what, micro.unit, _measure(micro, sms, f"sm_{major}{minor}",
                                                                          repeats), field))
        except Exception as exc:  # a failed build or launch is a finding to show, not a crash
            rates.append(Rate(micro.key, micro.what, micro.unit, None, field, f"{type(exc).__name__}: {exc}"))
    return rates


def _measure(micro: Micro, sms: int, arch: str, repeats: int) -> float:
    import cupy

    from sagelib.cuda import build

    kernel = build.load_function(micro.source, micro.kernel, arch=arch + micro.arch_suffix)
    cycles = cupy.zeros(sms, dtype=cupy.uint64)
    sink = cupy.zeros(sms * micro.threads, dtype=cupy.float32)
    per_cta = micro.threads * micro.iters * micro.work_per_thread_iter
    samples = []
    for _ in range(repeats + 1):  # the first launch warms up
        kernel((sms,), (micro.threads,), (cupy.int32(micro.iters), cycles, sink))
        cupy.cuda.runtime.deviceSynchronize()
        samples.append(per_cta / float(statistics.median(cycles.get().tolist())))
    return statistics.median(samples[1:])


#: exp2 and cvt interleaved at more than this fraction of exp2 alone means they do not share a unit
SEPARATE_UNITS_FRACTION = 0.75


def measured_hardware(rates: list[Rate], base=None):
    """``base`` (default H200) with every measured figure that maps to a Hardware field.

    The pair rate of ``ex2_and_cvt`` against ``ex2`` decides whether the conversion
    competes with exp2: half the rate if they share a unit, about the same if not.
    """
    base = base or H200
    measured = {r.hardware_field: r.value for r in rates if r.hardware_field and r.value}
    by_key = {r.key: r.value for r in rates if r.value}
    if by_key.get("ex2") and by_key.get("ex2_and_cvt"):
        measured["convert_shares_exp2_unit"] = by_key["ex2_and_cvt"] < SEPARATE_UNITS_FRACTION * by_key["ex2"]
    return base.with_measured(**measured) if measured else base


SCHEMA = documents.MICROBENCH.id


def latest_recording():
    """(rates, document, path) of the newest recorded run in data/results/, or (None, None, None)."""

    document, path = documents.latest(schema=SCHEMA, stem="microbench")
    if document is None:
        return None, None, None
    fields = set(Rate.__dataclass_fields__)
    rates = [Rate(**{k: v for k, v in r.items() if k in fields}) for r in document["rates"]]
    return rates, document, path


def document(rates: list[Rate], command: str, annotations: tuple[str, ...] = ()) -> dict:
    """A recording of ``rates`` (schema :data:`SCHEMA`), as :func:`latest_recording` reads it back."""
    return {"schema": SCHEMA, "created_utc": utc_stamp(), "command": command,
            "device": {"name": torch.cuda.get_device_name() if torch.cuda.is_available() else "cpu"},
            "environment": provenance.environment_or_reason(),
            "annotations": ["rates are per SM clock, from one CTA per SM counting its own clock64 cycles "
                            "(kernels/microbench*.cu)", *annotations],
            "rates": [asdict(r) for r in rates]}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m sagelib.measure.microbench",
                                     description="Measure the unit rates on this GPU; print them and write "
                                                 "OUT/microbench.json (copy it to data/results to keep it).")
    parser.add_argument("--out", default=".", help="folder for microbench.json")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    if args.repeats < 1:
        parser.error(f"--repeats: expected at least 1 timed launch, got {args.repeats}")
    rates = run(args.repeats)
    for r in rates:
        value = "-" if r.value is None else f"{r.value:.1f}"
        print(f"{r.key:16s} {value:>10s} {r.unit:22s} {r.hardware_field or ''} {r.reason or ''}")
    if not any(r.value for r in rates):
        print(f"nothing measured: {rates[0].reason if rates else 'no microbenchmarks'}", file=sys.stderr)
        return 1
    out = Path(args.out) / "microbench.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(document(rates, "python3 -m sagelib.measure.microbench " + " ".join(argv or sys.argv[1:])),
                              indent=1) + "\n")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
