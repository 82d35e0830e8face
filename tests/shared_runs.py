"""The notebook runs the tests share: each executed once per session (tests/conftest.py, ``notebook_runs``).

Two groups, each served by a fixture of the same name:

* ``tiny_run``: every notebook of the workbook at the ``tiny`` profile, with the Hopper paths switched off
  (SAGELIB_HOPPER=off; on a CPU nothing else changes, and one run then also serves the test that every notebook
  copes with the setting). Keyed by notebook name.
* ``fallback_runs``: notebooks 04 and 05 without a GPU, pointed at recordings written here (an empty folder, or
  small documents that each exercise one choice the notebook makes). Keyed as in :data:`FALLBACK`.

A session runs only the groups its collected tests use, longest runs first, two at a time.
"""

from __future__ import annotations

import json
from pathlib import Path

from sagelib import inputs
from sagelib.measure import bench, timing
from sagelib.measure import recordings as bench_records
from sagelib.records import documents

TINY_ENV = {"SAGELIB_HOPPER": "off"}

#: rough seconds of each run on a quiet 2-core machine, to start the longest first (05 compiles the kernels with
#: nvcc when the session's kernel cache does not hold them yet)
COST_S = {"05_profile": 40, "00_contract": 25, "01_ownership": 25, "04_performance": 22, "02_experiments": 22,
          "04_recorded": 14, "03_parity": 15, "06_ownership_sm120": 14, "07_in_a_model": 14, "05_recorded": 10,
          "04_no_recordings": 9}

#: key -> (notebook, overrides other than recorded_dir) of the fallback runs
FALLBACK = {"04_no_recordings": ("04_performance", {}),
            "04_recorded": ("04_performance", {}),
            # the SASS table is judged on the tiny run's 05 (tests/test_notebooks_fallback.py); here it would only
            # read the same cubins again
            "05_recorded": ("05_profile", {"read_sass": False})}


def recorded_bench_document() -> dict:
    """A small bench document as a GPU run records it: three backends at D128, N1024 and N16384."""
    records = []
    for backend, tops in (("sdpa-flash", 330.0), ("sdpa-cudnn", 560.0), ("sage", 440.0)):
        for n, batch in ((1024, 32), (16384, 2)):
            shape = inputs.Shape(batch, 32, n, 128)
            ops = timing.attention_ops(shape, False)
            median = ops / (tops * 1e12) * 1e3
            records.append({
                "backend": backend, "mode": "end_to_end", "shape": {"batch": batch, "heads": 32,
                                                                    "seq_q": n, "seq_kv": n,
                                                                    "head_dim": 128},
                "causal": False, "dtype": "fp16", "layout": "HND", "ops": ops, "timer": "cuda-events",
                "stats": {"median_ms": median, "iqr_ms": 0.01}, "tops": tops, "check": {"ok": True, "rel_l1": 0.001},
                "error": None})
    return {"schema": bench.SCHEMA, "created_utc": "2026-11-29T10:00:00Z", "command": "sagelib bench (test document)",
            "device": {"type": "cuda", "name": "Test GPU 9000"},
            "environment": {"git_commit": "abc1234", "driver": "1.0", "cuda_runtime": "13.0", "torch": "2.x"},
            "plan": {}, "ceilings": {"int8_gemm": {"value": 890.0, "unit": "TOPS"}}, "records": records}


QUANTIZER_ROWS = [
    {"shape": "2:32:16384:128", "what": "Q -> int8 (quant_qk)", "ms": 0.12, "tb_s": 3.3, "gpu_ms": 0.11,
     "gpu_tb_s": 3.6, "bytes": 4e8},
    {"shape": "2:32:16384:128", "what": "all quantization (prepare)", "ms": 0.42, "tb_s": 2.9, "gpu_ms": 0.41,
     "gpu_tb_s": 2.8, "bytes": 1.2e9}]


