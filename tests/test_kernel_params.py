"""The kernels' parameter lists have one source, kernels/include/params.cuh (and attn_sm90/params.cuh): each
kernel's signature lists its struct's members, the launchers' arguments follow the struct, and the layout the
Python side computes is the one the compiler gives. No GPU needed (the layout test needs nvcc)."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest

from sagelib.cuda import params
from sagelib.cuda.build import INCLUDE_DIR, KERNELS_DIR
from sagelib.cuda.launch import Struct, kernel_argument


@pytest.mark.parametrize("struct", sorted(params.KERNELS))
def test_each_kernel_signature_is_its_struct(struct):
    """Names, types (qualifiers aside) and order: editing the header or the kernel alone fails here."""
    file, kernel = params.KERNELS[struct]
    signature = params.parse_kernel_signature((KERNELS_DIR / file).read_text(), kernel)
    assert [(f.name, f.declared) for f in signature] == [(f.name, f.declared) for f in params.fields(struct)]


def test_the_parser_reads_declarations_as_c_does():
    assert params.normalise("const u16 *__restrict__ x") == ("u16 *", "x")
    assert params.normalise("const __grid_constant__ TensorMap q_map") == ("TensorMap", "q_map")
    assert params.normalise("i64 o_sb") == ("i64", "o_sb")
    fields = params.parse_struct("struct S {\n  int a;  // c\n  const float *b;\n  double c;\n};", "S")
    assert [(f.name, f.ctype) for f in fields] == [("a", "int"), ("b", "ptr"), ("c", "double")]
    with pytest.raises(ValueError):
        params.parse_struct("struct S { short a; };", "S")
    assert params.parse_enum("enum E { A = 1, B = 0x4, };", "E") == {"A": 1, "B": 4}


def test_flag_bits_come_from_the_header():
    from sagelib.backends.kernels import operands

    text = (INCLUDE_DIR / "params.cuh").read_text()
    assert "ATTN_CAUSAL = 1" in text and "ATTN_PER_THREAD = 2" in text and "ATTN_OUT_BF16 = 4" in text
    assert params.attn_flags() == {"ATTN_CAUSAL": operands.ATTN_CAUSAL, "ATTN_PER_THREAD": operands.ATTN_PER_THREAD,
                                   "ATTN_OUT_BF16": operands.ATTN_OUT_BF16}


def _values(struct):
    values = {}
    for f in params.fields(struct):
        values[f.name] = {"ptr": None, "TensorMap": Struct(bytes(128)), "float": 1.5, "double": 0.25}.get(f.ctype, 3)
    return values


@pytest.mark.parametrize("struct", sorted(params.KERNELS))
def test_arguments_follow_the_struct_with_the_sizes_of_its_c_types(struct):
    """What launch() hands CuPy: one value per member, each of its C type's size, at C's offsets."""
    args = params.arguments(struct, **_values(struct))
    members = params.fields(struct)
    assert len(args) == len(members)
    offsets, size, align = params.layout(struct)
    at = 0
    for f, arg in zip(members, args):
        expected = {"int": np.int32, "float": np.float32, "double": np.float64, "i64": np.int64}.get(f.ctype)
        if expected:
            assert type(arg) is expected and type(kernel_argument(arg)) is expected, f.name
        converted = np.asarray(kernel_argument(arg))
        nbytes, a = params.SIZES[f.ctype]
        assert converted.nbytes == nbytes, f.name
        at = -(-at // a) * a
        assert at == offsets[f.name], f.name
        at += nbytes
    assert -(-at // align) * align == size


def test_arguments_refuse_missing_and_unknown_members():
    values = _values("QuantQkParams")
    with pytest.raises(TypeError, match="missing"):
        params.arguments("QuantQkParams", **{k: v for k, v in values.items() if k != "n_groups"})
    with pytest.raises(TypeError, match="unknown"):
        params.arguments("QuantQkParams", **values, extra=1)
    with pytest.raises(TypeError):
        params.arguments("QuantQkParams", **{**values, "x": 5})


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc not installed")
def test_layout_is_the_compilers(tmp_path):
    """offsetof and sizeof of every member, as nvcc lays the structs out, against params.layout."""
    lines = ['#include "attn_sm90/params.cuh"', "#include <cstddef>"]
    for struct in sorted(params.HEADERS):
        offsets, size, align = params.layout(struct)
        lines.append(f"static_assert(sizeof({struct}) == {size} && alignof({struct}) == {align}, \"{struct}\");")
        lines += [f"static_assert(offsetof({struct}, {name}) == {at}, \"{struct}.{name}\");"
                  for name, at in offsets.items()]
    unit = tmp_path / "layout.cu"
    unit.write_text("\n".join(lines) + "\n")
    proc = subprocess.run([shutil.which("nvcc"), "-std=c++17", "-gencode", "arch=compute_90a,code=sm_90a", "-cubin",
                           "-o", str(tmp_path / "l.cubin"),
                           f"-I{INCLUDE_DIR}", str(unit)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
