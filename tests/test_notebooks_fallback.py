"""Notebooks 04 and 05 without a GPU: nothing measured now, recorded results shown as recorded.

The notebooks are executed for real (jupytext -> papermill, the runner's path) with the `tiny`
profile, once per session (tests/conftest.py, ``fallback_runs``). The recordings they are pointed at
are either an empty folder or small documents written by tests/shared_runs.py, each exercising one
choice the notebook makes, plus the GPU recordings committed in data/results/, which must validate.
"""

from __future__ import annotations

import json

import pytest
import shared_runs

from sagelib.measure import bench
from sagelib.measure import recordings as bench_records
from sagelib.records import documents
from sagelib.run import report as report_files


def _shown(runs, key):
    """(results.json, HTML page) of run ``key``, after checking that it finished and its report is self-contained."""
    folder, summary, code, stderr = runs[key]
    assert code == 0 and summary is not None, f"{key}: the run failed:\n{stderr}"
    (outcome,) = summary["notebooks"]
    assert outcome["status"] == "ok", outcome["error"]
    name = outcome["name"]
    page = (folder / name / f"{name}.html").read_text()
    # the report of a real notebook opens offline and stays small (the bound holds at the cpu profile too)
    assert report_files.external_resources(page) == [] and len(page.encode()) < report_files.HTML_SIZE_LIMIT
    return json.loads((folder / name / "results.json").read_text()), page


def _recorded(runs, key):
    return runs[key][1]["overrides"]["recorded_dir"]


def test_04_without_recordings_says_nothing_was_measured(fallback_runs):
    values, html = _shown(fallback_runs, "04_no_recordings")
    assert values["values"]["measured_now"] is False
    assert "Nothing was measured in this run" in html and "No recorded GPU results" in html
    assert values["figures"] == []


def _recordings_of_04(runs) -> dict:
    """The files shared_runs.write_04_recordings wrote for the run (by the same names it gives them)."""
    from pathlib import Path

    folder = Path(_recorded(runs, "04_recorded"))
    committed = sorted(documents.RESULTS_DIR.glob("*-quant-breakdown.json"))[-1]
    return {"sweep": folder / "2026-11-29-test-gpu-9000-performance.json",
            "quantizers": folder / "2026-11-29-test-gpu-9000-bench-quant.json",
            "targets": folder / "2026-11-29-test-gpu-9000-bench-targets.json", "fusion": committed}


def test_04_shows_the_latest_recording_labelled_as_recorded(fallback_runs):
    values, html = _shown(fallback_runs, "04_recorded")
    wrote = _recordings_of_04(fallback_runs)
    assert wrote["sweep"].is_file()
    assert values["values"]["recorded_file"] == str(wrote["sweep"])
    assert "recorded results" in html and "Test GPU 9000" in html and "abc1234" in html
    assert "Older GPU" not in html and "Other Kind GPU" not in html
    # the sweep's three, the quantizer figures, the targets and their history (one recording measured a target),
    # the fusion ceilings: one figure for each case the recordings hold, and nothing else
    assert {f["name"] for f in values["figures"]} == {
        "tops_vs_n", "speedup_over_sdpa-cudnn", "against_ceilings", "quantizer_bandwidth", "targets",
        "target_history", "fusion_ceilings"}
    headline = values["headlines"]["tops_sdpa-cudnn_d128_n16384"]
    assert headline["value"] == 560.0 and headline["note"].startswith("recorded 2026-11-29")


def test_04_shows_recorded_quantizer_figures_against_the_copy(fallback_runs):
    values, html = _shown(fallback_runs, "04_recorded")
    assert "quantizer_bandwidth" in {f["name"] for f in values["figures"]}
    # later recordings without quantizer figures (the sweep, 2027's reference) do not hide the one that has them
    assert "Quantizer figures recorded" in html and _recordings_of_04(fallback_runs)["quantizers"].stem in html
    headline = values["headlines"]["quantization_of_copy_2_32_16384_128"]
    assert headline["value"] == 70.0 and headline["unit"] == "%" and "recorded 2026-11-29" in headline["note"]


