"""The host-time protocol (sagelib.measure.host_time) and the bench's synced and host records, without a GPU."""

import dataclasses

import pytest

from sagelib.inputs import Shape
from sagelib.measure import bench, host_time


def test_host_time_counts_every_call_and_syncs_after_each_batch():
    events = []
    figures = host_time.host_us_per_call(lambda: events.append("call"), batches=3, calls=7, warmup=2,
                                         sync=lambda: events.append("sync"))
    assert events.count("call") == 2 + 3 * 7
    assert events == ["call"] * 2 + ["sync"] + (["call"] * 7 + ["sync"]) * 3
    assert figures["calls"] == 7 and len(figures["batches_us"]) == 3
    assert figures["median_us"] == sorted(figures["batches_us"])[1]


def test_plans_off_restores_the_environment(monkeypatch):
    import os

    monkeypatch.delenv("SAGELIB_LAUNCH_PLANS", raising=False)
    with host_time.plans_off():
        assert os.environ["SAGELIB_LAUNCH_PLANS"] == "0"
    assert "SAGELIB_LAUNCH_PLANS" not in os.environ
    monkeypatch.setenv("SAGELIB_LAUNCH_PLANS", "1")
    with host_time.plans_off():
        pass
    assert os.environ["SAGELIB_LAUNCH_PLANS"] == "1"


def _record(backend, mode, tops, median_ms):
    shape = Shape(32, 32, 1024, 128)
    stats = {"median_ms": median_ms, "iqr_ms": 0.001, "q1_ms": median_ms, "q3_ms": median_ms, "min_ms": median_ms,
             "max_ms": median_ms, "mean_ms": median_ms, "reps": 5}
    return dataclasses.asdict(bench.Record(backend=backend, mode=mode, shape=shape.record(), causal=False,
                                           dtype="fp16", layout="HND", ops=int(tops * median_ms * 1e9) if tops else 1,
                                           timer="cuda-events", stats=stats,
                                           tops=tops, check={"ok": True} if mode != "host" else None))


def _document(records):
    return {"schema": bench.SCHEMA, "created_utc": "x", "device": {}, "environment": {}, "plan": {},
            "ceilings": {}, "records": records}


def test_a_host_record_needs_stats_but_no_tops():
    records = [_record("cuda-sm90", "host", None, 0.05)]
    bench.validate_document(_document(records))
    records[0]["stats"] = None
    with pytest.raises(ValueError, match="host"):
        bench.validate_document(_document(records))


def test_synced_records_are_compared_with_the_peers_synced_figures():
    records = [_record("sdpa-cudnn", "end_to_end", 600.0, 1.0), _record("sdpa-cudnn", "synced", 500.0, 1.0),
               _record("cuda-sm90", "end_to_end", 480.0, 1.0), _record("cuda-sm90", "synced", 450.0, 1.0),
               _record("cuda-sm90", "host", None, 0.04)]
    rows = {r["mode"]: r for r in bench.peer_ratios(records) if r["backend"] == "cuda-sm90"}
    assert rows["end_to_end"]["ratio"]["sdpa-cudnn"] == pytest.approx(0.8)
    assert rows["synced"]["ratio"]["sdpa-cudnn"] == pytest.approx(0.9)
    assert rows["host"]["ratio"] == {}
    table = bench.format_table(_document(records))
    assert "host 40 us per call, no sync" in table


def test_the_host_overhead_tables_show_every_row_and_shape():
    document = {"protocol": {"calls": 50}, "host": [
        {"row": "cuda-sm90", "shape": "1:8:256:128", "median_us": 41.5, "batches_us": [41.5] * 5, "calls": 50},
        {"row": "cuda-sm90", "shape": "32:32:1024:128", "median_us": 47.25, "batches_us": [47.25] * 5, "calls": 50},
        {"row": "sdpa-flash", "shape": "1:8:256:128", "median_us": 45.0, "batches_us": [45.0] * 5, "calls": 50}],
        "synced": [{"row": "cuda-sm90", "shape": "2:32:16384:128", "back_to_back_tops": 858.6, "synced_tops": 850.0,
                    "synced_loss": 0.01}]}
    text = host_time.format_host_overhead(document)
    assert "41.5" in text and "47.2" in text and "45.0" in text and "858.6 /   850.0  (1.0%)" in text
    sdpa_line = next(line for line in text.splitlines() if line.strip().startswith("sdpa-flash"))
    assert sdpa_line.rstrip().endswith("-")


def test_host_overhead_needs_a_gpu(sagelib_cli):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is here")
    code, _, err = sagelib_cli("bench", "--host-overhead")
    assert code == 3 and "--host-overhead: no CUDA GPU" in err
