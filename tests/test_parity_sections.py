"""sagelib.studies.parity_sections: one backend's parity sweep, kept in the notebook's results."""

import json

import pytest

from sagelib.records.results import Results
from sagelib.studies import parity_sections


@pytest.fixture
def shown(monkeypatch):
    texts = []
    monkeypatch.setattr(parity_sections, "display", lambda obj: texts.append(obj.data))
    return texts


def _saved(results):
    return json.loads((results.output_dir / "results.json").read_text())


def test_a_backend_that_cannot_run_here_records_why(tmp_path, shown, monkeypatch):
    monkeypatch.setattr(parity_sections.parity, "kernel_unavailable_reason", lambda device, backend: "no sm_90a GPU")
    results = Results("03_test", tmp_path)
    assert parity_sections.backend_parity(results, "cuda-sm90", "sm90_k64", "Hopper", "cpu", [1], [64]) == []
    saved = _saved(results)
    assert saved["values"]["sm90_k64_kernel_status"] == "no sm_90a GPU"
    assert saved["headlines"]["sm90 k64 parity cases passed"] == {"value": "not run", "unit": "",
                                                                  "note": "no sm_90a GPU"}
    assert shown == ["**Hopper not run:** no sm_90a GPU"] and saved["figures"] == []


def test_a_backend_that_runs_counts_its_passes_and_keeps_the_worst_error(tmp_path, shown, monkeypatch):
    monkeypatch.setattr(parity_sections.parity, "kernel_unavailable_reason", lambda device, backend: None)
    monkeypatch.setattr(parity_sections.parity, "default_sweep", lambda n_values, head_dims: ["a", "b"])
    errors = {"a": 1e-4, "b": 3e-4}
    monkeypatch.setattr(parity_sections.parity, "run_case", lambda case, device, backend: {
        "label": case, "seed": 0, "passed": case == "a", "to_contract": errors[case], "kernel_err": 0.01,
        "contract_err": 0.01, "n_q": 17, "n_kv": 56})
    results = Results("03_test", tmp_path)
    rows = parity_sections.backend_parity(results, "cuda-sm90", "sm90", "Hopper", "cuda", [1], [64])
    saved = _saved(results)
    assert [r["label"] for r in rows] == ["a", "b"] and saved["values"]["sm90_kernel_status"] == "run on cuda"
    assert saved["headlines"]["sm90 parity cases passed"]["value"] == "1/2"
    assert saved["headlines"]["sm90 largest kernel-vs-contract rel L1"]["value"] == 3e-4
    assert [f["name"] for f in saved["figures"]] == ["sm90_error_vs_float64"] and "<table>" in shown[0]


def test_charts_name_cases_by_number_and_the_table_gives_the_whole_configuration():
    rows = [{"n_q": 1, "n_kv": 1, "label": "1x1 d64 fp16 HND 4/4 full per_thread fp32+fp32"},
            {"n_q": 2007, "n_kv": 1000, "label": "2007x1000 d128 bf16 NHD 8/2 causal/top-left per_warp fp32+fp16"}]
    assert parity_sections.case_labels(rows) == ["#1 1x1", "#2 2007x1000"]
    table = parity_sections.table_rows(rows)
    assert [r["case"] for r in table] == ["#1", "#2"] and table[1]["label"] == rows[1]["label"]
    assert parity_sections.TABLE_COLUMNS[:2] == ["case", "label"]
