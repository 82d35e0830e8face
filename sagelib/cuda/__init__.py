"""Our CUDA kernels from Python: build (NVRTC), launch (CuPy on torch tensors), check (nvcc).

``build`` turns ``kernels/*.cu`` into cubins for an architecture preset and
caches them by a hash of the source, every header in ``kernels/include`` and
the options. ``launch`` runs them on torch tensors without copies (device
pointers; DLPack views through ``as_cupy``), on torch's current stream.
``ops`` gives them the contract's signatures; ``parity`` checks them against it.
``check`` compiles every kernel for every target with ``nvcc``
and reads ptxas' resource report (``sagelib kernels check``).
"""

import importlib


def cupy_missing_reason() -> str | None:
    """None when CuPy imports here; otherwise why not, and how to install it."""
    try:
        importlib.import_module("cupy")
    except Exception as exc:  # a CuPy built for another CUDA fails with more than ImportError
        return f"needs CuPy ({exc}); install it with pip install -e '.[cuda13]' (or '.[cuda12]')"
    return None
