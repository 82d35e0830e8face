"""Profiling wrappers: ncu CSV parsing and digest, sanitizer summaries, absent tools reported."""

from __future__ import annotations

import pytest

from sagelib.measure import ncu, profiling, sanitizer

# ncu --csv --page raw: one wide row per kernel, units in the row under the header.
RAW_CSV = '''==PROF== Connected to process 4242 (/usr/bin/python3)
==PROF== Profiling "flash_fwd_kernel" - 0: 0%....50%....100% - 38 passes
"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","gpu__time_duration.sum","launch__registers_per_thread","sm__warps_active.avg.pct_of_peak_sustained_active","sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active","l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum","l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum","l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum","l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum","dram__throughput.avg.pct_of_peak_sustained_elapsed","dram__bytes_read.sum","dram__bytes_write.sum","smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio","smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio","smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"
"","","","","","","","","","","","us","register/thread","%","%","byte","byte","","","","%","Mbyte","Mbyte","ratio","ratio","ratio"
"0","4242","python3","host","void flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4>>(Flash_fwd_params)","1","7","(128, 1, 1)","(32, 32, 8)","0","9.0","2,345.67","255","24.51","61.2","0","0","1,024","0","65,536","12.5","805.31","268.44","0.31","1.85","0"
==PROF== Disconnected from process 4242
'''

# ncu --csv --page details: one long row per metric.
DETAILS_CSV = '''"ID","Process ID","Process Name","Host Name","Kernel Name","Context","Stream","Block Size","Grid Size","Device","CC","Section Name","Metric Name","Metric Unit","Metric Value"
"0","1","python3","h","k_a","1","7","(256, 1, 1)","(132, 1, 1)","0","9.0","Launch Statistics","launch__registers_per_thread","register/thread","168"
"0","1","python3","h","k_a","1","7","(256, 1, 1)","(132, 1, 1)","0","9.0","Occupancy","sm__warps_active.avg.pct_of_peak_sustained_active","%","11.9"
"1","1","python3","h","k_b","1","7","(64, 1, 1)","(10, 1, 1)","0","9.0","Launch Statistics","launch__registers_per_thread","register/thread","32"
'''


def test_parse_raw_page_reads_units_numbers_and_names():
    (kernel,) = ncu.parse_ncu_csv(RAW_CSV)
    assert kernel["name"].startswith("void flash_fwd_kernel<")
    assert kernel["block"] == "(128, 1, 1)" and kernel["grid"] == "(32, 32, 8)" and kernel["cc"] == "9.0"
    m = kernel["metrics"]
    assert m["gpu__time_duration.sum"] == {"value": 2345.67, "unit": "us"}
    assert m["launch__registers_per_thread"] == {"value": 255, "unit": "register/thread"}
    assert m["l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum"]["value"] == 65536


def test_summary_digests_the_deciding_figures():
    (kernel,) = ncu.parse_ncu_csv(RAW_CSV)
    s = ncu.summarize_kernel(kernel["metrics"])
    assert s["registers_per_thread"] == 255
    assert s["achieved_occupancy_pct"] == 24.51
    assert s["tensor_pipe_pct_max"] == 61.2
    assert s["local_memory_bytes"] == 0
    assert s["smem_bank_conflicts"] == 1024 and s["smem_wavefronts"] == 65536
    assert s["dram_throughput_pct"] == 12.5 and s["dram_bytes"] == pytest.approx(805.31 + 268.44)
    assert list(s["issue_stalls"]) == ["math_pipe_throttle", "long_scoreboard"]  # largest first, zeros dropped
    assert s["theoretical_occupancy_pct"] is None  # not reported: None, not a guess


def test_parse_details_page_groups_metrics_by_kernel():
    kernels = ncu.parse_ncu_csv(DETAILS_CSV)
    assert [k["name"] for k in kernels] == ["k_a", "k_b"]
    assert kernels[0]["metrics"]["sm__warps_active.avg.pct_of_peak_sustained_active"] == {"value": 11.9, "unit": "%"}
    assert kernels[1]["metrics"]["launch__registers_per_thread"]["value"] == 32


def test_parse_empty_output_is_no_kernels():
    assert ncu.parse_ncu_csv("==PROF== Disconnected\n") == []


def test_ncu_argv_never_touches_the_clocks():
    argv = ncu.ncu_argv("ncu", ["python3", "x.py"], log_file="/tmp/x.csv", sections=["Occupancy"],
                              metrics=["launch__registers_per_thread"], kernel_regex="attn", launch_count=1)
    assert argv[argv.index("--clock-control") + 1] == "none"
    assert argv[argv.index("--profile-from-start") + 1] == "off"
    assert argv[argv.index("--kernel-name") + 1] == "regex:attn"
    assert argv[-2:] == ["python3", "x.py"]


def test_launch_command_profiles_one_call_through_the_cli():
    argv = profiling.launch_command("cuda", "1:32:4096:128", causal=True, mode="kernel_only")
    assert argv[1:5] == ["-m", "sagelib", "profile", "launch"]
    assert argv[argv.index("--causal") + 1] == "yes" and argv[argv.index("--mode") + 1] == "kernel_only"


def test_absent_tools_are_reported_not_hidden(monkeypatch):
    monkeypatch.setattr(profiling.toolkit, "find", lambda name: None)
    status = profiling.tool_status("ncu")
    assert not status.available and "ncu not found" in status.reason and "Nsight Compute" in status.reason
    report = ncu.ncu_profile(["true"], log_file="/tmp/unused.csv")
    assert not report.ok and "ncu not found" in report.reason
    san = sanitizer.sanitize(["true"], "memcheck")
    assert not san.clean and "compute-sanitizer not found" in san.reason


