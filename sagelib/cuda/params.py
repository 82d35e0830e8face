"""Kernel parameter lists and flag bits, read from the kernels' own headers.

``kernels/include/params.cuh`` (and ``kernels/include/attn_sm90/params.cuh`` for the sm_90a kernel) define one
plain C struct per ``__global__`` function, naming its parameters in order with their C types, and the enum
``AttnFlags`` of the attention kernels' flag bits. This module parses those headers (at first use) and is the only
place the launchers learn a kernel's parameter order and types from: :func:`arguments` turns keyword values into
the launch's argument tuple, each converted for its C type (``int`` -> numpy int32, ``float`` -> float32, ``double``
-> float64, ``i64`` -> int64, a pointer -> a tensor (its address) or None (null), ``TensorMap`` -> a
:class:`~sagelib.cuda.launch.Struct`). :func:`layout` gives the byte offsets C gives those members (the kernel's
param-space offsets). ``tests/test_kernel_params.py`` checks each kernel's signature against its struct.

The kernels take the parameters as a scalar list, not the struct by value: params.cuh says why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from sagelib.cuda.build import KERNELS_DIR
from sagelib.cuda.launch import Struct

#: header of each parameter struct (relative to kernels/include)
HEADERS = {
    "QuantQkParams": "params.cuh",
    "QuantKvParams": "params.cuh",
    "AttnMmaParams": "params.cuh",
    "AttnSm90Params": "attn_sm90/params.cuh",
}

#: kernel file and __global__ function each struct describes
KERNELS = {
    "QuantQkParams": ("quant_qk.cu", "quant_int8_kernel"),
    "QuantKvParams": ("quant_kv.cu", "quant_kv_kernel"),
    "AttnMmaParams": ("attn_mma.cu", "attn_mma_kernel"),
    "AttnSm90Params": ("attn_sm90.cu", "attn_sm90_kernel"),
}

#: C type -> (size, alignment) in bytes; every pointer is "ptr"
SIZES = {"ptr": (8, 8), "i64": (8, 8), "u64": (8, 8), "double": (8, 8), "int": (4, 4), "i32": (4, 4),
         "u32": (4, 4), "float": (4, 4), "TensorMap": (128, 64)}

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_QUALIFIERS = re.compile(r"\b(const|__restrict__|__grid_constant__|volatile)\b")


@dataclass(frozen=True)
class Field:
    name: str
    ctype: str  #: a key of SIZES ("ptr" for any pointer)
    declared: str  #: the C type as written, qualifiers dropped, e.g. "u16 *"


def normalise(declaration: str) -> tuple[str, str]:
    """``"const u16 *__restrict__ x"`` -> (``"u16 *"``, ``"x"``): the type without qualifiers, and the name."""
    text = " ".join(_QUALIFIERS.sub(" ", declaration).replace("*", " * ").split())
    m = re.fullmatch(r"(?P<type>[A-Za-z_]\w*(?: \*)*) (?P<name>[A-Za-z_]\w*)", text)
    if not m:
        raise ValueError(f"cannot read the declaration {declaration!r}")
    return m["type"].replace(" *", "*").replace("*", " *"), m["name"]


def _field(declaration: str) -> Field:
    declared, name = normalise(declaration)
    ctype = "ptr" if declared.endswith("*") else declared
    if ctype not in SIZES:
        raise ValueError(f"{name}: C type {declared!r} is none of {sorted(SIZES)}")
    return Field(name, ctype, declared)


def _source(relative: str) -> str:
    return _COMMENTS.sub("", (KERNELS_DIR / "include" / relative).read_text())


def parse_struct(text: str, name: str) -> tuple[Field, ...]:
    """The members of ``struct NAME { ... };`` in C source ``text`` (comments removed), in order."""
    m = re.search(r"\bstruct\s+" + re.escape(name) + r"\s*\{(?P<body>[^}]*)\}\s*;", _COMMENTS.sub("", text))
    if not m:
        raise ValueError(f"no struct {name} in the header")
    return tuple(_field(d) for d in m["body"].split(";") if d.strip())


def parse_enum(text: str, name: str) -> dict[str, int]:
    """The enumerators of ``enum NAME { A = 1, ... };`` (explicit values only)."""
    m = re.search(r"\benum\s+" + re.escape(name) + r"\s*\{(?P<body>[^}]*)\}\s*;", _COMMENTS.sub("", text))
    if not m:
        raise ValueError(f"no enum {name} in the header")
    values = {}
    for item in filter(None, (i.strip() for i in m["body"].split(","))):
        key, _, value = item.partition("=")
        values[key.strip()] = int(value.strip(), 0)
    return values


def parse_kernel_signature(text: str, kernel: str) -> tuple[Field, ...]:
    """The parameters of ``__global__ ... KERNEL(...)`` in a kernel file's source."""
    m = re.search(r"\b" + re.escape(kernel) + r"\s*\((?P<params>[^)]*)\)\s*\{", _COMMENTS.sub("", text))
    if not m:
        raise ValueError(f"no kernel {kernel} in the source")
    return tuple(_field(d) for d in m["params"].split(",") if d.strip())


