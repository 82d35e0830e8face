"""Prepared launches: a kernel's arguments packed once, launched with only the pointers that change rewritten.

:func:`sagelib.cuda.launch.launch` converts every argument and goes through CuPy's launcher on each call (tens of
microseconds of host time for an attention call's three launches). A :class:`LaunchSpec` names one launch (function,
grid, block, shared memory and the keyword values of its parameter struct, :func:`sagelib.cuda.params.arguments`);
:func:`run_spec` launches it the general way, and :class:`PreparedLaunch` packs its arguments once into one host
buffer, keeps an array of pointers into it (the ``kernelParams`` of ``cuLaunchKernel``), and on each call writes
the addresses of the tensors named ``dynamic`` and calls the driver directly (``libcuda`` through ctypes). The
driver copies the parameters when the launch is enqueued, so the buffer may be rewritten for the next call at once;
a launch captured in a CUDA graph keeps the values it was captured with.

Where the driver library cannot be loaded, or when ``SAGELIB_LAUNCH_DLPACK`` or ``SAGELIB_SYNC_LAUNCHES`` asks
for the general path's behaviour, a prepared launch goes through :func:`launch` with the same arguments.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field

import numpy as np

from sagelib.cuda import params
from sagelib.cuda.launch import (
    KernelLaunchError,
    Struct,
    kernel_argument,
    launch,
    set_dynamic_smem,
)

#: cuLaunchKernel's result when no CUDA context is current on the calling thread
CUDA_ERROR_INVALID_CONTEXT = 201


@dataclass
class LaunchSpec:
    """One launch: what :func:`launch` takes, with the arguments as the keyword values of ``struct``."""

    function: object
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    struct: str  #: a parameter struct of kernels/include/params.cuh (sagelib.cuda.params.HEADERS)
    values: dict = field(default_factory=dict)
    shared_mem: int = 0
    name: str = "kernel"

    def arguments(self) -> tuple:
        return params.arguments(self.struct, **self.values)


def run_spec(spec: LaunchSpec) -> None:
    """Launch ``spec`` the general way (every argument converted on this call)."""
    launch(spec.function, spec.grid, spec.block, spec.arguments(), shared_mem=spec.shared_mem, name=spec.name)


class _Driver:
    """The few driver entry points a prepared launch calls, bound once through ctypes."""

    def __init__(self, lib):
        c = ctypes
        self.lib = lib
        #: cuLaunchKernel without argtypes: every argument is passed as a ctypes object converted once
        #: (function, 3 grid and 3 block c_uint, shared memory c_uint, stream, kernelParams, extra)
        self.launch_converted = lib.cuLaunchKernel
        self.launch_converted.restype = c.c_int

    def make_current(self, device_index: int) -> None:
        """Make ``device_index``'s primary context current on this thread (a thread torch never ran CUDA on)."""
        c = ctypes
        dev, ctx = c.c_int(0), c.c_void_p(0)
        for status in (self.lib.cuDeviceGet(c.byref(dev), c.c_int(device_index)),
                       self.lib.cuDevicePrimaryCtxRetain(c.byref(ctx), dev), self.lib.cuCtxSetCurrent(ctx)):
            if status:
                raise KernelLaunchError(f"no CUDA context on this thread, and making device {device_index}'s "
                                        f"primary context current failed (CUresult {status})")


_DRIVER: list = []  # [] not tried yet, [None] unavailable, [_Driver]


def driver() -> _Driver | None:
    """The driver bound through ctypes, or None where libcuda cannot be loaded (prepared launches use CuPy)."""
    if not _DRIVER:
        try:
            _DRIVER.append(_Driver(ctypes.CDLL("libcuda.so.1")))
        except (OSError, AttributeError):
            _DRIVER.append(None)
    return _DRIVER[0]


def direct_launches() -> bool:
    """Whether prepared launches call the driver directly: libcuda loads and no environment switch asks for the
    general path (``SAGELIB_LAUNCH_DLPACK``, ``SAGELIB_SYNC_LAUNCHES``)."""
    if os.environ.get("SAGELIB_LAUNCH_DLPACK") or os.environ.get("SAGELIB_SYNC_LAUNCHES"):
        return False
    return driver() is not None


