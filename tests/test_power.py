"""sagelib.measure.power: nvidia-smi lines parsed, and a sustained load summarised after its ramp (CPU only)."""

import pytest

from sagelib.measure import power


def test_parse_sample_reads_the_query_fields():
    s = power.parse_sample("2026/11/30 07:56:23.777, 1875, 693.36, 0x0000000000000004")
    assert s == power.Sample(7 * 3600 + 56 * 60 + 23.777, 1875.0, 693.36, 4)
    assert s.capped
    assert not power.parse_sample("2026/11/30 07:56:22.570, 1980, 129.32, 0x0000000000000000").capped


@pytest.mark.parametrize("line", ["", "timestamp, clocks.sm [MHz], power.draw.instant [W], reasons",
                                  "2026/11/30 07:56:23.777, 1875, [N/A], 0x4", "2026/11/30 07:56:23.777, 1875, 693.36"])
def test_parse_sample_skips_what_is_not_a_sample(line):
    assert power.parse_sample(line) is None


def _load(n_samples=20, calls_per_mark=5, ms_per_call=10.0, ramp_mhz=1980.0, steady_mhz=1875.0):
    """A synthetic 2 s load: samples every 100 ms (the first second at the idle clock, uncapped),
    a host mark every ``calls_per_mark`` calls."""
    start = 1000.0
    samples = [power.Sample(start + 0.1 * i, ramp_mhz if i < 10 else steady_mhz, 300.0 if i < 10 else 690.0,
                            0 if i < 10 else 4) for i in range(n_samples)]
    step = calls_per_mark * ms_per_call / 1e3
    marks = [(start + step * j, calls_per_mark * j) for j in range(int(2.0 / step) + 1)]
    return samples, marks


def test_summarize_keeps_only_the_steady_window():
    samples, marks = _load()
    summary = power.summarize(samples, marks, settle_s=1.0)
    assert summary.sm_mhz == 1875.0 and summary.sm_mhz_low == summary.sm_mhz_high == 1875.0
    assert summary.power_w == 690.0
    assert summary.capped_share == 1.0
    assert summary.samples == 10
    assert summary.ms_per_call == pytest.approx(10.0)
    assert summary.calls == 100
    # without the settle the idle-clock ramp counts, and the summary says so
    whole = power.summarize(samples, marks, settle_s=0.0)
    assert whole.capped_share == pytest.approx(0.5) and whole.sm_mhz_high == 1980.0


def test_summarize_refuses_a_window_with_nothing_in_it():
    samples, marks = _load()
    with pytest.raises(ValueError, match="settle_s=5"):
        power.summarize(samples, marks, settle_s=5.0)
    with pytest.raises(ValueError, match="two"):
        power.summarize(samples, marks[:1], settle_s=0.0)
    with pytest.raises(ValueError, match="no call completed"):
        power.summarize(samples, [(1000.0, 0), (1001.5, 3), (1002.0, 3)], settle_s=1.0)


def test_row_prints_tops_only_when_the_work_is_known():
    summary = power.summarize(*_load(), settle_s=1.0)
    with_ops = summary.row(ops=8.796e12)
    assert "879.6" in with_ops and "1875 (1875-1875)" in with_ops and "690.0" in with_ops and "100%" in with_ops
    assert len(summary.row()) == len(with_ops)
    assert len(power.HEADER) == len(with_ops)


def test_sustained_rows_read_a_recorded_sweep_against_its_default():
    def row(variant, tops, mhz, capped):
        summary = {"calls": 100, "ms_per_call": 8796.0 / tops, "sm_mhz": mhz, "sm_mhz_low": mhz, "sm_mhz_high": mhz,
                   "power_w": 690.0, "capped_share": capped, "samples": 30}
        return {"shape": "B2 H32 N16384 D128", "variant": variant, "stages": 4, "ms": 8796.0 / tops, "tops": tops,
                "sustained": [summary]}

    document = {"rows": [row("default", 850.0, 1890.0, 1.0), row("ablate: no K/V loads", 900.0, 1980.0, 0.0),
                         {"shape": "B2 H32 N16384 D64", "variant": "default", "stages": 6, "ms": 7.0, "tops": 620.0}]}
    rows = power.sustained_rows(document)
    assert [r["variant"] for r in rows] == ["default", "ablate: no K/V loads"]  # rows without samples left out
    assert rows[0]["x default"] == 1.0 and rows[1]["x default"] == pytest.approx(900 / 850)
    assert rows[1]["SM MHz (median)"] == 1980.0 and rows[1]["samples at the power cap"] == 0.0


def test_median_run_picks_the_middle_time_and_refuses_none():
    summary = power.summarize(*_load(), settle_s=1.0)
    runs = [power.LoadSummary(**{**summary.__dict__, "ms_per_call": ms}) for ms in (12.0, 10.0, 11.0)]
    assert power.median_run(runs).ms_per_call == 11.0
    with pytest.raises(ValueError, match="at least one"):
        power.median_run([])


def test_a_load_past_midnight_stays_on_one_clock():
    marks = [(86399.5, 0), (0.2, 5), (0.7, 10)]
    samples = [power.Sample(86399.9, 1980.0, 600.0, 0), power.Sample(0.5, 1900.0, 690.0, 4)]
    marks, samples = power.past_midnight(marks, samples)
    assert [t for t, _ in marks] == [86399.5, 86400.2, 86400.7]
    assert [s.t_s for s in samples] == [86399.9, 86400.5]
    assert power.summarize(samples, marks, settle_s=0.5).sm_mhz == 1900.0
