"""sagelib.studies.softmax_beside (`sagelib study softmax --beside`): the softmax step beside another
warpgroup's work on sm_90, and its recordings."""

import json

import pytest

from sagelib.backends.kernels import sm90
from sagelib.measure.hardware import H200
from sagelib.studies import softmax_beside


def test_the_recording_has_a_row_per_kind_in_order():
    runs, document, path = softmax_beside.latest_recording()
    assert path is not None and document["schema"] in softmax_beside.READS
    for rows in runs:
        assert [r["kind"] for r in rows] == list(softmax_beside.KINDS)[:len(rows)]
        assert rows[0]["over_alone"] == 1.0 and rows[0]["batches_per_kcycle"] == 0


def test_a_file_of_another_schema_is_refused(tmp_path):
    (tmp_path / "2026-01-01-x-softmax-beside.json").write_text(json.dumps({"schema": "other/1", "runs": []}))
    with pytest.raises(ValueError, match="expected schema 'sagelib.softmax-beside/1' or .*, got 'other/1'"):
        softmax_beside.latest_recording(tmp_path)
    assert softmax_beside.latest_recording(tmp_path / "empty") == (None, None, None)


@pytest.mark.parametrize("iters", [0, -3, 2.5])
def test_measure_refuses_a_step_count_below_one(iters):
    with pytest.raises(ValueError, match="iters: expected an int of at least 1"):
        softmax_beside.measure(iters)


@pytest.mark.gpu
def test_beside_rows_count_the_other_warpgroups_batches():
    reason = sm90.unavailable_reason()
    if reason:
        pytest.skip(reason)
    rows = softmax_beside.measure(iters=50)
    assert [r["kind"] for r in rows] == list(softmax_beside.KINDS)
    assert rows[0]["batches_per_kcycle"] == 0  # nothing beside: no batch is counted
    assert all(r["batches_per_kcycle"] > 0 for r in rows[1:])  # every other kind ran beside the softmax
    assert all(r["batches_per_kcycle_alone"] > 0 for r in rows[1:])  # ... and with it asleep
    assert all(r["cycles_per_step"] > 0 for r in rows) and rows[0]["over_alone"] == 1.0


def test_pingpong_projection_is_two_steps_beside_batch_and_fold():
    import dataclasses

    hw = dataclasses.replace(H200, sms=100, clock_ghz=1.0)  # 1e11 SM clocks per second
    rows = [{"kind": "nothing", "cycles_per_step": 800.0},
            {"kind": softmax_beside.PINGPONG_KIND, "cycles_per_step": 1000.0}]
    p = softmax_beside.pingpong_projection(rows, hw, target_tops=1000.0)
    ops = 2 * 64 * 128 * 128 * 4  # two 64 x 128 blocks at head_dim 128, Q.K^T and P.V
    assert p["period (2 steps)"] == 2000.0
    assert p["projected kernel-only TOPS"] == pytest.approx(ops / 2000 * 1e11 / 1e12)  # 419.4
    assert p["step for 1000 TOPS"] == pytest.approx(ops * 1e11 / 1e15 / 2)  # the step that halves the period's cost
    assert p["step for 1000 TOPS / alone"] == pytest.approx(p["step for 1000 TOPS"] / 800.0)


def test_pingpong_projection_names_the_kinds_it_needs():
    with pytest.raises(ValueError, match="expected the kinds 'nothing' and 'P.V \\+ Q.K\\^T batches, then the fold'"):
        softmax_beside.pingpong_projection([{"kind": "nothing", "cycles_per_step": 800.0}], H200)


@pytest.mark.parametrize("warpgroups", [0, 3, "2"])
def test_measure_refuses_other_softmax_warpgroup_counts(warpgroups):
    with pytest.raises(ValueError, match="softmax_warpgroups: expected 1 or 2"):
        softmax_beside.measure(10, warpgroups)


@pytest.mark.gpu
def test_two_softmax_warpgroups_beside_the_batches():
    reason = sm90.unavailable_reason()
    if reason:
        pytest.skip(reason)
    rows = softmax_beside.measure(iters=50, softmax_warpgroups=2)
    assert [r["kind"] for r in rows] == list(softmax_beside.TWO_SOFTMAX_KINDS)
    assert rows[0]["batches_per_kcycle"] == 0 and all(r["batches_per_kcycle"] > 0 for r in rows[1:])


def test_side_by_side_projection_takes_the_two_softmax_step_as_the_period():
    import dataclasses

    hw = dataclasses.replace(H200, sms=100, clock_ghz=1.0)
    rows = [{"kind": "nothing", "cycles_per_step": 1200.0}, {"kind": "P.V + Q.K^T batches", "cycles_per_step": 1600.0}]
    p = softmax_beside.side_by_side_projection(rows, hw)
    assert p["period (upper-bound structure)"] == 1600.0
    assert p["projected kernel-only TOPS (upper bound)"] == pytest.approx(2 * 64 * 128 * 128 * 4 / 1600 * 1e11 / 1e12)
    with pytest.raises(ValueError, match="expected the two-softmax kinds 'nothing' and 'D64 P.V"):
        softmax_beside.side_by_side_projection(rows, hw, head_dim=64)


def test_the_two_softmax_recording_reads_back():
    runs, document, path = softmax_beside.latest_recording(stem=softmax_beside.TWO_SOFTMAX_STEM)
    assert path is not None and document["softmax_warpgroups"] == 2
    assert all([r["kind"] for r in rows] == list(softmax_beside.TWO_SOFTMAX_KINDS) for rows in runs)
