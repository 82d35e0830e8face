"""sagelib.studies.kernel_records: the built kernels' recorded kernel-only speed against their projections."""

import json

import pytest

from sagelib.measure import bench
from sagelib.measure import recordings as bench_records
from sagelib.measure.hardware import H200
from sagelib.studies import kernel_records, unit_bounds

CALL = kernel_records.Call(2, 32, 16384, (64, 128))


def _record(backend, head_dim, tops, *, mode="kernel_only", causal=False, n=16384, error=None):
    return {"backend": backend, "mode": mode, "causal": causal, "tops": tops, "error": error,
            "shape": {"batch": 2, "heads": 32, "seq_q": n, "seq_kv": n, "head_dim": head_dim}}


def _document(records, created="2026-12-01T00:00:00Z"):
    return {"schema": bench.SCHEMA, "created_utc": created, "device": {"name": "Test GPU"}, "records": records}


def test_kernel_only_records_pick_the_call_backend_mode_and_causal_flag():
    doc = _document([_record("cuda-sm90", 128, 900.0), _record("cuda-sm90", 128, 1.0, mode="end_to_end"),
                     _record("cuda-sm90", 128, 2.0, causal=True), _record("cuda-sm90", 128, 3.0, n=1024),
                     _record("cuda-sm90", 256, 4.0), _record("cuda-sm90", 64, 5.0, error="launch failed"),
                     _record("cuda", 128, 6.0)])
    assert [r["tops"] for r in kernel_records.kernel_only_records(doc, CALL)] == [900.0]
    both = kernel_records.kernel_only_records(doc, CALL, causal=(False, True))
    assert sorted(r["tops"] for r in both) == [2.0, 900.0]


def test_against_projection_divides_by_the_named_bound_at_the_records_head_dim():
    projected = unit_bounds.projected_bounds(unit_bounds.bound_table(H200, "stated", [64, 128], 2, 32, 16384),
                                             "fa3_pingpong")
    (row,) = kernel_records.against_projection([_record("cuda-sm90", 128, 900.0)], projected, "cvt")
    assert row["measured / serial"] == pytest.approx(900.0 / projected[(128, "cvt")][unit_bounds.SERIAL])
    (row,) = kernel_records.against_projection([_record("cuda", 64, 500.0)], projected, "float-bias",
                                               ratio_to="floor", with_backend=True)
    assert row["backend"] == "cuda"
    assert row["measured / floor"] == pytest.approx(500.0 / projected[(64, "float-bias")][unit_bounds.FLOOR])
    with pytest.raises(KeyError):
        kernel_records.against_projection([_record("cuda", 64, 500.0)], projected, "ratio", ratio_to="median")


def test_geometry_rows_pair_the_shapes_both_backends_ran():
    doc = _document([_record("cuda-sm90", 128, 900.0), _record("cuda-sm90-k64", 128, 810.0),
                     _record("cuda-sm90", 64, 600.0, causal=True), _record("cuda-sm90-k64", 64, 660.0, causal=True),
                     _record("cuda-sm90", 64, 650.0)])
    rows = kernel_records.geometry_rows(doc, CALL)
    assert [(r["head_dim"], r["causal"]) for r in rows] == [(64, True), (128, False)]
    assert rows[0]["k64 / preset"] == pytest.approx(1.1) and rows[1]["k64 / preset"] == pytest.approx(0.9)


def test_the_newest_recording_with_the_backend_is_found_and_its_tops_read(tmp_path):
    bench_records.save(_document([_record("cuda-sm90", 128, 800.0)], "2026-11-01T00:00:00Z"), tmp_path, stem="a")
    bench_records.save(_document([_record("cuda-sm90", 128, 880.0)], "2026-11-20T00:00:00Z"), tmp_path, stem="b")
    bench_records.save(_document([_record("sage", 128, 500.0)], "2026-12-01T00:00:00Z"), tmp_path, stem="c")
    document, path = kernel_records.newest_with(CALL, "cuda-sm90", directory=tmp_path)
    assert json.loads(path.read_text())["created_utc"] == "2026-11-20T00:00:00Z"
    assert kernel_records.recorded_tops(CALL, 128, directory=tmp_path) == 880.0
    assert kernel_records.recorded_tops(CALL, 64, directory=tmp_path) is None
    assert kernel_records.newest_with(CALL, "cuda-sm90-k64", directory=tmp_path) == (None, None)
