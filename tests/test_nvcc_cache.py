"""sagelib.cuda.nvcc_cache: a build is taken from the cache only when nothing it reads changed, and only when the
cache is asked for. nvcc is a stand-in script here (it counts its calls), so no CUDA toolkit is needed."""

import stat

import pytest

from sagelib.cuda import check, nvcc_cache


@pytest.fixture
def fake_nvcc(tmp_path):
    calls = tmp_path / "calls"
    script = tmp_path / "nvcc"
    script.write_text(f'#!/bin/sh\necho call >> "{calls}"\nwhile [ "$1" != "-o" ]; do shift; done\n'
                      'printf "cubin-bytes" > "$2"\necho "ptxas info    : 0 bytes gmem" >&2\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script), (lambda: len(calls.read_text().splitlines()) if calls.exists() else 0)


def test_a_cached_build_is_not_compiled_again_and_gives_the_same_result(tmp_path, monkeypatch, fake_nvcc):
    nvcc, count = fake_nvcc
    monkeypatch.setenv(nvcc_cache.ENV, str(tmp_path / "cache"))
    for folder in "abc":
        (tmp_path / folder).mkdir()
    first = check.compile_target("quant_qk.cu", "sm_90", nvcc, tmp_path / "a")
    second = check.compile_target("quant_qk.cu", "sm_90", nvcc, tmp_path / "b")
    assert count() == 1 and first == second
    assert (tmp_path / "b" / "quant_qk_sm_90.cubin").read_bytes() == b"cubin-bytes"
    check.compile_target("quant_qk.cu", "sm_90", nvcc, tmp_path / "c", ("-DQUANT_QK_ROWS=128",))
    check.compile_target("quant_qk.cu", "sm_89", nvcc, tmp_path / "c")
    assert count() == 3  # other options, another architecture: other builds


def test_without_the_variable_every_build_runs_nvcc(tmp_path, monkeypatch, fake_nvcc):
    nvcc, count = fake_nvcc
    monkeypatch.delenv(nvcc_cache.ENV, raising=False)
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        check.compile_target("quant_qk.cu", "sm_90", nvcc, tmp_path / folder)
    assert count() == 2 and nvcc_cache.folder() is None


def test_the_key_follows_every_kernel_source_and_the_arguments(tmp_path):
    kernels = tmp_path / "kernels"
    (kernels / "include").mkdir(parents=True)
    (kernels / "a.cu").write_text("// a")
    header = kernels / "include" / "h.cuh"
    header.write_text("// h")
    base = nvcc_cache.key("nvcc", ["-arch=sm_90"], "unit", kernels)
    assert nvcc_cache.key("nvcc", ["-arch=sm_90"], "unit", kernels) == base
    assert nvcc_cache.key("nvcc", ["-arch=sm_89"], "unit", kernels) != base
    assert nvcc_cache.key("nvcc", ["-arch=sm_90"], "other unit", kernels) != base
    header.write_text("// h, changed")
    assert nvcc_cache.key("nvcc", ["-arch=sm_90"], "unit", kernels) != base
