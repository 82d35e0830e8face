"""Recorded phase traces of the Hopper kernel: block lines under headings and warpgroups, and a block's period
split into its phases."""

import pytest

from sagelib.studies import block_phases

SAMPLE = """# a comment line
## first build
cycles from the first stamp; per block: softmax | wait turn | issue | wgmma wait | fold
consumer warpgroup 0, warp 0:
  block  2 start     1000  softmax   100 | turn    10 | issue   20 | wait    30 | fold    40
  block  3 start     1300  softmax   120 | turn    10 | issue   20 | wait    30 | fold    40
  block  4 start     1500  softmax   100 | turn    10 | issue   20 | wait    30 | fold    40
consumer warpgroup 1, warp 0:
  block  2 start     1100  softmax    90 | turn     5 | issue   20 | wait    30 | fold    50
median block period, warp 0: 250 cycles
tile walk, cycles; consumer: take | start to first scores | blocks | epilogue | tile end to tile end
consumer warpgroup 0, warp 0:
  tile  0 at        88  take   4232 | start  1246 | blocks  149200 | epilogue  2737 | period  157415

== trace 2:32:8192:128
consumer warpgroup 0, warp 0:
  block  7 start        0  softmax     1 | turn     2 | issue     3 | wait     4 | fold     5
  block  8 start       20  softmax     1 | turn     2 | issue     3 | wait     4 | fold     5
"""


def test_block_lines_are_read_under_their_heading_and_warpgroup():
    rows = block_phases.parse(SAMPLE)
    assert block_phases.sections(rows) == ["first build", "2:32:8192:128"]
    assert [(r.section, r.warpgroup, r.block, r.start) for r in rows] == [
        ("first build", 0, 2, 1000), ("first build", 0, 3, 1300), ("first build", 0, 4, 1500),
        ("first build", 1, 2, 1100), ("2:32:8192:128", 0, 7, 0), ("2:32:8192:128", 0, 8, 20)]
    assert (rows[1].softmax, rows[1].turn, rows[1].issue, rows[1].wait, rows[1].fold) == (120, 10, 20, 30, 40)


def test_period_parts_are_medians_and_the_rest_closes_the_period():
    rows = block_phases.parse(SAMPLE)
    # blocks 2 -> 3 (300 cycles) and 3 -> 4 (200): median period 250, softmax median of 100 and 120 = 110
    parts = block_phases.period_parts(rows, "first build", 0)
    assert parts == {"softmax": 110, "turn": 10, "issue": 20, "wait": 30, "fold": 40, "rest": 40, "period": 250}
    even = block_phases.period_parts(rows, "first build", 0, parity=0)  # block 2 only
    assert (even["softmax"], even["period"], even["rest"]) == (100, 300, 100)
    odd = block_phases.period_parts(rows, "first build", 0, parity=1)  # block 3 only
    assert (odd["softmax"], odd["period"], odd["rest"]) == (120, 200, -20)


def test_a_warpgroup_without_consecutive_blocks_is_refused_with_what_exists():
    rows = block_phases.parse(SAMPLE)
    with pytest.raises(ValueError, match=r"no consecutive blocks of warpgroup 1 under 'first build'.*'2:32:8192:128'"):
        block_phases.period_parts(rows, "first build", 1)


def test_a_block_line_in_another_format_is_refused_with_its_number():
    with pytest.raises(ValueError, match=r"line 2: expected '  block J start T"):
        block_phases.parse("consumer warpgroup 0, warp 0:\n  block 2 start 10 softmax 5\n")
    with pytest.raises(ValueError, match=r"line 1: .* after a 'consumer warpgroup N, warp 0:' line"):
        block_phases.parse(SAMPLE.splitlines()[4] + "\n")  # a good block line, but no warpgroup line before it


def test_the_recorded_aliased_build_shows_its_softmax_longer_than_the_default():
    rows, path = block_phases.load("sm90-alias-inner-traces")
    if path is None:
        pytest.skip("no recorded data/results/*-sm90-alias-inner-traces.txt")
    default = block_phases.period_parts(rows, "default build", 0)
    aliased = block_phases.period_parts(rows, "-DSM90_ALIAS_INNER=1", 0, parity=0)
    assert aliased["softmax"] > default["softmax"]
    assert aliased["turn"] + aliased["issue"] + aliased["wait"] < default["turn"] + default["issue"] + default["wait"]
