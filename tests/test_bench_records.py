"""Recorded results: sweep plans from notebook parameters, saving, finding the latest, headlines."""

from __future__ import annotations

import json

import pytest

from sagelib import inputs
from sagelib.measure import bench, timing
from sagelib.measure import recordings as bench_records
from sagelib.records import documents


def test_curve_plan_keeps_tokens_fixed():
    plan = bench_records.curve_plan(["sdpa-cudnn"], head_dims=[64, 128], seq_lens=[1024, 32768, 65536],
                                    tokens=32768, heads=32, causal_modes=[False, True], reps=7)
    assert [(s.batch, s.seq_q, s.head_dim) for s in plan.shapes] == [
        (32, 1024, 64), (1, 32768, 64), (1, 65536, 64), (32, 1024, 128), (1, 32768, 128), (1, 65536, 128)]
    assert plan.causal == [False, True] and plan.timing.reps == 7 and plan.timing.min_reps == 5
    assert plan.timing.cooldown_s == 0.0
    cooled = bench_records.curve_plan(["sdpa-cudnn"], head_dims=[128], seq_lens=[1024], tokens=1024, heads=1,
                                      causal_modes=[False], cooldown_s=2.0)
    assert cooled.timing.cooldown_s == 2.0
    with pytest.raises(ValueError, match="non-empty"):
        bench_records.curve_plan(["x"], head_dims=[], seq_lens=[1024], tokens=1, heads=1, causal_modes=[False])


def test_usable_backends_names_every_reason():
    usable, skipped = bench_records.usable_backends(["reference", "no-such-backend"])
    assert usable == ["reference"]
    assert "unknown backend 'no-such-backend'" in skipped["no-such-backend"]


def _doc(created, card, tops=100.0):
    shape = {"batch": 2, "heads": 32, "seq_q": 16384, "seq_kv": 16384, "head_dim": 128}
    ops = timing.attention_ops(inputs.Shape.from_record(shape), False)
    return {"schema": bench.SCHEMA, "created_utc": created, "device": {"name": card}, "environment": {},
            "plan": {}, "ceilings": {}, "records": [
                {"backend": "sdpa-cudnn", "mode": "end_to_end", "shape": shape, "causal": False, "dtype": "fp16",
                 "layout": "HND", "ops": ops, "timer": "cuda-events", "tops": tops,
                 "stats": {"median_ms": ops / (tops * 1e12) * 1e3}, "error": None}]}


def test_save_names_files_by_date_and_card_and_latest_picks_by_time(tmp_path):
    first = bench_records.save(_doc("2026-11-28T09:00:00Z", "NVIDIA H200"), tmp_path, stem="performance")
    assert first.name == "2026-11-28-nvidia-h200-performance.json"
    bench_records.save(_doc("2026-11-29T09:00:00Z", "NVIDIA H100 80GB HBM3"), tmp_path, stem="performance")
    bench_records.save(_doc("2026-12-01T09:00:00Z", "Other"), tmp_path, stem="reference")
    (tmp_path / "broken.json").write_text("{not json")
    document, path = documents.latest(tmp_path, stem="performance")
    assert document["device"]["name"] == "NVIDIA H100 80GB HBM3" and path.name.endswith("-performance.json")
    assert documents.latest(tmp_path)[0]["device"]["name"] == "Other"
    assert documents.latest(tmp_path / "missing") == (None, None)


def test_banner_says_recorded_and_nothing_measured(tmp_path):
    document = _doc("2026-11-29T09:00:00Z", "NVIDIA H200")
    document["annotations"] = ["the int8 ceiling was re-measured"]
    text = bench_records.recorded_banner(document, tmp_path / "x.json", "no GPU here")
    assert text.startswith("**Nothing was measured in this run:** no GPU here")
    assert "recorded results" in text and "NVIDIA H200" in text and "re-measured" in text
    assert "No recorded GPU results" in bench_records.recorded_banner(None, None, "no GPU here")


def test_headline_figures_pick_d128_n16384_non_causal():
    document = _doc("2026-11-29T09:00:00Z", "x", tops=585.0)
    assert bench_records.headline_figures(document) == {"tops_sdpa-cudnn_d128_n16384": 585.0}
    assert bench_records.headline_figures({"records": []}) == {}


def test_why_not_live():
    assert "device='cpu'" in bench_records.why_not_live("cpu")
    assert "'tpu'" in bench_records.why_not_live("tpu")


def test_markdown_table():
    text = bench_records.markdown_table([{"a": 1.23456, "b": "x|y"}, {"a": None, "c": 2}])
    assert text.splitlines()[0] == "| a | b | c |"
    assert "1.235" in text and "x\\|y" in text
    assert bench_records.markdown_table([]) == "(nothing to show)"


def test_newest_file_is_the_last_dated_name_of_its_stem(tmp_path):
    for name in ("2026-11-29-card-x-trace.txt", "2026-11-30-card-x-trace.txt", "2026-12-01-card-x-trace.json",
                 "2026-12-01-card-other-trace.txt"):
        (tmp_path / name).write_text("")
    assert documents.newest_file("x-trace", ".txt", tmp_path).name == "2026-11-30-card-x-trace.txt"
    assert documents.newest_file("missing", ".txt", tmp_path) is None


def test_finite_only_nulls_nan_and_inf_so_the_strict_writer_keeps_the_document(tmp_path):
    rows = [{"variant": "default", "rel_l1_to_default": 0.0, "round_ms": [1.5, 1.25]},
            {"variant": "no-exp2", "rel_l1_to_default": float("nan"), "round_ms": [float("inf"), 1.0]}]
    with pytest.raises(ValueError):  # what the sweep's --out met before: strict JSON refuses NaN
        documents.write_json({"rows": rows}, tmp_path / "strict.json")
    document, replaced = documents.finite_only({"rows": rows, "name": "sweep", "n": 3, "ok": True})
    assert replaced == 2
    assert document["rows"][1] == {"variant": "no-exp2", "rel_l1_to_default": None, "round_ms": [None, 1.0]}
    assert document["rows"][0] == rows[0] and (document["name"], document["n"], document["ok"]) == ("sweep", 3, True)
    assert rows[1]["round_ms"][0] == float("inf")  # the input is left as it was
    path = documents.write_json(document, tmp_path / "sweep.json")
    assert json.loads(path.read_text())["rows"][1]["rel_l1_to_default"] is None
