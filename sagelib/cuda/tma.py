"""TMA tensor maps for torch tensors: the host half of ``kernels/include/hopper/tma.cuh``.

A Hopper kernel copies tiles with the TMA engine, which reads a 128-byte
descriptor (``CUtensorMap``) naming the tensor's address, sizes, byte strides,
the box (tile) one copy moves, and the shared-memory swizzle. The descriptor is
built here with the driver's ``cuTensorMapEncodeTiled`` (through
``cuda.bindings.driver``, the ``cuda13`` extra) and reaches the kernel by value,
as a ``const __grid_constant__ TensorMap`` parameter, through
:class:`sagelib.cuda.launch.Struct`.

Two steps, so the rules can be checked without a GPU:

* :func:`tensor_map_spec` turns a tensor and a box (both in torch's order,
  outermost dimension first) into the driver's arguments (innermost first, byte
  strides) and checks every rule the driver documents, so a bad request is a
  ``ValueError`` naming the argument rather than an opaque
  ``CUDA_ERROR_INVALID_VALUE``;
* :func:`encode` calls the driver (needs libcuda: a GPU host) and returns the 128
  bytes; :func:`tensor_map` does both and keeps the tensor alive with the map.

Elements the box reaches past the tensor's end arrive as zeros, and the copy still
delivers the box's full byte count (:attr:`TensorMapSpec.box_bytes`, what the
kernel announces with ``mbarrier_arrive_expect_tx``).
"""

from __future__ import annotations

import ctypes
import math
from dataclasses import dataclass

import torch

from sagelib.cuda.launch import Struct
from sagelib.errors import InputError

#: The size and alignment of a CUtensorMap.
TENSOR_MAP_BYTES = 128
TENSOR_MAP_ALIGN = 64

#: Swizzle modes: the shared-memory row width each permutes (the box's inner extent may not exceed it).
SWIZZLE_BYTES = {"none": None, "32B": 32, "64B": 64, "128B": 128}

#: torch dtype -> the driver's element type. TMA moves bytes: int8 and float8 travel as UINT8.
_DATA_TYPES = {
    torch.int8: "UINT8",
    torch.uint8: "UINT8",
    torch.float8_e4m3fn: "UINT8",
    torch.float8_e5m2: "UINT8",
    torch.float16: "FLOAT16",
    torch.bfloat16: "BFLOAT16",
    torch.float32: "FLOAT32",
    torch.int32: "INT32",
}

_MAX_RANK = 5
_MAX_BOX = 256


@dataclass(frozen=True)
class TensorMapSpec:
    """The arguments of cuTensorMapEncodeTiled, in the driver's order (innermost dimension first)."""

    data_type: str  #: CU_TENSOR_MAP_DATA_TYPE_<data_type>
    address: int
    dims: tuple[int, ...]  #: elements per dimension
    strides: tuple[int, ...]  #: bytes between consecutive indices of dimensions 1..rank-1
    box: tuple[int, ...]  #: elements one copy moves along each dimension
    swizzle: str  #: a key of SWIZZLE_BYTES
    element_bytes: int

    @property
    def rank(self) -> int:
        return len(self.dims)

    @property
    def box_bytes(self) -> int:
        """Bytes one copy writes to shared memory (zero-filled parts included)."""
        return math.prod(self.box) * self.element_bytes


