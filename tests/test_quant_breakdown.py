"""sagelib.studies.quant_breakdown: the call pass by pass, and each fusion's ceiling (`sagelib study quant-breakdown`,
tested in test_commands_study.py)."""

import json

import pytest

from sagelib import backends
from sagelib.backends.kernels import sm90
from sagelib.studies import quant_breakdown


def test_each_ceiling_takes_away_its_own_pass():
    # call 1.0 = Q 0.10 + K/V 0.25 + kernel 0.60 + host 0.05; K alone 0.15, V alone 0.14 (the joint launch saves 0.04)
    t = quant_breakdown.PassTimes(cudnn=0.8, call=1.0, kernel=0.6, q=0.1, k=0.15, v=0.14, kv=0.25)
    got = {c.what: c.ms for c in quant_breakdown.ceilings(t)}
    assert got["the call as it is"] == 1.0
    assert got["Q fused into the kernel, free (entry fusion of Q)"] == pytest.approx(0.9)
    assert got["K prepared in the pipeline, free (entry fusion of K)"] == pytest.approx(1.0 - 0.11)
    assert got["V prepared in the pipeline, free (direct V preparation)"] == pytest.approx(1.0 - 0.10)
    assert got["K and V both free"] == pytest.approx(0.75)
    assert got["all three free: the kernel plus host costs"] == pytest.approx(0.65)
    assert got["the kernel alone"] == 0.6 and len(got) == 7
    assert quant_breakdown.rest_ms(t) == pytest.approx(0.05)
    ratio = {c.what: c.vs_cudnn for c in quant_breakdown.ceilings(t)}
    assert ratio["the call as it is"] == pytest.approx(0.8) and ratio["the kernel alone"] == pytest.approx(0.8 / 0.6)


def test_the_table_names_every_pass_and_ceiling():
    t = quant_breakdown.PassTimes(cudnn=0.8, call=1.0, kernel=0.6, q=0.1, k=0.15, v=0.14, kv=0.25)
    text = quant_breakdown.format_table("B1 H1 N8 D64", t)
    assert text.startswith("B1 H1 N8 D64: cuDNN 0.800 ms; call 1.000 = Q 0.100 + K/V 0.250 (K alone 0.150, "
                           "V alone 0.140) + kernel 0.600 + rest +0.050")
    assert "direct V preparation" in text and "1.333x cuDNN" in text  # the kernel alone: 0.8 / 0.6
    assert len(text.splitlines()) == 1 + len(quant_breakdown.ceilings(t))


@pytest.mark.parametrize("field,value", [("q", 0.0), ("kernel", -1.0), ("cudnn", float("nan"))])
def test_a_time_that_is_not_positive_is_refused(field, value):
    times = dict(cudnn=0.8, call=1.0, kernel=0.6, q=0.1, k=0.15, v=0.14, kv=0.25)
    times[field] = value
    with pytest.raises(ValueError, match=f"PassTimes: {field} must be a positive time in ms"):
        quant_breakdown.PassTimes(**times)


def test_the_issue_targets_as_times():
    assert quant_breakdown.target_ms("B32 H32 N1024 D128", 0.893) == 0.893  # at N=1024: cuDNN's own time
    assert quant_breakdown.target_ms("B2 H32 N16384 D128", 15.0) == pytest.approx(4 * 2 * 32 * 16384**2 * 128 / 1e12)
    assert quant_breakdown.target_ms("B2 H32 N16384 D64", 9.9) == pytest.approx(4 * 2 * 32 * 16384**2 * 64 / 650e9)


def test_the_newest_recording_is_read_and_another_schema_refused(tmp_path):
    rows, path = quant_breakdown.latest_recording()
    assert path is not None and [r["shape"] for r in rows][0] == "B32 H32 N1024 D128"
    for row in rows:  # every recorded row still gives the ceilings the code computes now
        assert quant_breakdown.ceilings(quant_breakdown.PassTimes(**row["times_ms"]))
    (tmp_path / "2026-01-01-x-quant-breakdown.json").write_text(json.dumps({"schema": "other/1", "rows": []}))
    with pytest.raises(ValueError, match="expected schema 'sagelib.quant_breakdown/1', got 'other/1'"):
        quant_breakdown.latest_recording(tmp_path)
    assert quant_breakdown.latest_recording(tmp_path / "empty") == ([], None)


def test_without_an_sm90_gpu_the_reason_is_given():
    if sm90.unavailable_reason() is None:
        pytest.skip("this machine has an sm_90 GPU")
    backend = backends.get("cuda-sm90", require_available=False)
    assert quant_breakdown.unavailable_reason() == backend.unavailable_reason()


def test_the_reason_is_the_backends_own(monkeypatch):
    # measure() runs the cuda-sm90 backend, which needs more than an sm_90 GPU (CuPy, NVRTC):
    # the reason must be that backend's, not the kernel module's GPU check alone.
    class Missing:
        def __init__(self, name):
            self.name = name

        def unavailable_reason(self):
            return f"{self.name}: needs CuPy" if self.name == "cuda-sm90" else None

    monkeypatch.setattr(backends, "get", lambda name, require_available=True: Missing(name))
    assert quant_breakdown.unavailable_reason() == "cuda-sm90: needs CuPy"


def test_measure_refuses_fewer_than_one_round():
    with pytest.raises(ValueError, match="rounds: expected a whole number of 1 or more, got 0"):
        quant_breakdown.measure(None, rounds=0)
