"""sagelib.cuda.build and sagelib.cuda.launch without a GPU: cache keys, presets, NVRTC errors, arguments.

NVRTC compiles without a GPU; where the library is missing those tests skip
with the reason. Loading and launching need a GPU (tests/test_cuda_parity.py).
"""

import shutil
import struct

import numpy as np
import pytest
import torch

from sagelib.cuda import build, launch
from sagelib.cuda.instances import INSTANCES

needs_nvrtc = pytest.mark.skipif(build.nvrtc_version() is None,
                                 reason="needs NVRTC (pip install -e '.[cuda13]' or nvidia-cuda-nvrtc)")


@pytest.fixture
def kernel_tree(tmp_path, monkeypatch):
    """A private copy of kernels/ (and a private cache) the test may edit."""
    root = tmp_path / "kernels"
    shutil.copytree(build.KERNELS_DIR, root)
    monkeypatch.setattr(build, "KERNELS_DIR", root)
    monkeypatch.setattr(build, "INCLUDE_DIR", root / "include")
    monkeypatch.setenv("SAGELIB_KERNEL_CACHE", str(tmp_path / "cache"))
    return root


def test_presets_and_capabilities():
    assert build.ARCH_PRESETS == ("sm_89", "sm_90", "sm_90a", "sm_120a", "sm_121a")
    assert build.arch_for_capability(9, 0) == "sm_90"
    assert build.arch_for_capability(12, 1) == "sm_121a"
    with pytest.raises(ValueError, match="compute capability 8.9, 9.0, 12.0 or 12.1"):
        build.arch_for_capability(8, 0)


def test_request_validation_names_the_fix():
    with pytest.raises(ValueError, match="arch: expected one of"):
        build.BuildRequest("attn_mma.cu", ("attn_mma_kernel<128, false>",), "sm_80")
    with pytest.raises(ValueError, match="kernel: expected a file in kernels/"):
        build.BuildRequest("nope.cu", (), "sm_90")


def test_cache_key_follows_headers_options_arch_and_instances(kernel_tree):
    req = build.BuildRequest("quant_qk.cu", (INSTANCES["quant_qk.cu"][0],), "sm_90")
    key = build.cache_key(req)
    assert key == build.cache_key(req)
    header = kernel_tree / "include" / "convert.cuh"
    header.write_text(header.read_text() + "\n// an edit in an included header\n")
    edited = build.cache_key(req)
    assert edited != key, "a header edit must change the cache key (NVRTC resolves includes itself)"
    assert build.cache_key(build.BuildRequest("quant_qk.cu", req.name_expressions, "sm_90a")) != edited
    assert build.cache_key(build.BuildRequest("quant_qk.cu", req.name_expressions, "sm_90", ("-DX=1",))) != edited
    assert build.cache_key(build.BuildRequest("quant_qk.cu", (INSTANCES["quant_qk.cu"][1],), "sm_90")) != edited


def test_options_carry_arch_include_dir_and_header_hash(kernel_tree):
    opts = build.nvrtc_options(build.BuildRequest("attn_mma.cu", (), "sm_90a"))
    assert "-arch=sm_90a" in opts and f"-I{kernel_tree / 'include'}" in opts
    assert any(o.startswith("-DSAGELIB_INCLUDE_HASH=0x") for o in opts)


def test_compile_log_is_reported_as_file_and_line():
    req = build.BuildRequest("attn_mma.cu", (), "sm_90")
    log = (f"{build.INCLUDE_DIR}/convert.cuh(12): error: identifier \"oops\" is undefined\n"
           "kernels/attn_mma.cu(40): error: expected a \";\"\n\n2 errors detected in the compilation.\n")
    text = build.format_compile_log(req, log)
    assert "kernels/include/convert.cuh:12: error: identifier" in text
    assert "kernels/attn_mma.cu:40: error: expected" in text


@needs_nvrtc
def test_nvrtc_builds_every_arch_and_caches(kernel_tree):
    name = "quant_int8_kernel<64, false, true>"
    for arch in build.ARCH_PRESETS:
        built = build.compile_cubin(build.BuildRequest("quant_qk.cu", (name,), arch))
        assert built.cubin[:4] == b"\x7fELF" and not built.from_cache
        assert built.lowered[name].startswith("_Z17quant_int8_kernel")
    again = build.compile_cubin(build.BuildRequest("quant_qk.cu", (name,), "sm_90"))
    assert again.from_cache


@needs_nvrtc
def test_cubins_are_whole_elf_files(kernel_tree):
    """CuPy's getCUBIN drops the last byte; the build puts it back, so cuobjdump and nvdisasm can read them."""
    built = build.compile_cubin(build.BuildRequest("quant_qk.cu", ("quant_int8_kernel<64, false, true>",), "sm_90"))
    assert len(built.cubin) == build.elf_size(built.cubin)


def test_whole_elf_pads_only_what_the_headers_declare():
    header = bytearray(64)
    header[:6] = b"\x7fELF\x02\x01"
    struct.pack_into("<QQ", header, 0x20, 64, 0)  # program headers right after the ELF header, no sections
    struct.pack_into("<HHHH", header, 0x36, 56, 2, 64, 0)
    whole = bytes(header) + bytes(range(1, 113))  # two 56-byte program headers: 176 bytes in all
    assert build.elf_size(whole) == 176 and build.whole_elf(whole) == whole
    assert build.whole_elf(whole[:-1]) == whole[:-1] + b"\0"
    with pytest.raises(ValueError, match="cubin: 50 bytes short"):
        build.whole_elf(whole[:-50])
    with pytest.raises(ValueError, match="image: expected a 64-bit little-endian ELF"):
        build.whole_elf(b"not an elf at all" * 8)


