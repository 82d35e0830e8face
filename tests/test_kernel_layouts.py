"""Kernel layouts the host mirrors, checked against the kernel sources themselves (nvcc, no GPU).

The host asks for ``shared_memory_bytes`` of dynamic shared memory per Hopper kernel instance and launches
``Geometry.threads`` threads per tile of ``Geometry.cta_q`` rows; the kernel lays its memory out as ``Sm90Smem``
and derives both from ``Sm90Geometry`` (kernels/attn_sm90.cu, kernels/include/attn_sm90/geometry.cuh). A host
program compiled from the same source prints them for every built instance, so the Python figures are checked
against the one source rather than copied from it.
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
    lines = [f'  std::printf("%zu %d %d %d\\n", sizeof(Sm90Smem<{d}, {s}, Sm90Geometry<{c}, {k}>>), '
             f'Sm90Geometry<{c}, {k}>::THREADS, Sm90Geometry<{c}, {k}>::CTA_Q, SM90_Q_SLOTS);' for d, s, c, k in cases]
    probe = tmp_path / "probe.cu"
    probe.write_text('#include <cstdio>\n#include "attn_sm90.cu"\nint main() {\n' + "\n".join(lines) + "\n}\n")
    kernels = paths.KERNELS_DIR
    subprocess.run([NVCC, "-std=c++17", "-gencode", "arch=compute_90a,code=sm_90a", f"-I{kernels}",
                    f"-I{kernels / 'include'}", str(probe), "-o", str(tmp_path / "probe")], check=True,
                   capture_output=True, timeout=300)
    kernel = [tuple(int(x) for x in line.split()) for line in
              subprocess.run([str(tmp_path / "probe")], capture_output=True, text=True, check=True).stdout.splitlines()]
    host = []
    for d, s, c, k in cases:
        geometry = sm90.Geometry(consumers=c, block_keys=k)
        host.append((sm90.shared_memory_bytes(d, s, geometry) - sm90.SMEM_ALIGN, geometry.threads, geometry.cta_q,
                     sm90.Q_SLOTS))
    assert host == kernel, f"sagelib.backends.kernels.sm90 drifted from Sm90Smem / Sm90Geometry: {cases}"
