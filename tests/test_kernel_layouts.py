"""Kernel layouts the host mirrors, checked against the kernel sources themselves (nvcc, no GPU).

The host asks for ``shared_memory_bytes`` of dynamic shared memory per Hopper kernel instance; the kernel lays it
out as ``Sm90Smem`` (kernels/attn_sm90.cu). A host program compiled from the same source prints ``sizeof`` of
every built instance's layout, so the Python figure is checked against the one source rather than copied from it.
"""

import subprocess

import pytest

from sagelib import paths
from sagelib.backends.kernels import sm90
from sagelib.cuda import instances, toolkit

NVCC = toolkit.find("nvcc")


@pytest.mark.slow
@pytest.mark.skipif(NVCC is None, reason="needs nvcc (the CUDA toolkit) to compile the layout probe")
def test_hopper_shared_memory_is_the_kernels_own_layout(tmp_path):
    built = {**instances.SM90_STAGES, **instances.SM90_COMPARISON_STAGES}
    cases = [(d, stages, consumers, keys) for (d, consumers, keys), stages in built.items()]
    lines = [f'  std::printf("%zu\\n", sizeof(Sm90Smem<{d}, {s}, Sm90Geometry<{c}, {k}>>));' for d, s, c, k in cases]
    probe = tmp_path / "probe.cu"
    probe.write_text('#include <cstdio>\n#include "attn_sm90.cu"\nint main() {\n' + "\n".join(lines) + "\n}\n")
    kernels = paths.KERNELS_DIR
    subprocess.run([NVCC, "-std=c++17", "-gencode", "arch=compute_90a,code=sm_90a", f"-I{kernels}",
                    f"-I{kernels / 'include'}", str(probe), "-o", str(tmp_path / "probe")], check=True,
                   capture_output=True, timeout=300)
    sizes = [int(x) for x in subprocess.run([str(tmp_path / "probe")], capture_output=True, text=True,
                                            check=True).stdout.split()]
    host = [sm90.shared_memory_bytes(d, s, sm90.Geometry(consumers=c, block_keys=k)) - sm90.SMEM_ALIGN
            for d, s, c, k in cases]
    assert host == sizes, f"sagelib.backends.kernels.sm90.shared_memory_bytes drifted from Sm90Smem: {cases}"
