"""Notebooks 04 and 05 without a GPU: nothing measured now, recorded results shown as recorded.

The notebooks are executed for real (jupytext -> papermill, the runner's path) with the `tiny`
profile. The recordings they are pointed at are either an empty folder or small documents
written here, plus the GPU recordings committed in data/results/, which must validate.
"""

from __future__ import annotations

import json

import pytest

from sagelib import inputs
from sagelib.measure import bench, timing
from sagelib.measure import recordings as bench_records
from sagelib.records import documents
from sagelib.run import report as report_files
from sagelib.run import runner


def _run(tmp_path, name, recorded_dir):
    report = runner.run("tiny", only=[name], overrides={"recorded_dir": str(recorded_dir)},
                        out=tmp_path / "run", progress_bar=False, log=lambda line: None)
    (outcome,) = report.outcomes
    assert outcome.ok, outcome.error
    folder = tmp_path / "run" / name
    page = (folder / f"{name}.html").read_text()
    # the report of a real notebook opens offline and stays small (the bound holds at the cpu profile too)
    assert report_files.external_resources(page) == [] and len(page.encode()) < report_files.HTML_SIZE_LIMIT
    return json.loads((folder / "results.json").read_text()), page


def _recorded_bench_document():
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


def test_04_without_recordings_says_nothing_was_measured(tmp_path):
    values, html = _run(tmp_path, "04_performance", tmp_path / "empty")
    assert values["values"]["measured_now"] is False
    assert "Nothing was measured in this run" in html and "No recorded GPU results" in html
    assert values["figures"] == []


def test_04_shows_the_latest_recording_labelled_as_recorded(tmp_path):
    recorded = tmp_path / "recorded"
    old = _recorded_bench_document()
    old["created_utc"] = "2025-01-01T00:00:00Z"
    old["device"]["name"] = "Older GPU"
    bench_records.save(old, recorded, stem="performance")
    path = bench_records.save(_recorded_bench_document(), recorded, stem="performance")
    newer_small = _recorded_bench_document()  # a later recording of another kind is not the sweep
    newer_small["created_utc"], newer_small["device"]["name"] = "2027-01-01T00:00:00Z", "Other Kind GPU"
    bench_records.save(newer_small, recorded, stem="reference")
    values, html = _run(tmp_path, "04_performance", recorded)
    assert values["values"]["recorded_file"] == str(path)
    assert "recorded results" in html and "Test GPU 9000" in html and "abc1234" in html
    assert "Older GPU" not in html and "Other Kind GPU" not in html
    assert {f["name"] for f in values["figures"]} == {"tops_vs_n", "speedup_over_sdpa-cudnn", "against_ceilings"}
    headline = values["headlines"]["tops_sdpa-cudnn_d128_n16384"]
    assert headline["value"] == 560.0 and headline["note"].startswith("recorded 2026-11-29")


def test_04_shows_recorded_quantizer_figures_against_the_copy(tmp_path):
    recorded = tmp_path / "recorded"
    document = _recorded_bench_document()
    document["quantizers"] = {"copy_tb_s": 4.0, "rows": [
        {"shape": "2:32:16384:128", "what": "Q -> int8 (quant_qk)", "ms": 0.12, "tb_s": 3.3, "gpu_ms": 0.11,
         "gpu_tb_s": 3.6, "bytes": 4e8},
        {"shape": "2:32:16384:128", "what": "all quantization (prepare)", "ms": 0.42, "tb_s": 2.9, "gpu_ms": 0.41,
         "gpu_tb_s": 2.8, "bytes": 1.2e9}]}
    bench_records.save(document, recorded, stem="bench-quant")
    newer = _recorded_bench_document()  # newer, but without quantizer figures: not the one shown
    newer["created_utc"] = "2026-12-01T00:00:00Z"
    bench_records.save(newer, recorded, stem="performance")
    values, html = _run(tmp_path, "04_performance", recorded)
    assert "quantizer_bandwidth" in {f["name"] for f in values["figures"]}
    assert "Quantizer figures recorded" in html and "bench-quant" in html
    headline = values["headlines"]["quantization_of_copy_2_32_16384_128"]
    assert headline["value"] == 70.0 and headline["unit"] == "%" and "recorded 2026-11-29" in headline["note"]


def test_04_reads_the_targets_against_the_recorded_bench(tmp_path):
    recorded = tmp_path / "recorded"
    document = _recorded_bench_document()
    document["records"].append({**document["records"][-1], "backend": "cuda-sm90", "tops": 900.0})  # N16384 D128
    bench_records.save(document, recorded, stem="bench-targets")
    values, html = _run(tmp_path, "04_performance", recorded)
    assert "targets" in {f["name"] for f in values["figures"]}
    rows = {r["target"]: r for r in values["values"]["targets"]}
    assert rows["Hopper kernel, D128 N16384, end to end"]["measured"] == 900.0
    assert rows["Hopper kernel, D128 N16384, end to end"]["met"] is False
    assert rows["Hopper kernel, D64 N16384, end to end"]["met"] is None  # not in the document: not measured
    assert "missed, 10% short" in html