@lru_cache(maxsize=None)
def fields(struct: str) -> tuple[Field, ...]:
    """The members of a parameter struct (HEADERS), read from its header."""
    if struct not in HEADERS:
        raise KeyError(f"{struct}: expected one of {sorted(HEADERS)}")
    return parse_struct(_source(HEADERS[struct]), struct)


@lru_cache(maxsize=None)
def attn_flags() -> dict[str, int]:
    """AttnFlags of params.cuh: ``{"ATTN_CAUSAL": 1, ...}``."""
    return parse_enum(_source("params.cuh"), "AttnFlags")


def layout(struct: str) -> tuple[dict[str, int], int, int]:
    """(member -> byte offset, size, alignment) as C lays the struct out: each member at its natural alignment."""
    offsets, at, align = {}, 0, 1
    for f in fields(struct):
        size, a = SIZES[f.ctype]
        at = -(-at // a) * a
        offsets[f.name] = at
        at += size
        align = max(align, a)
    return offsets, -(-at // align) * align, align


def _pointer(value, name):
    if value is None or hasattr(value, "data_ptr"):
        return value  # launch.kernel_argument: a tensor's address, or null
    raise TypeError(f"{name}: expected a tensor or None for a pointer member, got {type(value).__name__}")


def _tensor_map(value, name):
    if isinstance(value, Struct) and len(value.data) == 128:
        return value
    raise TypeError(f"{name}: expected a 128-byte Struct (sagelib.cuda.tma) for a TensorMap member")


#: C type -> how a member's value becomes its launch argument: numbers as the numpy scalar of the C type
#: (launch.kernel_argument passes numpy scalars as they are), pointers and tensor maps checked
_CONVERTERS = {"ptr": _pointer, "TensorMap": _tensor_map, "int": np.int32, "i32": np.int32, "u32": np.uint32,
               "i64": np.int64, "u64": np.uint64, "float": np.float32, "double": np.float64}


@lru_cache(maxsize=None)
def _plan(struct: str):
    """(member names, their set, (name, converter) per member in order), read once per struct."""
    members = fields(struct)
    names = tuple(f.name for f in members)
    steps = tuple((f.name, _CONVERTERS[f.ctype], f.ctype in ("ptr", "TensorMap")) for f in members)
    return names, frozenset(names), steps


def arguments(struct: str, **values) -> tuple:
    """The launch arguments of the kernel ``struct`` describes, in its header's order, each converted for its C
    type (numbers as numpy scalars of its size, pointer -> tensor or None, ``TensorMap`` -> its Struct); every
    member must be given by name, and nothing else."""
    names, name_set, steps = _plan(struct)
    if len(values) == len(names) and name_set.issuperset(values):
        return tuple(convert(values[name], name) if checked else convert(values[name])
                     for name, convert, checked in steps)
    missing = [n for n in names if n not in values]
    extra = sorted(set(values) - name_set)
    raise TypeError(f"{struct}: missing {missing}, unknown {extra} (kernels/include/{HEADERS[struct]})")