def write_04_recordings(recorded: Path) -> dict:
    """Recordings for notebook 04, one case per choice it makes; returns what each case wrote.

    * ``sweep``: the sweep it shows is the newest ``performance`` recording (Test GPU 9000, 2026-11-29), not an older
      one (Older GPU) nor a newer recording of another kind (Other Kind GPU, stem ``reference``).
    * ``quantizers``: its quantizer figures come from the newest recording that has them (``bench-quant``), though
      later recordings without them exist (the sweep, the ``reference`` one).
    * ``targets``: a recording with the Hopper kernel's D128 N16384 case (900 TOPS) gives the targets their figures
      and, as the only recording that measured a target, the history chart.
    * ``fusion``: the committed quant-breakdown recording gives the fusion ceilings.
    """
    older = recorded_bench_document()
    older["created_utc"], older["device"]["name"] = "2025-01-01T00:00:00Z", "Older GPU"
    bench_records.save(older, recorded, stem="performance")
    sweep = bench_records.save(recorded_bench_document(), recorded, stem="performance")
    other_kind = recorded_bench_document()  # a later recording of another kind is not the sweep
    other_kind["created_utc"], other_kind["device"]["name"] = "2027-01-01T00:00:00Z", "Other Kind GPU"
    bench_records.save(other_kind, recorded, stem="reference")

    with_quantizers = recorded_bench_document()
    with_quantizers["quantizers"] = {"copy_tb_s": 4.0, "rows": QUANTIZER_ROWS}
    quantizers = bench_records.save(with_quantizers, recorded, stem="bench-quant")

    with_target = recorded_bench_document()
    with_target["records"].append({**with_target["records"][-1], "backend": "cuda-sm90", "tops": 900.0})  # N16384 D128
    targets = bench_records.save(with_target, recorded, stem="bench-targets")

    committed = sorted(documents.RESULTS_DIR.glob("*-quant-breakdown.json"))[-1]
    (recorded / committed.name).write_text(committed.read_text())
    return {"sweep": sweep, "quantizers": quantizers, "targets": targets, "fusion": committed}


NCU_DOCUMENT = {"schema": bench_records.NCU_SCHEMA, "created_utc": "2026-11-29T11:00:00Z",
                "device": {"name": "Test GPU 9000"}, "environment": {"git_commit": "abc1234"}, "tool": {},
                "profiles": [{"backend": "sdpa-cudnn", "reason": None, "kernels": [
                    {"name": "void cudnn::fmha_fwd<Traits<128>>(Params)", "summary": {
                        "registers_per_thread": 168, "achieved_occupancy_pct": 11.9, "tensor_pipe_pct_max": 71.0,
                        "issue_stalls": {"math_pipe_throttle": 1.2}}}]}]}


def prepare_fallback(key: str, recorded: Path) -> None:
    """Write the recordings of fallback run ``key`` into ``recorded`` (a new folder)."""
    recorded.mkdir(parents=True)
    if key == "04_recorded":
        write_04_recordings(recorded)
    elif key == "05_recorded":
        (recorded / "2026-11-29-test-ncu.json").write_text(json.dumps(NCU_DOCUMENT))


def plan(groups: set[str], notebook_names: list[str], base: Path) -> list[dict]:
    """The runs of ``groups``, longest first: what tests/notebook_worker.py reads."""
    specs = []
    if "tiny_run" in groups:
        specs += [{"key": name, "notebook": name, "overrides": {}, "env": TINY_ENV} for name in notebook_names]
    if "fallback_runs" in groups:
        for key, (notebook, overrides) in FALLBACK.items():
            recorded = base / "recorded" / key
            prepare_fallback(key, recorded)
            specs.append({"key": key, "notebook": notebook, "overrides": {**overrides, "recorded_dir": str(recorded)},
                          "env": {}})
    for spec in specs:
        spec["out"] = str(base / spec["key"])
    return sorted(specs, key=lambda s: -COST_S.get(s["key"], 10))
