"""``sagelib profile sm90`` and ``sagelib profile sanitize --cases``: arguments, the no-GPU path, and the tile walk
read from a trace (a synthetic one: no GPU needed)."""

import pytest
import torch

from sagelib import cli
from sagelib.backends.kernels import sm90
from sagelib.measure import sanitize_cases, sm90_trace


def run(capsys, *argv):
    code = cli.main(["profile", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _walk(capsys, tiles: list[list[int]]) -> list[str]:
    """The tile lines tile_walk_lines gives for consumer warpgroup 0, warp 0 walking ``tiles`` (each tile's
    trace.cuh points: wait, taken, first scores, blocks done, stored)."""
    trace = torch.zeros(sm90.TRACE_SHAPE, dtype=torch.int64)
    for i, points in enumerate(tiles):
        trace[0, sm90.TRACE_BLOCKS + i, :5] = torch.tensor(points)
    lines = sm90_trace.tile_walk_lines(trace, 1000)
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


def test_the_block_phases_are_read_from_each_consumers_stamps():
    trace = torch.zeros(sm90.TRACE_SHAPE, dtype=torch.int64)
    for j in range(2, 40):  # warp 0: a block every 1000 cycles; softmax 300, turn 100, issue 10, wait 400, fold 50
        start = 1000 + 1000 * j
        trace[0, j] = torch.tensor([start, start + 300, start + 400, start + 410, start + 810, start + 860])
    text = sm90_trace.format_trace(trace)
    block2 = next(line for line in text.splitlines() if line.startswith("  block  2"))
    assert block2.split() == ["block", "2", "start", "0", "softmax", "300", "|", "turn", "100", "|", "issue", "10",
                              "|", "wait", "400", "|", "fold", "50"]
    assert "median block period, warp 0: 1000 cycles" in text
    assert text.splitlines()[-1].startswith("producer:")  # no tile stamped: the walk has headers only


@pytest.mark.parametrize("argv,message", [
    (["sm90", "--define", "SM90_TRACEE=1"], "--define: no kernel source reads the macro of ['-DSM90_TRACEE=1']"),
    (["sm90", "--shape", "2:32:8192"], "--shape: expected B:H:N:D"),
    (["sm90", "--shape", "1:2:128:256:128"], "--shape/--causal: one B:H:N:D problem"),
    (["sm90", "--causal", "no,yes"], "--shape/--causal: one B:H:N:D problem and no or yes"),
    (["sm90", "--cta-k", "32"], "--cta-k: expected 64"),
    (["sm90", "--launches", "-1"], "--launches/--seconds: expected 0 or more"),
    (["sm90", "--trace", "--seconds", "3"], "--trace records one warm launch"),
    (["sanitize"], "--backend: give the backend whose call to sanitize, or --cases"),
    (["sanitize", "--cases", "--backend", "cuda"], "--cases: runs every kernel on its own small cases"),
    (["sanitize", "--cases", "--tool", "memcheck", "--tool", "leakcheck"], "--tool: expected one of memcheck"),
])
def test_bad_arguments_exit_2_naming_the_flag(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and message in err and out == ""


def test_without_an_sm90_gpu_the_hopper_problem_exits_3(capsys):
    reason = sm90.unavailable_reason()
    if reason is None:
        pytest.skip("this machine has an sm_90 GPU")
    code, _, err = run(capsys, "sm90", "--trace")
    assert code == 3 and reason in err


def test_sanitize_cases_without_a_gpu_exits_3_before_running_anything(capsys, monkeypatch):
    if not torch.cuda.is_available():
        called = []
        monkeypatch.setattr(sanitize_cases, "sanitize_all", lambda *a, **k: called.append(1))
        code, _, err = run(capsys, "sanitize", "--cases")
        assert code == 3 and "--cases runs our CUDA kernels under compute-sanitizer" in err and not called
    else:
        pytest.skip("this machine has a CUDA GPU")


def test_sanitize_cases_run_both_tools_with_the_scripts_options(monkeypatch, tmp_path):
    """The plain run first (it builds the kernels), then each tool with API errors unreported and LINEINFO set."""
    from types import SimpleNamespace

    from sagelib.measure import sanitizer

    plain, sanitized = [], []
    monkeypatch.setattr("subprocess.run", lambda argv, **kw: plain.append((argv, kw["env"]))
                        or SimpleNamespace(returncode=0, stdout="case ok\n", stderr=""))
    monkeypatch.setattr(sanitizer, "sanitize", lambda program, tool, **kw: sanitized.append((program, tool, kw))
                        or tool)
    built, reports = sanitize_cases.sanitize_all(report=lambda line: None)
    assert built and reports == ["memcheck", "racecheck"]
    ((argv, env),) = plain
    assert argv[-2:] == ["profile", "launch-cases"] and env["SAGELIB_KERNEL_LINEINFO"] == "1"
    assert all(kw["extra_args"] == ("--report-api-errors", "no", "--target-processes", "all")
               and kw["environment"] == {"SAGELIB_KERNEL_LINEINFO": "1"} for _, _, kw in sanitized)
    monkeypatch.setattr("subprocess.run", lambda argv, **kw: SimpleNamespace(returncode=1, stdout="", stderr="boom"))
    assert sanitize_cases.sanitize_all(report=lambda line: None) == (False, [])


def test_the_sanitizer_gets_the_extra_options_before_the_program(monkeypatch):
    from types import SimpleNamespace

    from sagelib.measure import profiling, sanitizer

    seen = {}
    monkeypatch.setattr(sanitizer, "tool_status", lambda name: SimpleNamespace(available=True, path="/cs"))

    def fake(argv, **kw):
        seen.update(argv=argv, env=kw["env"])
        return SimpleNamespace(returncode=0, stdout="========= ERROR SUMMARY: 0 errors\n", stderr="")

    monkeypatch.setattr(profiling.subprocess, "run", fake)
    report = sanitizer.sanitize(["prog"], "racecheck", extra_args=("--x", "y"), environment={"V": "1"})
    assert report.clean and seen["argv"] == ["/cs", "--tool", "racecheck", "--error-exitcode", "99", "--x", "y", "prog"]
    assert seen["env"]["V"] == "1"