def test_04_draws_the_recorded_fusion_ceilings(tmp_path):
    recorded = tmp_path / "recorded"
    recorded.mkdir()
    committed = sorted(documents.RESULTS_DIR.glob("*-quant-breakdown.json"))[-1]
    (recorded / committed.name).write_text(committed.read_text())
    values, html = _run(tmp_path, "04_performance", recorded)
    assert "fusion_ceilings" in {f["name"] for f in values["figures"]}
    first = json.loads(committed.read_text())["rows"][0]
    assert f"{first['shape']}: cuDNN {first['times_ms']['cudnn']:.3f} ms" in html and "direct V preparation" in html


def test_latest_quantizers_takes_the_newest_of_either_kind(tmp_path):
    assert bench_records.latest_quantizers(tmp_path) is None
    document = _recorded_bench_document()
    document["quantizers"] = {"copy_tb_s": 4.0, "rows": [{"shape": "1:1:1:64", "what": "x", "tb_s": 1.0}]}
    in_bench = bench_records.save(document, tmp_path, stem="a")
    newer = _recorded_bench_document()  # newer, but without quantizer figures
    newer["created_utc"] = "2027-01-01T00:00:00Z"
    bench_records.save(newer, tmp_path, stem="b")
    found = bench_records.latest_quantizers(tmp_path)
    assert found.path == in_bench and found.copy_tb_s == 4.0 and found.commit == "abc1234"
    standalone = {"schema": bench_records.QUANT_SCHEMA, "created_utc": "2026-12-01T00:00:00Z",
                  "device": {"name": "Quant GPU"}, "environment": {"git_commit": "def5678"},
                  "copy_tb_s": 5.0, "rows": [{"shape": "1:1:1:64", "what": "x", "tb_s": 2.0}]}
    (tmp_path / "2026-12-01-quant.json").write_text(json.dumps(standalone))
    found = bench_records.latest_quantizers(tmp_path)
    assert (found.card, found.commit, found.copy_tb_s) == ("Quant GPU", "def5678", 5.0)


def test_05_without_gpu_reports_each_tool_and_the_recording(tmp_path):
    recorded = tmp_path / "recorded"
    recorded.mkdir()
    document = {"schema": bench_records.NCU_SCHEMA, "created_utc": "2026-11-29T11:00:00Z",
                "device": {"name": "Test GPU 9000"}, "environment": {"git_commit": "abc1234"}, "tool": {},
                "profiles": [{"backend": "sdpa-cudnn", "reason": None, "kernels": [
                    {"name": "void cudnn::fmha_fwd<Traits<128>>(Params)", "summary": {
                        "registers_per_thread": 168, "achieved_occupancy_pct": 11.9, "tensor_pipe_pct_max": 71.0,
                        "issue_stalls": {"math_pipe_throttle": 1.2}}}]}]}
    (recorded / "2026-11-29-test-ncu.json").write_text(json.dumps(document))
    values, html = _run(tmp_path, "05_profile", recorded)
    assert set(values["values"]["tools"]) == {"ncu", "compute-sanitizer", "nvcc"}
    assert "ptxas" in values["values"]
    from sagelib.cuda import sass

    table = values["values"]["sass exp pass"]
    if sass.unavailable_reason() is None:  # nvcc and cuobjdump here: the counts of every attention kernel
        assert table["reason"] is None and {r["arch"] for r in table["rows"]} == {"sm_90a", "sm_90", "sm_120a"}
        assert all(r["exp2"] >= 32 for r in table["rows"])
    else:
        assert table["rows"] == [] and table["reason"] == sass.unavailable_reason()
        assert "No SASS table" in html
    assert "recorded results" in html and "fmha_fwd" in html
    assert values["values"]["ncu_rows"][0]["registers"] == 168


def test_short_kernel_names():
    assert (bench_records.short_kernel_name("void flash::flash_fwd_kernel<Traits<128, 64>, true>(Params)")
            == "flash_fwd_kernel")
    assert bench_records.short_kernel_name("_attn_fwd") == "_attn_fwd"


def test_committed_gpu_recordings_validate():
    found = documents.load_all(documents.RESULTS_DIR)
    if not found:
        pytest.skip("no GPU recording committed in data/results yet")
    for document, path in found:
        bench.validate_document(document)
        assert document["device"]["type"] == "cuda", path
        assert document["environment"].get("gpus"), f"{path}: no GPU named in the provenance"
        assert all(r["timer"] == "cuda-events" for r in document["records"]), path
