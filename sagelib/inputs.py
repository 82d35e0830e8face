"""Canonical inputs: seeded, described, hashed.

The specifications live in ``data/canonical_inputs.yaml``. ``make`` draws q, k
and v on the CPU from the spec's seed (the same numbers on every machine), moves
them to the requested device, and returns them with a sha256 over the spec, the
shape and the bytes, so a report can name exactly what it ran on.
"""

from __future__ import annotations

import hashlib
import json
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
    batch: int = 1
    heads: int = 8
    tokens: int = 4096
    head_dim: int = 128
    kv_heads: int | None = None  #: None = heads (no GQA)
    kv_tokens: int | None = None  #: None = tokens

    @property
    def heads_kv(self) -> int:
        return self.kv_heads or self.heads

    @property
    def tokens_kv(self) -> int:
        return self.kv_tokens or self.tokens


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
