"""scripts/profile_sm90.py: the tile walk read from a trace (a synthetic one: no GPU needed)."""

import importlib.util
from pathlib import Path

import pytest
import torch

from sagelib.backends.kernels import sm90

_PATH = Path(__file__).resolve().parents[1] / "scripts" / "profile_sm90.py"
_spec = importlib.util.spec_from_file_location("profile_sm90", _PATH)
profile = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(profile)


def _walk(capsys, tiles: list[list[int]]) -> list[str]:
    """The tile lines print_tile_walk prints for consumer warpgroup 0, warp 0 walking ``tiles`` (each tile's
    trace.cuh points: wait, taken, first scores, blocks done, stored)."""
    trace = torch.zeros(sm90.TRACE_SHAPE, dtype=torch.int64)
    for i, points in enumerate(tiles):
        trace[0, sm90.TRACE_BLOCKS + i, :5] = torch.tensor(points)
    profile.print_tile_walk(trace, 1000)
    lines = capsys.readouterr().out.splitlines()
    first = lines.index("consumer warpgroup 0, warp 0:")
    return [line for line in lines[first + 1:] if line.startswith("  tile")][:len(tiles)]


def test_a_computed_tile_splits_into_take_start_blocks_and_epilogue(capsys):
    (line,) = _walk(capsys, [[1000, 1100, 1500, 9500, 10000]])
    assert "take    100" in line and "start   400" in line and "blocks    8000" in line
    assert "epilogue   500" in line and "period    9000" in line


def test_a_tile_that_computed_nothing_is_named_not_given_negative_phases(capsys):
    # the second tile is one whose rows all lie past N_q for this warpgroup: it passed its blocks and stamped
    # neither its first scores nor its blocks' end (the H200 trace of B32 N1024 D64 printed -4e10 there)
    computed, passed = _walk(capsys, [[1000, 1100, 1500, 9500, 10000], [9600, 9700, 0, 0, 12000]])
    assert "start" in computed
    assert "computed nothing" in passed and "until stored    2000" in passed and "period    2000" in passed
    assert "-" not in passed.split("at", 1)[1]


def test_a_define_no_kernel_reads_is_refused_before_any_gpu_work(capsys):
    with pytest.raises(SystemExit) as exited:
        profile.main(["--define", "SM90_TRACEE=1"])
    assert exited.value.code == 2
    assert "--define: no kernel source reads the macro of ['-DSM90_TRACEE=1']" in capsys.readouterr().err
