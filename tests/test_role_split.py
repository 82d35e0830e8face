"""sagelib.studies.role_split: the register fit and the period projection of softmax and P.V in separate warpgroups."""

import pytest

from sagelib.studies import role_split


def test_registers_fit_with_p_v_in_64_channel_passes_only():
    split = role_split.RoleSplit()
    # softmax: S 64 + row state 8 + overhead 24 = 96; P.V: O 64 + inner 32 + 6 + overhead 24 = 126 -> 128
    assert (split.softmax_cap, split.pv_cap) == (96, 128)
    assert split.cta_registers == 128 * (24 + 2 * (96 + 128)) == 60416
    assert split.launch_pool == 640 * 96 == 61440 and split.fits  # 65536 / 640 threads -> 96 each
    whole = role_split.RoleSplit(pv_channels=128)  # one P.V pass: inner 64 -> 158 -> 160
    assert whole.pv_cap == 160 and whole.cta_registers == 128 * (24 + 2 * (96 + 160)) and not whole.fits
    assert split.p_smem_bytes == 2 * 2 * 64 * (128 + 4)
    assert [r["setmaxnreg"] for r in split.table()] == [24, 96, 128]


def test_projection_by_hand():
    costs = role_split.PhaseCosts(softmax=1090, turn=100, issue=330, wait=350, fold=250, tensor_per_gemm=256)
    assert costs.period == 2120
    p = role_split.projected_period(costs, p_store=60)
    # Q.K^T latency beyond its product: 330 + 350 - 2 * 256 = 168; chain 1090 + 60 + 256 + 168 = 1574
    assert p["Q.K^T latency beyond its product"] == 168
    assert p["softmax warpgroup chain (projection)"] == 1574
    assert p["speedup (projection)"] == pytest.approx(2120 / 1574)
    slow = role_split.projected_period(costs, p_store=60, softmax_slowdown=1.2)
    assert slow["softmax warpgroup chain (projection)"] == pytest.approx(1090 * 1.2 + 60 + 256 + 168)
    # when the softmax is short the tensor cores bound it: 4 products per two blocks
    fast = role_split.projected_period(role_split.PhaseCosts(100, 0, 300, 300, 0, 256))
    assert fast["speedup (projection)"] == pytest.approx(700 / 1024)


TRACE = """== trace 2:32:8192:128
  block  5 start    12190  softmax  1108 | turn   103 | issue  352 | wait   375 | fold  252
  block  6 start    14504  softmax  1095 | turn    97 | issue  307 | wait   382 | fold  252
  block  7 start    16737  softmax  1091 | turn   104 | issue  327 | wait   373 | fold  250
median block period, warp 0: 2248 cycles
== trace 2:32:8192:64
  block  5 start    14952  softmax  1921 | turn   132 | issue  431 | wait   169 | fold  125
"""


def test_traced_costs_take_the_medians_of_one_section():
    costs = role_split.traced_costs(TRACE, "trace 2:32:8192:128", tensor_per_gemm=256)
    assert (costs.softmax, costs.turn, costs.issue, costs.wait, costs.fold) == (1095, 103, 327, 375, 252)
    assert role_split.traced_costs(TRACE, "trace 2:32:8192:64", 128).softmax == 1921
    with pytest.raises(ValueError, match="section: expected one of"):
        role_split.traced_costs(TRACE, "trace 1:1:1:1", 256)
