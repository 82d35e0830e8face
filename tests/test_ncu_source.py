"""Nsight Compute's source page: warp stall samples per SASS instruction, summed by reason and opcode."""

import json

import pytest

from sagelib.measure import ncu_source

# Two kernels as ncu prints them (its own messages first); the columns are a subset of the real page's.
HEADER = ('"Address","Source","Warp Stall Sampling (All Samples)","Instructions Executed",'
          '"stall_barrier","stall_wait","stall_mio","stall_wait (Not Issued)"')
SAMPLE = "\n".join([
    "==PROF== Connected to process 1",
    '"Kernel Name","void first_kernel<(int)128>(float *)",',
    HEADER,
    '"0x7f0000000100","      MUFU.EX2 R1, R2","30","2,048","0","20","10","20"',
    '"0x7f0000000110","      @!P0 BRA 0x7f0000000100","5","64","0","5","0","5"',
    '"0x7f0000000120","      WARPGROUP.DEPBAR.LE gsb0, 0x0","60","2048","60","0","0","0"',
    '"0x7f0000000130","      MUFU.EX2 R3, R4","5","2048","0","5","0","5"',
    '"Kernel Name","second_kernel",',
    HEADER,
    '"0x10","      EXIT","0","32","0","0","0","0"',
    "==PROF== Disconnected from process 1",
])


def test_each_kernel_gets_its_instructions_with_offsets_from_its_first():
    kernels = ncu_source.parse_source_csv(SAMPLE)
    assert list(kernels) == ["void first_kernel<(int)128>(float *)", "second_kernel"]
    first = kernels["void first_kernel<(int)128>(float *)"]
    assert [(line.offset, line.opcode, line.samples, line.executed) for line in first] == [
        (0x0, "MUFU", 30, 2048), (0x10, "BRA", 5, 64), (0x20, "WARPGROUP", 60, 2048), (0x30, "MUFU", 5, 2048)]
    assert first[0].stalls == {"wait": 20, "mio": 10}  # zero reasons and the not-issued split left out
    assert kernels["second_kernel"][0].offset == 0


def test_summary_sums_by_reason_and_opcode_and_ranks_the_instructions():
    kernels = ncu_source.parse_source_csv(SAMPLE)
    name = "void first_kernel<(int)128>(float *)"
    summary = ncu_source.summarize(name, kernels[name], top=2)
    assert summary.total == 100
    assert summary.by_reason == [("barrier", 60), ("wait", 30), ("mio", 10)]
    assert summary.by_opcode == [("WARPGROUP", 60), ("MUFU", 35), ("BRA", 5)]
    assert [line.offset for line in summary.top] == [0x20, 0x0]
    text = ncu_source.format_summary(summary)
    assert "barrier" in text and " 60.0%" in text and "WARPGROUP.DEPBAR.LE gsb0, 0x0" in text


@pytest.mark.parametrize("text, message", [
    ("==PROF== nothing here", "no kernel in the CSV"),
    ('"Kernel Name","k",\n"ID","Metric Name"\n"0","x"', "expected a header line starting with \"Address\""),
    ('"Kernel Name","k",\n"Address","Source"\n"0x0","EXIT"', "collect --section SourceCounters"),
])
def test_a_csv_of_another_page_is_refused_with_what_to_collect(text, message):
    with pytest.raises(ValueError, match=message):
        ncu_source.parse_source_csv(text)


def test_the_ncu_command_leaves_the_clocks_alone_and_asks_for_the_source_page():
    argv = ncu_source.source_argv("ncu", ["python3", "prog.py"], kernel_regex="attn")
    assert argv[:3] == ["ncu", "--clock-control", "none"]
    assert {"SourceCounters", "source", "sass", "regex:attn"} <= set(argv) and argv[-2:] == ["python3", "prog.py"]


def test_cli_summarises_a_csv_written_elsewhere(sagelib_cli, tmp_path):
    path = tmp_path / "source.csv"
    path.write_text(SAMPLE)
    out_json = tmp_path / "stalls.json"
    code, out, err = sagelib_cli("profile", "stalls", "--from-csv", str(path), "--top", "3", "--out", str(out_json))
    assert code == 0, err
    assert "warp samples: 100" in out and "second_kernel" in out
    saved = json.loads(out_json.read_text())
    assert [s["kernel"] for s in saved] == ["void first_kernel<(int)128>(float *)", "second_kernel"]
    assert saved[0]["by_reason"][0] == ["barrier", 60]


@pytest.mark.parametrize("argv, message", [
    (["--from-csv", "/nonexistent/source.csv"], "--from-csv: cannot read"),
    (["--from-csv", "x.csv", "--backend", "reference"], "leave out --backend"),
    ([], "--backend: give the backend to profile, or --from-csv FILE"),
    (["--from-csv", "x.csv", "--top", "-1"], "--top: expected how many instructions to list"),
])
def test_cli_argument_mistakes_exit_2_with_the_fix(sagelib_cli, argv, message):
    code, _, err = sagelib_cli("profile", "stalls", *argv)
    assert code == 2 and message in err and "Traceback" not in err


def test_cli_a_csv_of_another_page_exits_1(sagelib_cli, tmp_path):
    path = tmp_path / "raw.csv"
    path.write_text('"ID","Metric Name"\n')
    code, _, err = sagelib_cli("profile", "stalls", "--from-csv", str(path))
    assert code == 1 and "no kernel in the CSV" in err


@pytest.mark.gpu
def test_gpu_stalls_of_one_attention_kernel(sagelib_cli, tmp_path):
    from sagelib import backends
    from sagelib.measure import profiling

    if not profiling.tool_status("ncu").available:
        pytest.skip(f"ncu: {profiling.tool_status('ncu').reason}")
    backend = "cuda-sm90" if backends.get("cuda-sm90", require_available=False).unavailable_reason() is None else "cuda"
    csv_path = tmp_path / "source.csv"
    code, out, err = sagelib_cli("profile", "stalls", "--backend", backend, "--mode", "kernel_only", "--kernel", "attn",
                                 "--shape", "1:8:1024:128", "--top", "5", "--csv", str(csv_path))
    assert code == 0, err
    kernels = ncu_source.parse_source_csv(csv_path.read_text())
    assert len(kernels) == 1 and "attn" in next(iter(kernels))
    lines = next(iter(kernels.values()))
    assert sum(line.samples for line in lines) > 0 and any(line.opcode == "MUFU" for line in lines)
    assert "warp samples:" in out