def tensor_map_spec(tensor: torch.Tensor, box, swizzle: str = "128B") -> TensorMapSpec:
    """Check ``tensor`` and ``box`` (torch order, one entry per dimension) against TMA's rules."""
    if not isinstance(tensor, torch.Tensor):
        raise InputError(f"tensor: expected a torch.Tensor, got {type(tensor).__name__}")
    if tensor.dtype not in _DATA_TYPES:
        known = ", ".join(str(d).removeprefix("torch.") for d in _DATA_TYPES)
        raise InputError(f"tensor: expected dtype one of {known}, got {tensor.dtype}; convert it first")
    if not 1 <= tensor.dim() <= _MAX_RANK:
        raise InputError(f"tensor: expected 1 to {_MAX_RANK} dimensions, got {tensor.dim()}; "
                         "merge dimensions with a view")
    if swizzle not in SWIZZLE_BYTES:
        raise InputError(f"swizzle: expected one of {list(SWIZZLE_BYTES)}, got {swizzle!r}")
    box = tuple(int(b) for b in box)
    if len(box) != tensor.dim():
        raise InputError(f"box: expected {tensor.dim()} entries (one per dimension of a tensor of shape "
                         f"{tuple(tensor.shape)}), got {len(box)}")
    if any(not 1 <= b <= _MAX_BOX for b in box):
        raise InputError(f"box: expected every entry in 1..{_MAX_BOX}, got {box}; split the tile into several copies")
    if any(n == 0 for n in tensor.shape):
        raise InputError(f"tensor: expected no empty dimension, got shape {tuple(tensor.shape)}")
    if tensor.stride(-1) != 1:
        raise InputError(f"tensor: expected the last dimension contiguous (stride 1), got strides "
                         f"{tuple(tensor.stride())}; use .contiguous()")
    element = tensor.element_size()
    address = tensor.data_ptr()
    if address % 16:
        raise InputError(f"tensor: expected a 16-byte aligned address, got {address:#x} (offset view?); "
                         "use .clone() or a view that starts on 16 bytes")
    dims = tuple(reversed(tensor.shape))
    strides = tuple(s * element for s in reversed(tensor.stride()[:-1]))
    if any(s % 16 or s <= 0 or s >= 2**40 for s in strides):
        raise InputError(f"tensor: expected every stride but the last to be a positive multiple of 16 bytes, got "
                         f"{tuple(s * element for s in tensor.stride())} bytes; pad the inner dimension")
    inner_bytes = box[-1] * element
    if inner_bytes % 16:
        raise InputError(f"box: expected the last entry to span a multiple of 16 bytes, got {box[-1]} x {element} "
                         f"= {inner_bytes} bytes")
    width = SWIZZLE_BYTES[swizzle]
    if width is not None and inner_bytes > width:
        raise InputError(f"box: with swizzle {swizzle} the last entry may span at most {width} bytes, got "
                         f"{inner_bytes}; use a narrower box and several copies")
    return TensorMapSpec(_DATA_TYPES[tensor.dtype], address, tuple(int(d) for d in dims), strides,
                         tuple(reversed(box)), swizzle, element)


def _driver():
    try:
        from cuda.bindings import driver
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise RuntimeError(f"TMA descriptors need cuda-bindings ({exc}); install with pip install -e '.[cuda13]'") \
            from exc
    return driver


_INITIALIZED: set[int] = set()  # drivers (by id) already through cuInit


def encode(spec: TensorMapSpec, driver=None) -> bytes:
    """The 128 bytes of the CUtensorMap for ``spec`` (needs the CUDA driver, i.e. a GPU host)."""
    cu = driver or _driver()
    if id(cu) not in _INITIALIZED:  # once per process: an attention call builds three maps
        (status,) = cu.cuInit(0)
        if status != cu.CUresult.CUDA_SUCCESS:
            raise RuntimeError(f"cuInit failed: {status}")
        _INITIALIZED.add(id(cu))
    swizzle = "NONE" if spec.swizzle == "none" else spec.swizzle
    status, tensor_map = cu.cuTensorMapEncodeTiled(
        getattr(cu.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{spec.data_type}"),
        spec.rank,
        spec.address,
        [cu.cuuint64_t(d) for d in spec.dims],
        [cu.cuuint64_t(s) for s in spec.strides],
        [cu.cuuint32_t(b) for b in spec.box],
        [cu.cuuint32_t(1)] * spec.rank,
        cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE,
        getattr(cu.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{swizzle}"),
        cu.CUtensorMapL2promotion.CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
        cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,  # out-of-bounds elements read as zeros
    )
    if status != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"cuTensorMapEncodeTiled failed ({status}) for {spec}")
    return ctypes.string_at(tensor_map.getPtr(), TENSOR_MAP_BYTES)


@dataclass(frozen=True, eq=False)
class TensorMap(Struct):
    """A launch argument holding one CUtensorMap; keeps the described tensor alive."""

    spec: TensorMapSpec | None = None
    tensor: torch.Tensor | None = None


def tensor_map(tensor: torch.Tensor, box, swizzle: str = "128B", driver=None) -> TensorMap:
    """The TMA descriptor of ``tensor`` for copies of ``box`` (torch order), ready to pass to a launch."""
    if not tensor.is_cuda and driver is None:
        raise InputError(f"tensor: expected a CUDA tensor, got one on {tensor.device}; move it with .cuda()")
    spec = tensor_map_spec(tensor, box, swizzle)
    return TensorMap(encode(spec, driver), TENSOR_MAP_ALIGN, spec, tensor)
