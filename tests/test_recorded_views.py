"""sagelib.studies.recorded_views: a recording's section, shown and kept in the notebook's results."""

import json

import pytest

from sagelib.records.results import Results
from sagelib.studies import recorded_views

TRACE = """## default build
consumer warpgroup 0, warp 0:
  block  2 start     1000  softmax   100 | turn    10 | issue   20 | wait    30 | fold    40
  block  3 start     1300  softmax   120 | turn    10 | issue   20 | wait    30 | fold    40
consumer warpgroup 1, warp 0:
  block  2 start     1100  softmax    90 | turn     5 | issue   20 | wait    30 | fold    50
  block  3 start     1350  softmax    90 | turn     5 | issue   20 | wait    30 | fold    50
"""


@pytest.fixture
def shown(monkeypatch):
    """The text of what the section displays (Markdown and HTML objects), in order."""
    texts = []
    monkeypatch.setattr(recorded_views, "display", lambda obj: texts.append(obj.data))
    return texts


def _saved(results):
    return json.loads((results.output_dir / "results.json").read_text())


def test_block_phases_chart_keeps_one_bar_per_build_and_warpgroup(tmp_path, shown):
    (tmp_path / "2026-01-01-test-traces.txt").write_text(TRACE)
    results = Results("02_test", tmp_path / "out")
    bars = recorded_views.chart_block_phases(results, "test-traces", {"default": ("default build", None)},
                                             "a title", "phases", directory=tmp_path)
    assert list(bars) == ["default, warpgroup 0", "default, warpgroup 1"]
    assert bars["default, warpgroup 0"]["period"] == 300 and bars["default, warpgroup 1"]["period"] == 250
    saved = _saved(results)
    assert [f["name"] for f in saved["figures"]] == ["phases"]
    assert len(saved["values"]["block phases: a title (recorded)"]) == 2


def test_a_missing_trace_says_which_file_and_records_nothing(tmp_path, shown):
    results = Results("02_test", tmp_path / "out")
    assert recorded_views.chart_block_phases(results, "absent", {"x": ("y", None)}, "t", "f", directory=tmp_path) == {}
    assert "data/results/*-absent.txt" in shown[0]
    assert _saved(results)["figures"] == []


def test_show_recorded_names_the_file_or_how_to_record_it(tmp_path, shown):
    document = {"created_utc": "2026-12-01T10:00:00Z", "device": {"name": "Test GPU"}}
    recorded_views.show_recorded([{"a": 1}], document, tmp_path / "x.json", "`cuda-sm90`", "B=2")
    assert "Recorded in `x.json` (2026-12-01, Test GPU)" in shown[0] and "<table>" in shown[1]
    recorded_views.show_recorded([], None, None, "`cuda-sm90`", "B=2, H=32")
    assert len(shown) == 3 and "No recorded `cuda-sm90` kernel-only figure for B=2, H=32" in shown[2]


def test_a_recorded_pair_draws_both_columns_by_shape(tmp_path, shown):
    results = Results("02_test", tmp_path / "out")
    rows = [{"shape": "S1", "before": 1.0, "after": 2.0}, {"shape": "S2", "before": 3.0, "after": 3.5}]
    document = {"date": "2026-12-01", "device": {"name": "Test GPU"}}
    recorded_views.show_recorded_pair(results, document, tmp_path / "ab.json", rows, ("before", "after"), "t", "ab",
                                      note=": A against B")
    assert shown[0] == "Recorded in `ab.json` (2026-12-01, Test GPU): A against B, kernel only."
    assert "S2" in shown[1]  # the table
    assert [f["name"] for f in _saved(results)["figures"]] == ["ab"]
