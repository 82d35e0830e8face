"""Launching kernels on torch tensors: zero-copy, on torch's current stream, checked.

Tensors reach a kernel as device pointers with no copy. Two ways exist:
``as_cupy`` gives a CuPy array through DLPack (CuPy has no bfloat16 or float8,
so 16-bit floats travel as int16 bits and float8 as uint8 bits, still
zero-copy); the launch path itself passes ``tensor.data_ptr()``, because a
DLPack export costs microseconds per tensor and an attention call hands over a
dozen (measured on the H200: the host, not the GPU, then set the pace of the
quantizers). ``SAGELIB_LAUNCH_DLPACK=1`` sends launch arguments through DLPack
instead. Every launch runs on torch's current stream (wrapped once per stream
as a CuPy stream), so kernels order with torch's own work and are captured by
torch's CUDA graphs. A struct passed by value (a TMA descriptor, 128 bytes
aligned to 64) travels as :class:`Struct`: CuPy passes a one-element NumPy array
by value (its ``CNumpyArray`` argument), and the driver copies as many bytes as
the kernel's parameter declares. A launch failure raises at once (CuPy checks
cuLaunchKernel's result); with ``SAGELIB_SYNC_LAUNCHES=1`` each launch is also
synchronized so that an asynchronous fault names its kernel.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np
import torch

from sagelib.errors import InputError, SagelibError

_VIA_DLPACK = bool(os.environ.get("SAGELIB_LAUNCH_DLPACK"))

_BIT_VIEWS = {
    torch.float16: torch.int16,
    torch.bfloat16: torch.int16,
    torch.float8_e4m3fn: torch.uint8,
    torch.float8_e5m2: torch.uint8,
}


class KernelLaunchError(SagelibError, RuntimeError):
    """A kernel launch, or (with SAGELIB_SYNC_LAUNCHES=1) its execution, failed."""


def as_cupy(tensor: torch.Tensor):
    """A CuPy array sharing ``tensor``'s memory (floats the CuPy lacks as their bits)."""
    if not tensor.is_cuda:
        raise InputError(f"tensor: expected a CUDA tensor, got one on {tensor.device}; move it with .cuda()")
    import cupy

    view = tensor.view(_BIT_VIEWS[tensor.dtype]) if tensor.dtype in _BIT_VIEWS else tensor
    return cupy.from_dlpack(view)


_STREAMS: dict[tuple[int, int], object] = {}


def torch_stream():
    """torch's current CUDA stream as a CuPy stream object (one wrapper per stream)."""
    stream = torch.cuda.current_stream()
    key = (stream.device_index, stream.cuda_stream)
    wrapped = _STREAMS.get(key)
    if wrapped is None:
        import warnings

        import cupy

        try:
            wrapped = cupy.cuda.Stream.from_external(stream)
        except Exception:  # a torch without the CUDA stream protocol
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)
                wrapped = cupy.cuda.ExternalStream(stream.cuda_stream, stream.device_index)
        _STREAMS[key] = wrapped
    return wrapped


@dataclass(frozen=True)
class I32:
    """A value for an ``int`` kernel parameter."""

    value: int


@dataclass(frozen=True)
class F32:
    """A value for a ``float`` kernel parameter."""

    value: float


@dataclass(frozen=True)
class F64:
    """A value for a ``double`` kernel parameter."""

    value: float


@dataclass(frozen=True)
class Struct:
    """The bytes of a struct kernel parameter passed by value (e.g. a ``__grid_constant__ const CUtensorMap``)."""

    data: bytes
    align: int = 64

    def __post_init__(self):
        if self.align <= 0 or self.align & (self.align - 1):
            raise InputError(f"align: expected a power of two, got {self.align}")
        if not self.data or len(self.data) % self.align:
            raise InputError(f"data: expected a non-empty multiple of align={self.align} bytes, got {len(self.data)}; "
                             "pass the struct's full size (a CUtensorMap is 128 bytes)")