def test_sanitize_refuses_unknown_tool():
    with pytest.raises(ValueError, match="memcheck, racecheck"):
        sanitizer.sanitize(["true"], "leakcheck")


@pytest.mark.parametrize("output, code, errors, clean", [
    ("========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n", 0, 0, True),
    ("========= Invalid __global__ write of size 4 bytes\n========= ERROR SUMMARY: 1,203 errors\n", 99, 1203, False),
    ("========= ERROR SUMMARY: 0 errors\n", 1, 0, False),  # the program itself failed
    ("Segmentation fault\n", 139, None, False),
])
def test_sanitizer_summary(output, code, errors, clean):
    report = sanitizer.parse_sanitizer_output("memcheck", ["x"], code, output)
    assert (report.errors, report.clean) == (errors, clean)
    assert (report.reason is None) == clean


def test_ptxas_table_says_why_when_the_check_is_missing(monkeypatch):
    real_import = profiling.importlib.import_module

    def no_check(name, *args):
        if name == "sagelib.cuda.check":
            raise ImportError("no module named sagelib.cuda.check")
        return real_import(name, *args)

    monkeypatch.setattr(profiling.importlib, "import_module", no_check)
    table = profiling.ptxas_table()
    assert table["rows"] == [] and "sagelib.cuda.check" in table["reason"]


@pytest.mark.parametrize("argv, message", [
    (["ncu", "--backend", "nope"], "--backend: unknown backend 'nope'"),
    (["ncu", "--backend", "reference", "--shape", "1:2"], "--shape: expected B:H:N:D"),
    (["ncu", "--backend", "reference", "--causal", "no,yes"], "--causal: one call is profiled"),
    (["sanitize", "--backend", "reference", "--tool", "leakcheck"], "--tool: expected one of memcheck"),
])
def test_profile_cli_errors_exit_2(sagelib_cli, argv, message, monkeypatch):
    monkeypatch.setattr(profiling, "tool_status",
                        lambda name: profiling.ToolStatus(name, "/bin/true", "fake"))
    code, _, err = sagelib_cli("profile", *argv)
    assert code == 2 and message in err and "Traceback" not in err


def test_profile_cli_missing_ncu_exit_3(sagelib_cli, monkeypatch):
    monkeypatch.setattr(profiling.toolkit, "find", lambda name: None)
    code, _, err = sagelib_cli("profile", "ncu", "--backend", "reference", "--shape", "1:1:64:64")
    assert code == 3 and "ncu not found on PATH" in err


def test_profile_tools_lists_each_tool(sagelib_cli):
    code, out, _ = sagelib_cli("profile", "tools")
    assert code == 0
    for name in ("ncu", "compute-sanitizer", "nvcc", "ptxas table"):
        assert name in out


@pytest.mark.gpu
def test_gpu_ncu_on_one_sdpa_launch(tmp_path):
    if not profiling.tool_status("ncu").available:
        pytest.skip("ncu is not installed on this GPU host")
    program = profiling.launch_command("sdpa-flash", "1:8:1024:128")
    report = ncu.ncu_profile(program, log_file=tmp_path / "ncu.csv", launch_count=2)
    assert report.ok, report.reason
    summary = report.kernels[0]["summary"]
    assert summary["registers_per_thread"] and summary["registers_per_thread"] > 0
    assert summary["achieved_occupancy_pct"] is not None


def test_ptxas_by_arch_pivots_kernels_against_architectures():
    rows = [
        {"kernel": "attn<128>", "arch": "sm_90", "registers": 255, "spill_stores": 64, "smem_bytes": 0},
        {"kernel": "attn<128>", "arch": "sm_89", "registers": 200, "spill_stores": 0, "smem_bytes": 0},
        {"kernel": "quant<64>", "arch": "sm_90", "registers": 64, "spill_stores": 0, "smem_bytes": 768},
        {"kernel": "x.cu (FAILED)", "arch": "sm_120a", "error": "ptxas fatal"},
    ]
    table = profiling.ptxas_by_arch(rows)
    assert table[0] == {"kernel": "attn<128>", "sm_90": "255 r, spill 64 B", "sm_89": "200 r"}
    assert table[1] == {"kernel": "quant<64>", "sm_90": "64 r, smem 768 B"}
    assert table[2]["sm_120a"] == "FAILED: ptxas fatal"


@pytest.mark.parametrize("argv, flag", [
    (["ptxas", "--out", "{file}/ptxas.json"], "--out"),
    (["ncu", "--backend", "reference", "--shape", "1:1:64:64", "--log", "{file}/ncu.csv"], "--log"),
])
def test_profile_cli_checks_its_output_files_before_the_tool_runs(sagelib_cli, tmp_path, monkeypatch, argv, flag):
    def ran(*args, **kwargs):
        raise AssertionError("the tool ran before its output path was checked")

    monkeypatch.setattr(profiling, "ptxas_table", ran)
    monkeypatch.setattr(ncu, "ncu_profile", ran)
    monkeypatch.setattr(profiling, "tool_status", lambda name: profiling.ToolStatus(name, "/bin/true", "fake"))
    (tmp_path / "file").write_text("")
    code, _, err = sagelib_cli("profile", *[a.format(file=tmp_path / "file") for a in argv])
    assert code == 2 and err.startswith(f"sagelib profile: error: {flag} ") and "is a file, not a folder" in err
