"""sagelib.cuda.tma: TMA descriptor requests checked without a GPU, encoding through a stand-in driver.

The real cuTensorMapEncodeTiled needs libcuda (a GPU host); it runs in
tests/test_hopper_smoke.py. Here a recording stand-in checks what we ask it for,
and the 128 bytes it returns travel as a 64-byte aligned by-value launch argument.
"""

import ctypes
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from sagelib.cuda import tma
from sagelib.cuda.launch import Struct, kernel_argument


def test_hnd_int8_tile_becomes_innermost_first_dims_and_byte_strides():
    k = torch.zeros(2, 3, 200, 128, dtype=torch.int8)
    spec = tma.tensor_map_spec(k, (1, 1, 128, 128))
    assert spec.dims == (128, 200, 3, 2)
    assert spec.strides == (128, 200 * 128, 3 * 200 * 128)
    assert spec.box == (128, 128, 1, 1)
    assert (spec.data_type, spec.rank, spec.box_bytes, spec.element_bytes) == ("UINT8", 4, 16384, 1)


def test_fp16_and_e4m3_element_sizes():
    v = torch.zeros(4, 64, dtype=torch.float16)
    spec = tma.tensor_map_spec(v, (8, 64))
    assert (spec.data_type, spec.strides, spec.box_bytes) == ("FLOAT16", (128,), 8 * 64 * 2)
    vt = torch.zeros(1, 2, 64, 256, dtype=torch.float8_e4m3fn)
    assert tma.tensor_map_spec(vt, (1, 1, 64, 128)).data_type == "UINT8"


@pytest.mark.parametrize("make, box, swizzle, message", [
    (lambda: torch.zeros(4, 128, dtype=torch.float16), (8, 128), "128B", "at most 128 bytes"),
    (lambda: torch.zeros(4, 100, dtype=torch.int8), (4, 96), "none", "multiple of 16 bytes"),
    (lambda: torch.zeros(4, 128, dtype=torch.int8).t(), (4, 4), "none", "stride 1"),
    (lambda: torch.zeros(512, 128, dtype=torch.int8), (512, 128), "128B", "1..256"),
    (lambda: torch.zeros(512, 128, dtype=torch.int8), (128,), "128B", "expected 2 entries"),
    (lambda: torch.zeros(4, 128, dtype=torch.int8), (4, 8), "none", "last entry to span a multiple of 16"),
    (lambda: torch.zeros(1, 1, 1, 1, 1, 16, dtype=torch.int8), (1,) * 5 + (16,), "none", "1 to 5 dimensions"),
    (lambda: torch.zeros(64, dtype=torch.int8)[1:], (16,), "none", "16-byte aligned"),
    (lambda: torch.zeros(4, 16, dtype=torch.float64), (4, 2), "none", "dtype one of"),
    (lambda: torch.zeros(4, 128, dtype=torch.int8), (4, 128), "256B", "swizzle: expected one of"),
])
def test_requests_the_driver_would_refuse_are_value_errors(make, box, swizzle, message):
    with pytest.raises(ValueError, match=message):
        tma.tensor_map_spec(make(), box, swizzle)


class _RecordingDriver:
    """Stands in for cuda.bindings.driver: records the call, returns a recognisable 128-byte map."""

    SUCCESS = "CUDA_SUCCESS"

    def __init__(self):
        named = lambda *names: SimpleNamespace(**{n: n for n in names})  # noqa: E731
        self.CUresult = named("CUDA_SUCCESS")
        self.CUtensorMapDataType = named("CU_TENSOR_MAP_DATA_TYPE_UINT8", "CU_TENSOR_MAP_DATA_TYPE_FLOAT16")
        self.CUtensorMapSwizzle = named("CU_TENSOR_MAP_SWIZZLE_NONE", "CU_TENSOR_MAP_SWIZZLE_128B")
        self.CUtensorMapInterleave = named("CU_TENSOR_MAP_INTERLEAVE_NONE")
        self.CUtensorMapL2promotion = named("CU_TENSOR_MAP_L2_PROMOTION_L2_256B")
        self.CUtensorMapFloatOOBfill = named("CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE")
        self.cuuint64_t = self.cuuint32_t = int
        self.calls = []
        self._buffer = (ctypes.c_uint8 * 128)(*range(128))

    def cuInit(self, flags):
        return (self.SUCCESS,)

    def cuTensorMapEncodeTiled(self, *args):
        self.calls.append(args)
        return self.SUCCESS, SimpleNamespace(getPtr=lambda: ctypes.addressof(self._buffer))


