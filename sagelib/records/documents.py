"""Result documents: every schema sagelib writes, listed once, and the one loader for ``data/results/``.

A recorded result is a JSON document whose ``schema`` field names what it holds (``sagelib.bench/1``).
:data:`REGISTRY` lists every schema a module writes today and the older ones still read; the
modules that write a document take its name from here, so a writer and its readers cannot spell
it two ways. :func:`load_all`, :func:`latest` and :func:`newest_file` find recordings by schema
and file stem; :func:`schema_of` names a document's schema or says which are known.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

from sagelib import paths
from sagelib.errors import SchemaError

RESULTS_DIR = paths.RESULTS_DIR


@dataclass(frozen=True)
class Schema:
    """One kind of result document: its name, what writes it, what it holds."""

    id: str  #: e.g. "sagelib.bench/1"
    writer: str  #: the command or module that writes it
    holds: str


BENCH = Schema("sagelib.bench/1", "sagelib bench", "attention backends timed on shapes, with peers' ratios")
QUANTIZERS = Schema("sagelib.quantizers/1", "sagelib bench --suite quant",
                    "the quantizers' bandwidth against the card's copy bandwidth")
NCU = Schema("sagelib.ncu/1", "notebook 05_profile, sagelib profile ncu", "Nsight Compute summaries per kernel")
MICROBENCH = Schema("sagelib.microbench/1", "python -m sagelib.measure.microbench", "the unit rates Phase 1 models")
SWEEP_SM90 = Schema("sagelib.sweep-sm90/1", "sagelib sweep", "Hopper kernel build variants against the default")
SOFTMAX_BESIDE = Schema("sagelib.softmax-beside/3", "sagelib study softmax --beside",
                        "the softmax step alone and beside another warpgroup's tensor work")
QUANT_BREAKDOWN = Schema("sagelib.quant_breakdown/1", "sagelib study quant-breakdown",
                         "the short call pass by pass, and each fusion's ceiling")
RUN = Schema("sagelib.run/1", "sagelib gpu-run --record", "a GPU run of every notebook: run.json and results")
SASS_EXP_PASS = Schema("sagelib.sass_exp_pass/1", "sagelib kernels sass", "instructions per exp2 in each exp pass")
PARITY_GRID = Schema("sagelib.parity-grid/1", "sagelib parity-grid",
                     "every parity case of our kernels against the contract")
SASS_FINGERPRINT = Schema("sagelib.sass_fingerprint/1", "sagelib kernels fingerprint --json",
                          "one sha256 of the SASS of each built kernel instance per architecture")
PEER_PARITY = Schema("sagelib.peer-parity/1", "sagelib parity --against sage2",
                     "the contract and our kernels against the real SageAttention2, stage by stage")
HOST_OVERHEAD = Schema("sagelib.host_overhead/1", "sagelib bench --host-overhead",
                       "host time per call of our backends and SDPA, and TOPS back to back against synced")
FP8_ANCHOR = Schema("sagelib.fp8-anchor/1", "python3 scripts/fp8_anchor.py",
                    "cuDNN's FP8 attention beside ours: error against float64, and its graph's time alone")

CURRENT = (BENCH, QUANTIZERS, NCU, MICROBENCH, SWEEP_SM90, SOFTMAX_BESIDE, QUANT_BREAKDOWN, RUN, SASS_EXP_PASS,
           SASS_FINGERPRINT, PEER_PARITY, PARITY_GRID,
           HOST_OVERHEAD, FP8_ANCHOR)
#: the softmax-beside documents before the D64 kind (/1) and the rates alone (/2); still read
SOFTMAX_BESIDE_OLDER = ("sagelib.softmax-beside/1", "sagelib.softmax-beside/2")
#: schemas of recordings kept in data/results/ that no module writes any more
RETIRED = (*SOFTMAX_BESIDE_OLDER, "sagelib.contract_study/1",
           "sagelib.fused-q-ab/1", "sagelib.mma-ab/1", "sagelib.profile-run/1", "sagelib.quantizer_ab/1",
           "sagelib.sm90-runs/1", "sagelib.fp8-anchor-accuracy/1")
REGISTRY: dict[str, Schema | None] = {s.id: s for s in CURRENT} | {name: None for name in RETIRED}


def schema_of(document) -> str:
    """The ``schema`` a document names; SchemaError when it names none or one this registry does not know."""
    name = document.get("schema") if isinstance(document, dict) else None
    if name not in REGISTRY:
        raise SchemaError(f"expected a result document naming one of {sorted(REGISTRY)} in its 'schema' field, "
                          f"got {name!r}; is this a sagelib result file?")
    return name


def resolve(directory: str | Path) -> Path:
    """A results folder as given, relative to the repository root when not absolute."""
    directory = Path(directory)
    return directory if directory.is_absolute() else paths.REPO_ROOT / directory


def load_all(directory: str | Path = RESULTS_DIR, schema: str | tuple[str, ...] = BENCH.id,
             stem: str | None = None) -> list[tuple[dict, Path]]:
    """Every readable document of ``schema`` (one, or any of several) in ``directory`` (named
    ``*-<stem>.json`` if given), oldest first by ``created_utc``."""
    schemas = (schema,) if isinstance(schema, str) else tuple(schema)
    unknown = [s for s in schemas if s not in REGISTRY]
    if unknown:
        raise SchemaError(f"schema: {unknown} not in sagelib.records.documents.REGISTRY; add it there first")
    directory = resolve(directory)
    found = []
    pattern = f"*-{stem}.json" if stem else "*.json"
    for path in sorted(directory.glob(pattern)) if directory.is_dir() else []:
        try:
            document = json.loads(path.read_text())
        except (OSError, json.JSONDecodeError):
            continue
        if isinstance(document, dict) and document.get("schema") in schemas:
            found.append((document, path))
    return sorted(found, key=lambda item: item[0].get("created_utc", ""))


def latest(directory: str | Path = RESULTS_DIR, schema: str = BENCH.id,
           stem: str | None = None, hopper_off: bool | None = False) -> tuple[dict | None, Path | None]:
    """The most recent recording of ``schema`` (by its ``created_utc``), or (None, None).

    ``stem`` picks one kind of recording by its file name (``performance`` for notebook 04's sweep).
    ``hopper_off``: only recordings of runs with the Hopper paths off (True), only the others (False, the
    default: a run with them off stands for a card without wgmma and lacks the Hopper rows), or any (None).
    """
    found = [item for item in load_all(directory, schema, stem)
             if hopper_off is None or recorded_with_hopper_off(item[0]) == hopper_off]
    return found[-1] if found else (None, None)


def recorded_with_hopper_off(document: dict) -> bool:
    """Whether ``document`` was recorded with the Hopper paths off (``sagelib gpu-run --no-hopper``)."""
    said = [document.get("hopper_paths"), (document.get("environment") or {}).get("hopper_paths")]
    return any(str(s).startswith("off") for s in said if s) or "--no-hopper" in str(document.get("command", ""))


def newest_file(stem: str, suffix: str, directory: str | Path = RESULTS_DIR) -> Path | None:
    """The last by name (names start with the date) of ``*-{stem}{suffix}`` in ``directory``, or None."""
    found = sorted(Path(directory).glob(f"*-{stem}{suffix}"))
    return found[-1] if found else None


def finite_only(value):
    """``value`` (a JSON-shaped document) with every NaN or infinite float replaced by None, and how many were:
    for documents whose figures may come from a broken build (an ablation's output), which strict JSON refuses."""
    if isinstance(value, float):
        return (value, 0) if math.isfinite(value) else (None, 1)
    if isinstance(value, dict):
        pairs = [(key, finite_only(item)) for key, item in value.items()]
        return {key: item for key, (item, _) in pairs}, sum(n for _, (_, n) in pairs)
    if isinstance(value, (list, tuple)):
        items = [finite_only(item) for item in value]
        return [item for item, _ in items], sum(n for _, n in items)
    return value, 0


def write_json(document: dict, path: str | Path) -> Path:
    """Write a document as strict JSON (no NaN) at ``path``; returns the path."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=1, allow_nan=False, default=str) + "\n")
    return path
