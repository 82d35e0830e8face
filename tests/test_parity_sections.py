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
        "contract_err": 0.01})
    results = Results("03_test", tmp_path)
    rows = parity_sections.backend_parity(results, "cuda-sm90", "sm90", "Hopper", "cuda", [1], [64])
    saved = _saved(results)
    assert [r["label"] for r in rows] == ["a", "b"] and saved["values"]["sm90_kernel_status"] == "run on cuda"
    assert saved["headlines"]["sm90 parity cases passed"]["value"] == "1/2"
    assert saved["headlines"]["sm90 largest kernel-vs-contract rel L1"]["value"] == 3e-4
    assert [f["name"] for f in saved["figures"]] == ["sm90_error_vs_float64"] and "<table>" in shown[0]