def test_encode_passes_the_spec_in_the_drivers_order():
    driver = _RecordingDriver()
    q = torch.zeros(6, 200, 128, dtype=torch.int8)
    spec = tma.tensor_map_spec(q, (1, 64, 128))
    data = tma.encode(spec, driver)
    assert data == bytes(range(128))
    (dtype, rank, address, dims, strides, box, elem_strides, interleave, swizzle, l2, oob), = driver.calls
    assert (dtype, rank, address) == ("CU_TENSOR_MAP_DATA_TYPE_UINT8", 3, q.data_ptr())
    assert (list(dims), list(strides), list(box), list(elem_strides)) == ([128, 200, 6], [128, 25600],
                                                                          [128, 64, 1], [1, 1, 1])
    assert (interleave, swizzle, oob) == ("CU_TENSOR_MAP_INTERLEAVE_NONE", "CU_TENSOR_MAP_SWIZZLE_128B",
                                          "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE")


def test_a_driver_error_is_raised_with_the_request():
    driver = _RecordingDriver()
    driver.cuTensorMapEncodeTiled = lambda *a: ("CUDA_ERROR_INVALID_VALUE", None)
    with pytest.raises(RuntimeError, match="CUDA_ERROR_INVALID_VALUE"):
        tma.encode(tma.tensor_map_spec(torch.zeros(4, 128, dtype=torch.int8), (4, 128)), driver)


def test_tensor_map_is_a_64_byte_aligned_128_byte_by_value_argument():
    driver = _RecordingDriver()
    tensor = torch.zeros(4, 64, dtype=torch.float16)
    arg = tma.tensor_map(tensor, (4, 64), driver=driver)
    assert isinstance(arg, Struct) and arg.tensor is tensor and arg.spec.box == (64, 4)
    packed = kernel_argument(arg)
    assert isinstance(packed, np.ndarray) and packed.size == 1 and packed.dtype.itemsize == 128
    assert packed.ctypes.data % 64 == 0 and packed.tobytes() == bytes(range(128))


def test_struct_rejects_sizes_that_are_not_whole_aligned_units():
    with pytest.raises(ValueError, match="multiple of align=64"):
        Struct(b"\0" * 100)
    with pytest.raises(ValueError, match="power of two"):
        Struct(b"\0" * 96, align=48)


def test_tensor_map_refuses_a_cpu_tensor_without_a_stand_in_driver():
    with pytest.raises(ValueError, match="CUDA tensor"):
        tma.tensor_map(torch.zeros(4, 128, dtype=torch.int8), (4, 128))


def test_the_enum_names_used_exist_in_cuda_bindings():
    driver = pytest.importorskip("cuda.bindings.driver", reason="cuda-bindings not installed (the cuda13 extra)")
    for data_type in set(tma._DATA_TYPES.values()):
        assert hasattr(driver.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{data_type}")
    for swizzle in tma.SWIZZLE_BYTES:
        assert hasattr(driver.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{'NONE' if swizzle == 'none' else swizzle}")
    assert hasattr(driver.CUtensorMapL2promotion, "CU_TENSOR_MAP_L2_PROMOTION_L2_256B")
    assert hasattr(driver.CUtensorMapFloatOOBfill, "CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE")