def argument_bytes(arg) -> bytes:
    """The bytes the kernel receives for one argument of :func:`sagelib.cuda.params.arguments`: a tensor's address,
    0 for None, a struct's bytes, a number as its numpy scalar (as :func:`kernel_argument` converts it)."""
    if arg is None:
        return bytes(8)
    if hasattr(arg, "data_ptr"):
        return np.uint64(arg.data_ptr()).tobytes()
    if isinstance(arg, Struct):
        return arg.data
    return np.asarray(kernel_argument(arg)).tobytes()


class PreparedLaunch:
    """``spec`` with its arguments packed once; ``dynamic`` names the pointer members rewritten on each call.

    Call it with the stream handle (an int), the device index and one address per ``dynamic`` name, in order.
    The spec's tensors (and tensor maps) stay referenced here, so the memory the packed pointers name stays alive.
    """

    def __init__(self, spec: LaunchSpec, dynamic: tuple[str, ...] = (), direct: bool | None = None):
        members = params.fields(spec.struct)
        names = [f.name for f in members]
        unknown = [d for d in dynamic if d not in names or members[names.index(d)].ctype != "ptr"]
        if unknown:
            raise KernelLaunchError(f"{spec.name}: dynamic members {unknown} are not pointer members of {spec.struct}")
        self.spec, self.dynamic = spec, tuple(dynamic)
        self.args = list(spec.arguments())  # exactly what the general path hands the launcher
        self.index = tuple(names.index(d) for d in dynamic)
        self.direct = direct_launches() if direct is None else direct
        set_dynamic_smem(spec.function, spec.shared_mem)
        if self.direct:
            self._pack()
        for i, name in zip(self.index, self.dynamic):  # hold no caller's tensor: each call names its own
            self.args[i] = None
            spec.values[name] = None

    def _pack(self) -> None:
        offsets, size, _ = params.layout(self.spec.struct)
        names = [f.name for f in params.fields(self.spec.struct)]
        self._raw = ctypes.create_string_buffer(size + 64)
        base = ctypes.addressof(self._raw)
        base += (-base) % 64  # a TensorMap member is 64-byte aligned in C; keep the host copy so too
        for name, arg in zip(names, self.args):
            data = argument_bytes(arg)
            ctypes.memmove(base + offsets[name], data, len(data))
        self._pointers = (ctypes.c_void_p * len(names))(*(base + offsets[n] for n in names))
        self._slots = tuple(ctypes.c_uint64.from_address(base + offsets[names[i]]) for i in self.index)
        self._function = ctypes.c_void_p(self.spec.function.ptr)
        self._dims = (*(int(g) for g in self.spec.grid), *(int(b) for b in self.spec.block))
        self._empty = any(g <= 0 for g in self.spec.grid)
        # cuLaunchKernel's arguments before the stream, converted once
        self._head = (self._function, *(ctypes.c_uint(x) for x in self._dims), ctypes.c_uint(self.spec.shared_mem))
        self._stream = (None, None)  # (the stream handle, its c_void_p)

    def __call__(self, stream: int, device_index: int, *addresses_or_tensors) -> None:
        if not self.direct:
            for i, value in zip(self.index, addresses_or_tensors):
                self.args[i] = value
            run_spec_args(self.spec, tuple(self.args))
            return
        if self._empty:
            return
        for slot, value in zip(self._slots, addresses_or_tensors):
            slot.value = value if isinstance(value, int) else value.data_ptr()
        if self._stream[0] != stream:
            self._stream = (stream, ctypes.c_void_p(stream))
        d = _DRIVER[0]
        status = d.launch_converted(*self._head, self._stream[1], self._pointers, None)
        if status == CUDA_ERROR_INVALID_CONTEXT:
            d.make_current(device_index)
            status = d.launch_converted(*self._head, self._stream[1], self._pointers, None)
        if status:
            raise KernelLaunchError(f"{self.spec.name}: launch with grid {self.spec.grid} block {self.spec.block} "
                                    f"failed (CUresult {status}); rerun with SAGELIB_SYNC_LAUNCHES=1 to see the "
                                    "failing kernel through CuPy's checks")


def run_spec_args(spec: LaunchSpec, args: tuple) -> None:
    launch(spec.function, spec.grid, spec.block, args, shared_mem=spec.shared_mem, name=spec.name)

