"""Canonical inputs: seeded, described, hashed.

The specifications live in ``data/canonical_inputs.yaml``. ``make`` draws q, k
and v on the CPU from the spec's seed (the same numbers on every machine), moves
them to the requested device, and returns them with a sha256 over the spec, the
shape and the bytes, so a report can name exactly what it ran on.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

import torch
import yaml

from sagelib import paths
from sagelib.errors import InputError

SPEC_FILE = paths.DATA_DIR / "canonical_inputs.yaml"
KINDS = ("gaussian", "k_outliers", "heavy_tails")
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16, "float16": torch.float16, "bfloat16": torch.bfloat16}


@dataclass(frozen=True)
class InputSpec:
    name: str
    kind: str
    seed: int
    description: str
    outlier_strength: float = 0.0
    degrees_of_freedom: int = 3
    default_tokens: int | None = None


@dataclass(frozen=True)
class Shape:
    """One attention problem: batch, query heads, query tokens, head_dim; K/V heads and tokens when they differ.

    The one shape every part of sagelib uses (canonical inputs, sweeps, benches, profiles). ``kv_heads`` and
    ``kv_tokens`` are keyword-only and None when equal to ``heads`` and ``tokens``. A bench document stores a
    shape as :meth:`record` (``batch, heads, seq_q, seq_kv, head_dim``) and reads it back with :meth:`from_record`.
    """

    batch: int = 1
    heads: int = 8
    tokens: int = 4096
    head_dim: int = 128
    kv_heads: int | None = field(default=None, kw_only=True)  #: None = heads (no GQA)
    kv_tokens: int | None = field(default=None, kw_only=True)  #: None = tokens

    def __post_init__(self):
        # one spelling per problem: a K/V size equal to the query side is the default, not a second shape
        if self.kv_heads == self.heads:
            object.__setattr__(self, "kv_heads", None)
        if self.kv_tokens == self.tokens:
            object.__setattr__(self, "kv_tokens", None)

    @property
    def heads_kv(self) -> int:
        return self.kv_heads or self.heads

    @property
    def tokens_kv(self) -> int:
        return self.kv_tokens or self.tokens

    seq_q = property(lambda self: self.tokens, doc="query tokens (the name bench documents use)")
    seq_kv = property(lambda self: self.tokens_kv, doc="key/value tokens (the name bench documents use)")

    @property
    def label(self) -> str:
        n = f"N{self.seq_q}" if self.seq_q == self.seq_kv else f"Nq{self.seq_q} Nkv{self.seq_kv}"
        gqa = f"/{self.heads_kv}" if self.kv_heads else ""
        return f"B{self.batch} H{self.heads}{gqa} {n} D{self.head_dim}"

    @property
    def spec(self) -> str:
        """The ``B:H:N:D`` (or ``B:H:NQ:NKV:D``) spelling :func:`parse_shape` reads back."""
        if self.seq_q == self.seq_kv:
            return f"{self.batch}:{self.heads}:{self.seq_q}:{self.head_dim}"
        return f"{self.batch}:{self.heads}:{self.seq_q}:{self.seq_kv}:{self.head_dim}"

    def record(self) -> dict:
        """The shape as a bench document stores it (``heads_kv`` only where K/V has fewer heads)."""
        out = {"batch": self.batch, "heads": self.heads, "seq_q": self.seq_q, "seq_kv": self.seq_kv,
               "head_dim": self.head_dim}
        return out | ({"heads_kv": self.kv_heads} if self.kv_heads else {})

    @classmethod
    def from_record(cls, record: dict) -> "Shape":
        """The shape of a bench document's record (:meth:`record`'s keys)."""
        return cls(record["batch"], record["heads"], record["seq_q"], record["head_dim"],
                   kv_tokens=record["seq_kv"], kv_heads=record.get("heads_kv"))


_SHAPE_HELP = "B:H:N:D or B:H:NQ:NKV:D with positive integers, e.g. 2:32:16384:128"


def parse_shape(text: str) -> Shape:
    """Read ``B:H:N:D`` or ``B:H:NQ:NKV:D``; an InputError naming the expected syntax otherwise."""
    parts = str(text).strip().split(":")
    if len(parts) not in (4, 5) or not all(re.fullmatch(r"[0-9]+", p) for p in parts):
        raise InputError(f"shape: expected {_SHAPE_HELP}, got {text!r}")
    values = [int(p) for p in parts]
    if min(values) <= 0:
        raise InputError(f"shape: every field must be positive ({_SHAPE_HELP}), got {text!r}")
    if len(values) == 4:
        return Shape(*values)
    b, h, nq, nkv, d = values
    return Shape(b, h, nq, d, kv_tokens=nkv)


def parse_shapes(text: str) -> list[Shape]:
    """A comma-separated list of shapes (see :func:`parse_shape`)."""
    items = [t for t in str(text).split(",") if t.strip()]
    if not items:
        raise InputError(f"shapes: expected a comma-separated list of {_SHAPE_HELP}, got {text!r}")
    return [parse_shape(t) for t in items]


#: the input dtypes a command line names
TIMED_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def parse_dtype(text: str) -> torch.dtype:
    if text not in TIMED_DTYPES:
        raise InputError(f"dtype: expected one of {', '.join(TIMED_DTYPES)}, got {text!r}")
    return TIMED_DTYPES[text]


def random_qkv(shape: Shape, dtype: torch.dtype, device: torch.device, layout: str, seed: int):
    """Fresh q, k, v drawn from N(0, 1) with a seeded generator on ``device`` (fast on a GPU; for timing).

    :func:`make` draws the canonical, hashed inputs the numerics are judged on; this draws the many
    rotated buffers a timing loop needs, on the device itself.
    """
    if layout not in ("HND", "NHD"):
        raise InputError(f"layout: expected 'HND' or 'NHD', got {layout!r}")
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)

    def sized(heads, tokens):
        return (shape.batch, heads, tokens, shape.head_dim) if layout == "HND" else \
            (shape.batch, tokens, heads, shape.head_dim)

    return tuple(torch.randn(s, generator=generator, device=device, dtype=torch.float32).to(dtype)
                 for s in (sized(shape.heads, shape.seq_q), sized(shape.heads_kv, shape.seq_kv),
                           sized(shape.heads_kv, shape.seq_kv)))


@dataclass
class Inputs:
    q: torch.Tensor
    k: torch.Tensor
    v: torch.Tensor
    spec: InputSpec
    shape: Shape
    dtype: str
    sha256: str = field(default="")

    def describe(self) -> dict:
        """One row for a report: name, shape, dtype, hash and what the input is."""
        s = self.shape
        return {
            "input": self.spec.name, "kind": self.spec.kind, "seed": self.spec.seed,
            "shape (B, H, N, D)": f"({s.batch}, {s.heads}, {s.tokens}, {s.head_dim})"
            + (f", kv ({s.heads_kv}, {s.tokens_kv})" if (s.kv_heads or s.kv_tokens) else ""),
            "dtype": self.dtype, "sha256": self.sha256[:16], "description": self.spec.description,
        }


def load_specs(path: Path | str = SPEC_FILE) -> dict[str, InputSpec]:
    path = Path(path)
    raw = yaml.safe_load(path.read_text())
    if not isinstance(raw, dict):
        raise InputError(f"{path}: expected a mapping of input name -> specification, got {type(raw).__name__}")
    specs = {}
    allowed = set(InputSpec.__dataclass_fields__) - {"name"}
    for name, entry in raw.items():
        unknown = set(entry) - allowed
        if unknown:
            raise InputError(f"{path}: input {name!r} has unknown field(s) {sorted(unknown)}; "
                             f"allowed: {sorted(allowed)}")
        for required in ("kind", "seed", "description"):
            if required not in entry:
                raise InputError(f"{path}: input {name!r} lacks {required!r}; add it")
        if entry["kind"] not in KINDS:
            raise InputError(f"{path}: input {name!r} has kind {entry['kind']!r}; expected one of {list(KINDS)}")
        specs[name] = InputSpec(name=name, **entry)
    return specs


def make(name: str, shape: Shape | None = None, dtype: str = "fp16", device: str | torch.device = "cpu",
         layout: str = "HND", **overrides) -> Inputs:
    """Draw the canonical input ``name`` (overrides replace spec fields, e.g. outlier_strength=8)."""
    specs = load_specs()
    if name not in specs:
        raise InputError(f"name: unknown canonical input {name!r}; expected one of {sorted(specs)}")
    if dtype not in DTYPES:
        raise InputError(f"dtype: expected one of {sorted(DTYPES)}, got {dtype!r}")
    if layout not in ("HND", "NHD"):
        raise InputError(f"layout: expected 'HND' or 'NHD', got {layout!r}")
    spec = replace(specs[name], **overrides)
    shape = shape or Shape(tokens=spec.default_tokens or Shape.tokens)
    q, k, v = _draw(spec, shape)
    torch_dtype = DTYPES[dtype]
    q, k, v = (x.to(torch_dtype) for x in (q, k, v))
    digest = _digest(spec, shape, dtype, (q, k, v))
    if layout == "NHD":
        q, k, v = (x.transpose(1, 2).contiguous() for x in (q, k, v))
    return Inputs(*(x.to(device) for x in (q, k, v)), spec=spec, shape=shape, dtype=dtype, sha256=digest)


def _draw(spec: InputSpec, shape: Shape):
    g = torch.Generator().manual_seed(spec.seed)
    b, d = shape.batch, shape.head_dim
    q_shape = (b, shape.heads, shape.tokens, d)
    kv_shape = (b, shape.heads_kv, shape.tokens_kv, d)
    if spec.kind == "heavy_tails":
        return tuple(_student_t(s, spec.degrees_of_freedom, g) for s in (q_shape, kv_shape, kv_shape))
    q = torch.randn(q_shape, generator=g)
    k = torch.randn(kv_shape, generator=g)
    v = torch.randn(kv_shape, generator=g)
    if spec.kind == "k_outliers":
        k = k + spec.outlier_strength * torch.randn((b, shape.heads_kv, 1, d), generator=g)
    return q, k, v


def _student_t(shape, dof: int, g: torch.Generator) -> torch.Tensor:
    """t = z / sqrt(chi2 / dof), chi2 a sum of dof squared normals."""
    z = torch.randn(shape, generator=g)
    chi2 = (torch.randn((dof, *shape), generator=g) ** 2).sum(0)
    return z / torch.sqrt(chi2 / dof)


def _digest(spec: InputSpec, shape: Shape, dtype: str, tensors) -> str:
    h = hashlib.sha256(json.dumps({"spec": asdict(spec), "shape": asdict(shape), "dtype": dtype},
                                  sort_keys=True).encode())
    for x in tensors:
        h.update(x.contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def tensor_sha256(x: torch.Tensor) -> str:
    """sha256 of a tensor's bytes (moved to the CPU), for provenance records."""
    return hashlib.sha256(x.detach().contiguous().cpu().view(torch.uint8).numpy().tobytes()).hexdigest()
