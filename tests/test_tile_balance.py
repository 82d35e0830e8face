"""sagelib.studies.tile_balance: the model of the Hopper kernel's tile scheduler."""

import re
from pathlib import Path

import pytest

from sagelib.studies import tile_balance as tb

SCHEDULER = Path(__file__).resolve().parents[1] / "kernels" / "include" / "attn_sm90" / "scheduler.cuh"

SHAPES = [tb.Problem(2, 32, 16384, 128, True), tb.Problem(32, 32, 1024, 128, True), tb.Problem(3, 5, 777, 64, True),
          tb.Problem(1, 3, 1000, 128, False)]


@pytest.mark.parametrize("p", SHAPES)
@pytest.mark.parametrize("windowed", [True, False])
def test_every_tile_is_numbered_exactly_once(p, windowed):
    order = tb.tile_order(p, windowed)
    assert sorted(order) == [(pair, q) for pair in range(p.pairs) for q in range(p.q_blocks)]


def test_causal_windows_hand_out_the_heaviest_tiles_first():
    p = tb.Problem(3, 5, 777, 64, True)  # 15 pairs, windows of p.window() pairs, the last one short
    order = tb.tile_order(p)
    span = p.window() * p.q_blocks
    for start in range(0, len(order), span):
        q_blocks = [q for _, q in order[start:start + span]]
        assert q_blocks == sorted(q_blocks, reverse=True)


def test_equal_tiles_balance_is_the_tail_wave():
    p = tb.Problem(2, 32, 16384, 128, False)  # 8192 tiles of 128 blocks over 132 CTAs: 62 or 63 each
    tiles = p.q_blocks * p.pairs
    expected = tiles / 132 / -(-tiles // 132)
    assert tb.balance(p, 132, "static", overhead=0) == pytest.approx(expected)
    assert tb.balance(p, 132, "greedy", overhead=0) == pytest.approx(expected)


def test_the_counter_evens_out_causal_work_that_the_static_stride_does_not():
    for p in SHAPES[:2]:
        static = tb.balance(p, 132, "static", windowed=False)
        assert tb.balance(p, 132, "greedy") > static + 0.04


def test_the_model_uses_the_kernels_window_size():
    text = SCHEDULER.read_text()
    shift = re.search(r"#define SM90_L2_WINDOW_BYTES \((\d+) << (\d+)\)", text)
    assert shift and int(shift[1]) << int(shift[2]) == tb.L2_WINDOW_BYTES


def test_unknown_schedule_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="schedule: expected 'static' or 'greedy', got 'lpt'"):
        tb.balance(SHAPES[0], 132, "lpt")


def test_the_three_consumer_geometry_counts_its_own_rows_and_keys():
    from sagelib.backends.kernels import sm90

    g = sm90.ROTATION_GEOMETRY
    p = tb.Problem(1, 1, 1000, 64, True, cta_q=g.cta_q, block_keys=g.block_keys)  # 192 rows, 64 keys
    assert p.q_blocks == 6 and p.key_blocks == 16
    # causal: tile q sees keys up to row 192 (q + 1) - 1, i.e. 3 (q + 1) blocks of 64, at most 16
    assert [tb.tile_cost(p, q, overhead=0) for q in range(p.q_blocks)] == [3, 6, 9, 12, 15, 16]
    preset = tb.Problem(1, 1, 1000, 64, True)
    assert preset.cta_q == sm90.PRESET_GEOMETRY.cta_q and preset.block_keys == sm90.PRESET_GEOMETRY.block_keys
    assert [tb.tile_cost(preset, q, overhead=0) for q in range(preset.q_blocks)] == [1, 2, 3, 4, 5, 6, 7, 8]


def test_a_causal_problem_takes_its_tiles_from_the_geometry():
    from sagelib.backends.kernels import sm90

    geometry = sm90.ROTATION_GEOMETRY
    p = tb.causal_problem(2, 32, 16384, 128, geometry)
    assert p.causal and (p.cta_q, p.block_keys) == (geometry.cta_q, geometry.block_keys)
    assert p.q_blocks == -(-16384 // geometry.cta_q)
