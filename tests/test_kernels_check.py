"""`sagelib kernels check`: nvcc compiles every kernel for every target; ptxas' report is parsed.

Needs nvcc (CI has it), no GPU. The full check is the CI gate: a failed target
or a spill above kernels/check_baseline.json fails it.
"""

import json
import subprocess
from pathlib import Path

import pytest

from sagelib.cli import main
from sagelib.cuda import check
from sagelib.cuda.build import ARCH_PRESETS
from sagelib.cuda.instances import INSTANCES, ONLY_ARCHS

needs_nvcc = pytest.mark.skipif(check.nvcc_path() is None, reason="needs nvcc (the CUDA toolkit)")

PTXAS_LOG = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z15attn_mma_kernelILi64ELb1EEvPKaxxxS1_xxxPKhPKfS5_S5_PtxxxPfiiiiiiiiif' for 'sm_90'
ptxas info    : Function properties for _Z15attn_mma_kernelILi64ELb1EEvPKaxxxS1_xxxPKhPKfS5_S5_PtxxxPfiiiiiiiiif
    24 bytes stack frame, 20 bytes spill stores, 16 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 24 bytes cumulative stack size
ptxas info    : Compiling entry function '_Z17quant_int8_kernelILi128ELb0ELb0EEvPKtxxxPaxxxPfiiiiii' for 'sm_90'
ptxas info    : Function properties for _Z17quant_int8_kernelILi128ELb0ELb0EEvPKtxxxPaxxxPfiiiiii
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 96 registers, used 1 barriers, 768 bytes smem
"""


def test_ptxas_report_is_parsed():
    reports = check.parse_ptxas(PTXAS_LOG, "x.cu", "sm_90")
    assert [r.registers for r in reports] == [255, 96]
    assert (reports[0].spill_stores, reports[0].spill_loads, reports[0].stack_bytes) == (20, 16, 24)
    assert reports[1].smem_bytes == 768 and reports[1].spill_stores == 0
    if check.shutil.which("c++filt"):
        assert reports[0].kernel == "attn_mma_kernel<64, true>"


def test_spills_above_the_baseline_fail(monkeypatch):
    report = check.KernelReport("k<1>", "k.cu", "sm_90", registers=255, spill_stores=8)
    target = check.TargetResult("k.cu", "sm_90", True, [report])
    monkeypatch.setattr(check, "compile_target", lambda f, a, nvcc, wd, options=(): target)
    monkeypatch.setattr(check, "nvcc_path", lambda: "nvcc")
    monkeypatch.setitem(check.INSTANCES, "k.cu", ("k<1>",))
    assert not check.run_check(["k.cu"], ["sm_90"], baseline={}).ok
    assert check.run_check(["k.cu"], ["sm_90"], baseline={"k<1>@sm_90": 8}).ok
    assert "k<1>@sm_90: 8 bytes" in check.run_check(["k.cu"], ["sm_90"], baseline={"k<1>@sm_90": 4}).failures[0]


def test_each_build_of_a_file_is_compiled_and_named_apart(monkeypatch, tmp_path):
    """quant_qk.cu is built twice (its 64-token default and 128-token blocks); each is checked, and a variant's
    kernels and failures carry its options, so the baseline and the table tell the builds apart."""
    calls = []

    def compile_target(file, arch, nvcc, workdir, options=()):
        calls.append(options)
        reports = [check.KernelReport(name + check.variant_suffix(options), file, arch, spill_stores=8 if options
                                      else 0) for name in INSTANCES[file]]
        return check.TargetResult(file, arch, True, reports, options=options)

    monkeypatch.setattr(check, "compile_target", compile_target)
    monkeypatch.setattr(check, "nvcc_path", lambda: "nvcc")
    result = check.run_check(["quant_qk.cu"], ["sm_90"], baseline={})
    assert calls == [(), ("-DQUANT_QK_ROWS=128",)]
    first = INSTANCES["quant_qk.cu"][0]
    assert result.failures[0] == f"{first} [-DQUANT_QK_ROWS=128]@sm_90: 8 bytes of spill stores (baseline 0)"
    assert len(result.failures) == len(INSTANCES["quant_qk.cu"])  # the default build does not spill
    assert f"{first} [-DQUANT_QK_ROWS=128]" in check.format_table(result)
    spills = check.baseline_document(result, {})["spill_store_bytes"]
    assert set(spills) == set(check.instance_keys("quant_qk.cu", "sm_90", ("-DQUANT_QK_ROWS=128",)))
    assert check.cubin_path(tmp_path, "quant_qk.cu", "sm_90") != check.cubin_path(
        tmp_path, "quant_qk.cu", "sm_90", ("-DQUANT_QK_ROWS=128",))


def test_a_partial_check_rewrites_only_its_own_baseline_entries():
    name = INSTANCES["attn_sm90.cu"][0]
    result = check.CheckResult([check.TargetResult("attn_sm90.cu", "sm_90a", True, [
        check.KernelReport(name, "attn_sm90.cu", "sm_90a", spill_stores=16)])], [])
    previous = {f"{name}@sm_90a": 8, f"{INSTANCES['attn_sm90.cu'][1]}@sm_90a": 4,
                "attn_mma_kernel<128, false>@sm_89": 36}
    spills = check.baseline_document(result, previous)["spill_store_bytes"]
    # the checked target's kernels are as measured now (the second one no longer spills), the others kept
    assert spills == {f"{name}@sm_90a": 16, "attn_mma_kernel<128, false>@sm_89": 36}


def test_unknown_kernel_or_arch_is_a_usage_error_naming_the_flag(capsys, monkeypatch):
    def compiled(*args, **kwargs):
        raise AssertionError("compiled before --kernel and --arch were checked")

    monkeypatch.setattr(check, "run_check", compiled)  # refused up front, with or without nvcc
    assert main(["kernels", "check", "--arch", "sm_90", "--arch", "sm_80"]) == 2
    err = capsys.readouterr().err
    assert f"--arch: expected one of {list(ARCH_PRESETS)}, got 'sm_80'; " in err and "leave it out" in err, err
    assert main(["kernels", "check", "--kernel", "nope.cu"]) == 2
    err = capsys.readouterr().err
    assert f"--kernel: expected one of {sorted(INSTANCES)}, got 'nope.cu'; " in err, err
    assert main(["kernels", "build", "--arch", "sm_80"]) == 2
    assert "--arch: expected one of" in capsys.readouterr().err


def test_the_python_api_names_its_keyword(monkeypatch):
    monkeypatch.setattr(check, "nvcc_path", lambda: "nvcc")
    with pytest.raises(ValueError, match=r"^arch: expected one of"):
        check.run_check(["quant_qk.cu"], ["sm_80"])


@needs_nvcc
def test_every_kernel_compiles_for_every_target_without_new_spills(tmp_path):
    result = check.run_check(jobs=2)
    expected = {(f, a) for f in INSTANCES for a in ONLY_ARCHS.get(f, ARCH_PRESETS)}
    assert {(t.file, t.arch) for t in result.targets} == expected
    # every build the launcher makes: quant_qk.cu's 128-token blocks (K without smoothing, sm90 preset) as well
    assert {(t.file, t.arch, t.options) for t in result.targets} == {
        (f, a, o) for f, a in expected for o in check.builds(f)}
    assert ("quant_qk.cu", "sm_90", ("-DQUANT_QK_ROWS=128",)) in {(t.file, t.arch, t.options) for t in result.targets}
    assert ("microbench_wgmma.cu", "sm_90a") in expected and ("microbench_wgmma.cu", "sm_89") not in expected
    assert ("hopper_smoke.cu", "sm_90a") in expected and ("hopper_smoke.cu", "sm_90") not in expected
    assert result.ok, "\n".join(result.failures)
    for t in result.targets:  # shared memory per block, dynamic included, within each target's limit
        for k in t.kernels:
            assert k.smem_per_block <= check.SHARED_MEMORY_PER_BLOCK[k.arch], k.key
            if check.shutil.which("c++filt"):  # the launcher's dynamic figure is found by the demangled name
                assert (k.dynamic_smem_bytes > 0) == (t.file == "attn_mma.cu"), k.key
    assert {t.arch for t in result.targets if t.file == "attn_mma.cu"} >= {"sm_120a", "sm_121a"}
    names = {k.kernel for t in result.targets for k in t.kernels}
    assert len(names) == sum(len(INSTANCES[f]) * len(check.builds(f)) for f in INSTANCES)
    if check.shutil.which("c++filt"):  # demangled: the launcher's names, a variant's with its options
        assert names == {n + check.variant_suffix(o) for f in INSTANCES for o in check.builds(f) for n in INSTANCES[f]}


@needs_nvcc
def test_cli_prints_the_table_and_writes_json(tmp_path, capsys):
    out = tmp_path / "check.json"
    assert main(["kernels", "check", "--kernel", "quant_qk.cu", "--arch", "sm_90", "--json", str(out)]) == 0
    text = capsys.readouterr().out
    assert "quant_int8_kernel<128, false, false>" in text and "spill st/ld" in text
    assert json.loads(out.read_text())["ok"] is True


def test_json_report_is_written_by_the_shared_strict_writer(tmp_path, capsys, monkeypatch):
    from sagelib.records import documents

    result = check.CheckResult([check.TargetResult("quant_qk.cu", "sm_90", True, [
        check.KernelReport("quant_int8_kernel<128, false, false>", "quant_qk.cu", "sm_90", registers=96)])], [])
    monkeypatch.setattr(check, "run_check", lambda *args, **kwargs: result)
    out = tmp_path / "new" / "check.json"
    assert main(["kernels", "check", "--arch", "sm_90", "--json", str(out)]) == 0
    expected = documents.write_json(check.to_json(result), tmp_path / "expected.json").read_text()
    assert out.read_text() == expected and json.loads(expected)["targets"][0]["kernels"][0]["registers"] == 96


def test_a_json_path_it_cannot_write_is_refused_before_compiling(tmp_path, capsys, monkeypatch):
    def compiled(*args, **kwargs):
        raise AssertionError("compiled before --json was checked")

    monkeypatch.setattr(check, "run_check", compiled)
    assert main(["kernels", "check", "--json", str(tmp_path)]) == 2
    assert "--json " in capsys.readouterr().err
    (tmp_path / "file").write_text("")
    assert main(["kernels", "check", "--json", str(tmp_path / "file" / "check.json")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err


def test_a_compile_is_kept_and_asked_again_without_nvcc(monkeypatch, tmp_path):
    monkeypatch.setenv("SAGELIB_KERNEL_CACHE", str(tmp_path / "cache"))
    monkeypatch.setitem(check.INSTANCES, "k.cu", ("k",))
    monkeypatch.setattr(check, "demangle", lambda names: {n: n for n in names})
    runs = []

    def nvcc(cmd, **kwargs):  # writes the cubin named by -o and prints a ptxas report for one kernel
        runs.append(cmd)
        Path(cmd[cmd.index("-o") + 1]).write_bytes(b"CUBIN" + str(len(runs)).encode())
        log = ("ptxas info : Compiling entry function 'k' for 'sm_90a'\n"
               "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
               f"ptxas info : Used {100 + len(runs)} registers, 0 bytes smem\n")
        return subprocess.CompletedProcess(cmd, 0, "", log)

    monkeypatch.setattr(check.subprocess, "run", nvcc)
    first = check.compile_target("k.cu", "sm_90a", "nvcc", tmp_path, ())
    (tmp_path / "elsewhere").mkdir()
    again = check.compile_target("k.cu", "sm_90a", "nvcc", tmp_path / "elsewhere", ())
    assert len(runs) == 1 and first.ok and again.ok
    assert again.kernels[0].registers == first.kernels[0].registers == 101
    assert check.cubin_path(tmp_path / "elsewhere", "k.cu", "sm_90a").read_bytes() == b"CUBIN1"
    check.compile_target("k.cu", "sm_90a", "nvcc", tmp_path, ("-DX=1",))  # other options: compiled afresh
    check.compile_target("k.cu", "sm_90a", "nvcc", tmp_path, (), use_cache=False)
    assert len(runs) == 3


def test_shared_memory_over_the_targets_limit_fails(monkeypatch):
    """GB10 (sm_121a) allows 99 KB per block: ptxas' static figure plus the launcher's dynamic one must fit."""
    name = "attn_mma_kernel<128, false>"
    report = check.KernelReport(name, "attn_mma.cu", "sm_121a", registers=255, smem_bytes=4 * 1024,
                                dynamic_smem_bytes=96 * 1024)
    monkeypatch.setattr(check, "compile_target", lambda f, a, nvcc, wd, options=(): check.TargetResult(
        f, a, True, [report]))
    monkeypatch.setattr(check, "nvcc_path", lambda: "nvcc")
    result = check.run_check(["attn_mma.cu"], ["sm_121a"], baseline={})
    assert check.SHARED_MEMORY_PER_BLOCK["sm_121a"] == check.SHARED_MEMORY_PER_BLOCK["sm_120a"] == 99 * 1024
    assert result.failures == [f"{name}@sm_121a: 102400 bytes of shared memory per block (4096 static + 98304 "
                               "dynamic), over sm_121a's 101376 (99 KB); shrink its tiles or stages for that target"]
    report.dynamic_smem_bytes = 95 * 1024  # 99 KB exactly fits
    assert check.run_check(["attn_mma.cu"], ["sm_121a"], baseline={}).ok
    assert "101376" in check.format_table(result)  # the table shows the limit beside each kernel


def test_the_portable_kernels_dynamic_shared_memory_is_counted():
    # the Q tile (128 rows) and two K and two V^T stages of 64 keys, one byte per element
    for d in (64, 128):
        for f16 in (False, True):
            assert check.DYNAMIC_SHARED_BYTES[f"attn_mma_kernel<{d}, {'true' if f16 else 'false'}>"] == (
                128 * d + 2 * 64 * d + 2 * d * 64)
    assert check.DYNAMIC_SHARED_BYTES["attn_mma_kernel<128, false>"] == 48 * 1024