def struct_argument(struct: Struct) -> np.ndarray:
    """A one-element NumPy array holding ``struct``'s bytes at an ``align``-aligned host address."""
    size = len(struct.data)
    raw = np.zeros(size + struct.align, dtype=np.uint8)
    start = (-raw.ctypes.data) % struct.align
    raw[start:start + size] = np.frombuffer(struct.data, dtype=np.uint8)
    return raw[start:start + size].view(np.dtype((np.void, size)))  # shape (1,): passed by value


def kernel_argument(arg):
    """One launch argument: tensors as device pointers, None as a null pointer, numpy scalars as they are, ints as
    int64 unless I32."""
    if isinstance(arg, torch.Tensor):
        if _VIA_DLPACK:
            return as_cupy(arg)
        if not arg.is_cuda:
            raise InputError(f"tensor: expected a CUDA tensor, got one on {arg.device}; move it with .cuda()")
        return np.uint64(arg.data_ptr())
    if isinstance(arg, np.generic):
        return arg  # already typed (sagelib.cuda.params): np.float64 must not become a float32 below
    if arg is None:
        return np.uint64(0)
    if isinstance(arg, I32):
        return np.int32(arg.value)
    if isinstance(arg, Struct):
        return struct_argument(arg)
    if isinstance(arg, F32):
        return np.float32(arg.value)
    if isinstance(arg, F64):
        return np.float64(arg.value)
    if isinstance(arg, bool):
        return np.int32(int(arg))
    if isinstance(arg, int):
        return np.int64(arg)
    if isinstance(arg, float):
        return np.float32(arg)
    raise TypeError(f"kernel argument: unsupported type {type(arg).__name__}")


_DYNAMIC_SMEM_LIMIT: dict[int, int] = {}  # function pointer -> bytes allowed so far


def set_dynamic_smem(function, nbytes: int) -> None:
    """Allow ``nbytes`` of dynamic shared memory. A block whose static and dynamic shared memory together pass 48 KB
    needs the opt-in, so it is set for any dynamic amount (48 KB of dynamic memory beside a kernel's static
    barriers failed to launch without it), once per function and size."""
    if nbytes > 0 and _DYNAMIC_SMEM_LIMIT.get(function.ptr, 0) < nbytes:
        from cupy_backends.cuda.api import driver

        driver.funcSetAttribute(function.ptr, driver.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes)
        _DYNAMIC_SMEM_LIMIT[function.ptr] = nbytes


def launch(function, grid, block, args, *, shared_mem: int = 0, name: str = "kernel") -> None:
    """Launch ``function`` on torch's current stream; raise KernelLaunchError on failure."""
    if any(g <= 0 for g in grid):
        return  # nothing to do (an empty dimension)
    stream = torch_stream()
    set_dynamic_smem(function, shared_mem)
    try:
        with stream:  # (DLPack exports then need no cross-stream synchronization)
            converted = tuple(kernel_argument(a) for a in args)
            function(tuple(grid), tuple(block), converted, shared_mem=shared_mem, stream=stream)
        if os.environ.get("SAGELIB_SYNC_LAUNCHES"):
            stream.synchronize()
    except Exception as exc:
        raise KernelLaunchError(f"{name}: launch with grid {tuple(grid)} block {tuple(block)} failed: {exc}") from exc


_OCCUPANCY: dict[tuple[int, int, int], int] = {}


def max_active_blocks(function, block_threads: int, shared_mem: int = 0) -> int:
    """Resident blocks per multiprocessor for ``function`` (the occupancy calculator, cached)."""
    key = (function.ptr, block_threads, shared_mem)
    if key not in _OCCUPANCY:
        from cupy_backends.cuda.api import driver

        _OCCUPANCY[key] = int(driver.occupancyMaxActiveBlocksPerMultiprocessor(function.ptr, block_threads, shared_mem))
    return _OCCUPANCY[key]