def test_04_reads_the_targets_against_the_recorded_bench(fallback_runs):
    values, html = _shown(fallback_runs, "04_recorded")
    assert "targets" in {f["name"] for f in values["figures"]}
    rows = {r["target"]: r for r in values["values"]["targets"]}
    assert rows["Hopper kernel, D128 N16384, end to end"]["measured"] == 900.0
    assert rows["Hopper kernel, D128 N16384, end to end"]["met"] is False
    assert rows["Hopper kernel, D64 N16384, end to end"]["met"] is None  # not in the document: not measured
    assert "missed, 10% short" in html


def test_04_draws_the_recorded_fusion_ceilings(fallback_runs):
    values, html = _shown(fallback_runs, "04_recorded")
    assert "fusion_ceilings" in {f["name"] for f in values["figures"]}
    first = json.loads(_recordings_of_04(fallback_runs)["fusion"].read_text())["rows"][0]
    assert f"{first['shape']}: cuDNN {first['times_ms']['cudnn']:.3f} ms" in html and "direct V preparation" in html


def test_the_04_recordings_are_the_ones_the_tests_name(tmp_path):
    """The file names the 04 tests look for are the ones shared_runs.write_04_recordings writes."""
    wrote = shared_runs.write_04_recordings(tmp_path)
    assert wrote["sweep"] == tmp_path / "2026-11-29-test-gpu-9000-performance.json"
    assert wrote["quantizers"] == tmp_path / "2026-11-29-test-gpu-9000-bench-quant.json"
    assert wrote["targets"] == tmp_path / "2026-11-29-test-gpu-9000-bench-targets.json"
    assert json.loads(wrote["targets"].read_text())["records"][-1]["backend"] == "cuda-sm90"


def test_latest_quantizers_takes_the_newest_of_either_kind(tmp_path):
    assert bench_records.latest_quantizers(tmp_path) is None
    document = shared_runs.recorded_bench_document()
    document["quantizers"] = {"copy_tb_s": 4.0, "rows": [{"shape": "1:1:1:64", "what": "x", "tb_s": 1.0}]}
    in_bench = bench_records.save(document, tmp_path, stem="a")
    newer = shared_runs.recorded_bench_document()  # newer, but without quantizer figures
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


def test_05_without_gpu_reports_each_tool_and_the_recording(fallback_runs):
    values, html = _shown(fallback_runs, "05_recorded")
    assert set(values["values"]["tools"]) == {"ncu", "compute-sanitizer", "nvcc"}
    assert "ptxas" in values["values"]
    assert values["values"]["sass exp pass"] == {"reason": "read_sass is off", "rows": []}  # the switch is read
    assert "recorded results" in html and "fmha_fwd" in html
    assert values["values"]["ncu_rows"][0]["registers"] == 168


def test_05_counts_the_exp_pass_of_every_attention_kernel_where_nvcc_is(tiny_run):
    """The tiny run's 05 (tests/conftest.py), its SASS table on: the counts where nvcc and cuobjdump are here, the
    reason where not."""
    from sagelib.cuda import sass

    folder, summary, code, stderr = tiny_run["05_profile"]
    assert code == 0, stderr
    values = json.loads((folder / "05_profile" / "results.json").read_text())
    html = (folder / "05_profile" / "05_profile.html").read_text()
    table = values["values"]["sass exp pass"]
    if sass.unavailable_reason() is None:  # nvcc and cuobjdump here: the counts of every attention kernel
        assert table["reason"] is None and {r["arch"] for r in table["rows"]} == {"sm_90a", "sm_90", "sm_120a"}
        assert all(r["exp2"] >= 32 for r in table["rows"])
    else:
        assert table["rows"] == [] and table["reason"] == sass.unavailable_reason()
        assert "No SASS table" in html


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