@needs_nvrtc
def test_a_broken_kernel_fails_with_file_and_line(kernel_tree):
    (kernel_tree / "broken.cu").write_text('#include "common.cuh"\n\n__global__ void k() { undefined_name(); }\n')
    with pytest.raises(build.KernelCompileError, match=r"broken\.cu:3: error"):
        build.compile_cubin(build.BuildRequest("broken.cu", (), "sm_90"))


def test_kernel_arguments_are_typed():
    assert launch.kernel_argument(launch.I32(7)).dtype == np.int32
    assert launch.kernel_argument(3).dtype == np.int64  # strides and sizes default to int64
    assert launch.kernel_argument(launch.F32(0.5)).dtype == np.float32
    assert launch.kernel_argument(None) == np.uint64(0)  # a null pointer
    with pytest.raises(TypeError, match="unsupported type"):
        launch.kernel_argument("x")


def test_cpu_tensor_is_refused_before_dlpack():
    with pytest.raises(ValueError, match="expected a CUDA tensor"):
        launch.as_cupy(torch.zeros(2))


def test_cupy_missing_reason_says_how_to_install_and_is_none_when_cupy_imports(monkeypatch):
    import sagelib.cuda
    from sagelib.measure import microbench

    def broken(name):
        raise ImportError(f"libcudart.so.13: cannot open shared object file ({name})")

    monkeypatch.setattr(sagelib.cuda.importlib, "import_module", broken)
    reason = sagelib.cuda.cupy_missing_reason()
    assert reason.startswith("needs CuPy (libcudart.so.13") and "pip install -e '.[cuda13]'" in reason
    if torch.cuda.is_available():
        assert microbench.unavailable_reason() == reason
    monkeypatch.setattr(sagelib.cuda.importlib, "import_module", lambda name: object())
    assert sagelib.cuda.cupy_missing_reason() is None


def test_macro_options_take_definitions_and_removals_only():
    from sagelib.cuda.build import macro_options
    assert macro_options(["-DSM90_ABLATE_CVT=1", "-USM90_TRACE"], "--option", "-DX=1") == ("-DSM90_ABLATE_CVT=1",
                                                                                           "-USM90_TRACE")
    assert macro_options((), "--option", "-DX=1") == ()
    for bad in ("--use_fast_math", "-D", "SM90_X=1", "-O3", "-D1X"):
        with pytest.raises(ValueError, match=rf"--flag: expected -DNAME\[=VALUE\] or -UNAME words, got \['{bad}'\]; "
                                             r"e\.g\. --flag=-DSM90_X=1"):
            macro_options(["-DSM90_TRACE=1", bad], "--flag", "--flag=-DSM90_X=1")


def test_a_macro_no_kernel_reads_is_refused(tmp_path, monkeypatch):
    """A misspelt switch would build the default kernel and time it as the experiment."""
    from sagelib.cuda.build import kernel_identifiers, macro_options
    with pytest.raises(ValueError, match=r"--flag: no kernel source reads the macro of \['-DSM90_ABLATE_CTV=1'\]"):
        macro_options(["-DSM90_ABLATE_CVT=1", "-DSM90_ABLATE_CTV=1"], "--flag", "--flag=-DSM90_ABLATE_CVT=1")
    # the identifiers are read again when a source changes
    kernels = tmp_path / "kernels"
    (kernels / "include").mkdir(parents=True)
    (kernels / "k.cu").write_text("#ifndef OLD_SWITCH\n#endif\n")
    monkeypatch.setattr(build, "KERNELS_DIR", kernels)
    monkeypatch.setattr(build, "INCLUDE_DIR", kernels / "include")
    assert "OLD_SWITCH" in kernel_identifiers() and "NEW_SWITCH" not in kernel_identifiers()
    (kernels / "include" / "h.cuh").write_text("#if NEW_SWITCH\n#endif\n")
    assert macro_options(["-DNEW_SWITCH=1"], "--flag", "") == ("-DNEW_SWITCH=1",)


def test_a_scripts_defines_are_checked_as_build_options():
    """`sagelib study softmax` and `sagelib profile sm90` take --define NAME[=VALUE]."""
    from sagelib.cuda.build import define_options
    assert define_options(["SM90_ABLATE_PACK=1", "SM90_TRACE"]) == ("-DSM90_ABLATE_PACK=1", "-DSM90_TRACE")
    assert define_options([]) == ()
    with pytest.raises(ValueError, match=r"--define: no kernel source reads the macro of \['-DSM90_ABLATE_PAKC=1'\].*"
                                         r"e\.g\. --define SM90_ABLATE_PACK=1"):
        define_options(["SM90_ABLATE_PAKC=1"])
    with pytest.raises(ValueError, match=r"--define: expected -DNAME\[=VALUE\] or -UNAME words, got \['-D1X'\]"):
        define_options(["1X"])
