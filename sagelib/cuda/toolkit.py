"""Where NVIDIA's command-line tools are: one search for nvcc, ncu, compute-sanitizer, cuobjdump and nvdisasm.

A CUDA install rarely puts every tool on PATH: nvcc sits in ``/usr/local/cuda/bin``, Nsight Compute in
``/opt/nvidia/nsight-compute/<version>``, and NVIDIA's pip wheels (``nvidia-cuda-cuobjdump`` and friends) unpack
theirs into ``site-packages/nvidia/<cuda>/bin``. Every part of sagelib that runs one of these tools asks
:func:`find`, so a tool found by one command is found by all of them, and a missing one is reported with the
same list of places searched (:func:`not_found`).
"""

from __future__ import annotations

import glob
import os
import re
import shutil
import sys

#: What to install when a tool is missing, by tool name.
INSTALL_HINTS = {
    "nvcc": "install the CUDA toolkit (nvcc)",
    "ncu": "install Nsight Compute (part of the CUDA toolkit)",
    "compute-sanitizer": "install the CUDA toolkit",
    "cuobjdump": "install the CUDA toolkit, or pip install nvidia-cuda-cuobjdump (in sagelib's test extra)",
    "nvdisasm": "install the CUDA toolkit, or pip install nvidia-cuda-nvdisasm (in sagelib's test extra)",
}


def _version_key(path: str) -> tuple[int, ...]:
    """Newest first among versioned folders (cuda-13.0 before cuda-12.8; 2025.3.1 before 2025.2)."""
    return tuple(-int(n) for n in re.findall(r"\d+", path))


def candidates(name: str) -> list[str]:
    """Every place :func:`find` looks for ``name`` after PATH, in the order it looks."""
    places = [os.path.join(os.environ[v], "bin", name) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    places.append(f"/usr/local/cuda/bin/{name}")
    places += sorted(glob.glob(f"/usr/local/cuda-*/bin/{name}"), key=_version_key)
    nsight = glob.glob(f"/opt/nvidia/nsight-compute*/{name}") + glob.glob(f"/opt/nvidia/nsight-compute/*/{name}")
    places += sorted(nsight, key=_version_key)
    for entry in sys.path:
        places += sorted(glob.glob(os.path.join(entry or ".", "nvidia", "*", "bin", name)))
    return places


def find(name: str) -> str | None:
    """The path of tool ``name`` (an executable file), or None if absent. Searched in order: PATH, $CUDA_HOME/bin,
    $CUDA_PATH/bin, /usr/local/cuda/bin, /usr/local/cuda-*/bin (newest first), Nsight Compute's folders under
    /opt/nvidia, and NVIDIA's pip wheels (site-packages/nvidia/*/bin)."""
    found = shutil.which(name)
    if found:
        return found
    return next((c for c in candidates(name) if os.path.isfile(c) and os.access(c, os.X_OK)), None)


def not_found(name: str) -> str:
    """The reason to report when :func:`find` gives None: where it looked and what to install."""
    return f"{name} not found on PATH or in the CUDA install folders; {INSTALL_HINTS.get(name, 'install it')}"
