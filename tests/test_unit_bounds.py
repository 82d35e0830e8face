"""Phase 1 bounds: unit times and projected TOPS of a structure, checked by hand."""

import pytest

from sagelib.measure import microbench
from sagelib.measure.hardware import H200
from sagelib.studies import ownership, unit_bounds


def test_bounds_by_hand():
    hw = H200
    b = unit_bounds.bounds(ownership.candidate("fa3_pingpong"), 128, 2, 32, 16384, 16384)
    scores = 2 * 32 * 16384 * 16384
    assert b.ops == 4 * scores * 128
    per_s = 16 * hw.sms * hw.clock_ghz * 1e9
    assert b.exp2_s == pytest.approx(scores / per_s) and b.convert_s == pytest.approx(scores / per_s)
    assert b.tensor_s == pytest.approx(b.ops / (8192 * hw.sms * hw.clock_ghz * 1e9))
    assert b.floor_s == pytest.approx(max(b.tensor_s, 2 * b.exp2_s))
    magic = unit_bounds.bounds(ownership.candidate("fa3_pingpong"), 128, 2, 32, 16384, 16384, magic_convert=True)
    assert magic.convert_s == 0 and magic.floor_tops > b.floor_tops
    causal = unit_bounds.bounds(ownership.candidate("fa3_pingpong"), 128, 2, 32, 16384, 16384, causal=True)
    assert causal.ops == b.ops / 2


def test_mma_sync_bound_times_q_k_and_p_v_at_their_own_rates():
    # H200 measured: int8 mma.sync 5377 ops/clk/SM; P.V runs as f16 m16n8k16 (no e4m3 mma.sync on sm_90) at 2683
    hw = H200.with_measured(mma_sync_8bit_ops_per_clk=5377.0, mma_sync_pv_ops_per_clk=2683.0)
    b = unit_bounds.bounds(ownership.candidate("mma_sync_4warp"), 128, 2, 32, 16384, 16384, hw=hw)
    per_clk_s = hw.sms * hw.clock_ghz * 1e9
    assert b.tensor_s == pytest.approx(b.ops / 2 / (5377 * per_clk_s) + b.ops / 2 / (2683 * per_clk_s))
    assert microbench.pv_microbench((9, 0)) == "mma_sync_f16"
    assert microbench.pv_microbench((8, 9)) == microbench.pv_microbench((12, 0)) == "mma_sync_e4m3"


def _rate(key, value):
    micro = next(m for m in microbench.MICROBENCHES if m.key == key)
    return microbench.Rate(key, micro.what, micro.unit, value, micro.hardware_field)


def test_interleaved_pair_rate_decides_whether_conversion_shares_the_exp2_unit():
    shared = microbench.measured_hardware([_rate("ex2", 16.0), _rate("ex2_and_cvt", 8.1)])
    separate = microbench.measured_hardware([_rate("ex2", 16.0), _rate("ex2_and_cvt", 15.6),
                                             _rate("cvt_s32_f32", 39.0)])
    assert shared.convert_shares_exp2_unit and not separate.convert_shares_exp2_unit
    arch = ownership.candidate("fa3_pingpong")
    b_shared = unit_bounds.bounds(arch, 128, 2, 32, 16384, 16384, hw=shared)
    b_sep = unit_bounds.bounds(arch, 128, 2, 32, 16384, 16384, hw=separate)
    assert b_shared.special_function_s == pytest.approx(b_shared.exp2_s + b_shared.convert_s)
    assert b_sep.special_function_s == pytest.approx(max(b_sep.exp2_s, b_sep.convert_s)) == pytest.approx(b_sep.exp2_s)


def test_projected_bounds_key_one_structures_rows_by_head_dim_and_conversion():
    rows = unit_bounds.bound_table(H200, "stated", [64, 128], 2, 32, 16384)
    found = unit_bounds.projected_bounds(rows, "fa3_pingpong")
    assert set(found) == {(64, "cvt"), (64, "float-bias"), (128, "cvt"), (128, "float-bias")}
    assert all(row["structure"] == "fa3_pingpong" for row in found.values())
    assert found[(128, "float-bias")][unit_bounds.FLOOR] > found[(128, "cvt")][unit_bounds.FLOOR]


def test_unit_rates_without_a_gpu_fall_back_to_the_recording_and_say_why(monkeypatch):
    monkeypatch.setattr(microbench.torch.cuda, "is_available", lambda: False)
    units = unit_bounds.unit_rates(measure=True)
    assert "no CUDA GPU" in units.reason and units.recording_path is not None
    assert units.note.startswith("recorded ") and units.measured
    assert units.hardware.source["mufu_per_clk"].startswith("measured")
    assert unit_bounds.unit_rates(measure=False).reason == "measure=False"


def test_unit_rates_with_nothing_measured_or_recorded_keep_the_stated_card(monkeypatch):
    monkeypatch.setattr(microbench, "latest_recording", lambda: (None, None, None))
    units = unit_bounds.unit_rates(measure=False)
    assert units.hardware is H200 and not units.measured and units.rates == []
