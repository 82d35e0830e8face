"""Recorded schedule sweeps of the Hopper kernel: each build variant's speed against its baseline.

``sagelib sweep`` (formerly ``scripts/sweep_sm90.py``) times build variants of ``kernels/attn_sm90.cu``
on the same prepared inputs in one call and checks each output against the baseline build's; its JSON (schema
``sagelib.sweep-sm90/1``) is kept in ``data/results/`` with the experiment-log record that cites
it. Ratios are taken inside one file only: absolute times drift between calls on a shared card.
Leave-one-out builds (variants named ``ablate: ...``) compute wrong outputs on purpose and are
not alternatives, so they are left out here.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path

from sagelib.errors import InputError
from sagelib.records import documents

SCHEMA = documents.SWEEP_SM90.id
#: Output agreement with the baseline build below which a variant counts as the same computation.
SAME_OUTPUT_REL_L1 = 2e-3


@dataclass(frozen=True)
class VariantRatio:
    experiment: str    # the file's name without date and card, e.g. "sm90-sweep-defer-pv"
    variant: str       # the variant's name in the file (with its ring depth when it is not the baseline's)
    shape: str         # e.g. "B2 H32 N16384 D128 causal"
    speedup: float     # baseline ms / variant ms, the mean over the file's repeats
    low: float         # smallest and largest over the repeats
    high: float
    repeats: int
    same_output: bool  # every repeat agreed with the baseline's output (else its time does not count)


def baseline_variant(rows: list[dict]) -> str:
    """The variant the others are compared with: ``default``, else the one marked ``(former default)``."""
    names = {row["variant"] for row in rows}
    if "default" in names:
        return "default"
    former = sorted(name for name in names if "(former default)" in name)
    if not former:
        raise InputError(f"rows: expected a 'default' or a '(former default)' variant, got {sorted(names)}")
    return former[0]


def ratios(document: dict, experiment: str) -> list[VariantRatio]:
    """Every non-baseline variant of one sweep document, per shape, against the baseline's deepest ring."""
    rows = [row for row in document.get("rows", []) if not row["variant"].startswith("ablate:")]
    if not rows:
        return []
    base_name = baseline_variant(rows)
    # A shape listed twice in one call is a repeat too: number each (shape, variant, stages)'s
    # occurrences, so every row meets the baseline row of its own pass.
    passes, seen = [], {}
    for row in rows:
        key = (row["shape"], row["variant"], row["stages"], row.get("repeat", 1))
        seen[key] = seen.get(key, 0) + 1
        passes.append((row.get("repeat", 1), seen[key]))
    baseline: dict[tuple, dict] = {}  # (shape, pass) -> the baseline row with the most stages
    for row, at in zip(rows, passes):
        key = (row["shape"], at)
        if row["variant"] == base_name and (key not in baseline or row["stages"] > baseline[key]["stages"]):
            baseline[key] = row
    grouped: dict[tuple[str, str], list[tuple[float, bool]]] = {}
    for row, at in zip(rows, passes):
        base = baseline.get((row["shape"], at))
        if base is None or row is base:
            continue
        name = row["variant"] if row["variant"] != base_name else f"{row['variant']}, {row['stages']} stages"
        diff = row.get("rel_l1_to_default")
        same = diff is not None and not math.isnan(diff) and diff < SAME_OUTPUT_REL_L1 and not row.get("invalid")
        grouped.setdefault((name, row["shape"]), []).append((base["ms"] / row["ms"], same))
    return [VariantRatio(experiment, name, shape, sum(s for s, _ in values) / len(values),
                         min(s for s, _ in values), max(s for s, _ in values), len(values),
                         all(same for _, same in values))
            for (name, shape), values in grouped.items()]


def experiment_name(path: Path) -> str:
    """``2026-11-29-nvidia-h200-sm90-sweep-defer-pv.json`` -> ``sm90-sweep-defer-pv``."""
    match = re.search(r"(sm90-[\w.-]+)$", path.stem)
    return match.group(1) if match else path.stem


def load_ratios(directory: str | Path = documents.RESULTS_DIR) -> list[VariantRatio]:
    """The ratios of every recorded sweep in ``directory``, oldest file first."""
    found = []
    for document, path in documents.load_all(directory, SCHEMA):
        found += ratios(document, experiment_name(path))
    return found


@dataclass(frozen=True)
class BestOfRecord:
    experiment: str
    variant: str                # the variant with the highest mean speedup over ``shapes``
    variants: int               # how many same-output variants the file timed on those shapes
    speedup: dict[str, float]   # shape -> that variant's speedup (shapes it was not timed on are missing)


def best_per_experiment(found: list[VariantRatio], shapes: list[str]) -> list[BestOfRecord]:
    """Each recorded sweep's best same-output variant over ``shapes`` (mean speedup over the shapes it ran),
    in file order: one row per experiment-log record, where the list of every variant runs long."""
    by_experiment: dict[str, dict[str, dict[str, float]]] = {}
    for r in found:
        if r.same_output and r.shape in shapes:
            by_experiment.setdefault(r.experiment, {}).setdefault(r.variant, {})[r.shape] = r.speedup
    best = []
    for experiment, variants in by_experiment.items():
        name, speedup = max(variants.items(), key=lambda item: sum(item[1].values()) / len(item[1]))
        best.append(BestOfRecord(experiment, name, len(variants), speedup))
    return best


def variant_table(found: list[VariantRatio], shapes: list[str]) -> list[dict]:
    """Every same-output variant over ``shapes``, in file order: one row per (experiment, variant) with its speedup
    over the baseline of the same call per shape ("" where it did not run that shape); too many rows for a chart."""
    by_key: dict[tuple[str, str], dict[str, float]] = {}
    for r in found:
        if r.same_output and r.shape in shapes:
            by_key.setdefault((r.experiment, r.variant), {})[r.shape] = r.speedup
    return [{"sweep": label(experiment, "").removesuffix(": "), "variant": variant,
             **{shape: (f"{speedups[shape]:.3f}x" if shape in speedups else "") for shape in shapes}}
            for (experiment, variant), speedups in by_key.items()]


def label(experiment: str, variant: str) -> str:
    """A chart label for one variant: ``"defer-pv: <variant>"`` from the file's experiment name."""
    return f"{experiment.removeprefix('sm90-sweep').strip('-') or 'first sweep'}: {variant}"


def three_consumer_rows(document: dict, variant: str = "three consumers, 6 stages") -> list[dict]:
    """The head_dim-64 A/B (``*-sm90-sweep-d64-three-consumers.json``): ``variant`` against the former
    default (two consumers) of the same shape, in kernel-only TOPS."""
    two = {r["shape"]: r for r in document["rows"] if "former default" in r["variant"]}
    return [{"shape": r["shape"], "ring stages": r["stages"], "two consumers (TOPS)": two[r["shape"]]["tops"],
             "three consumers (TOPS)": r["tops"], "three / two": r["tops"] / two[r["shape"]]["tops"],
             "same bits": r["bit_identical_to_default"]}
            for r in document["rows"] if r["variant"] == variant]


def tile_change_rows(document: dict, after_prefix: str = "d7ce787") -> tuple[list[dict], str, str]:
    """The tile-change A/B (``*-sm90-sweep-tile-change.json``): (rows, before variant, after variant).

    Only the file's last call (highest ``repeat``) counts: it timed the final build. ``before`` is the
    variant named "former default", ``after`` the one whose name starts with ``after_prefix``.
    """
    last = max(r["repeat"] for r in document["rows"])
    final = [r for r in document["rows"] if r["repeat"] == last]
    before = {r["shape"]: r for r in final if "former default" in r["variant"]}
    after = next(r["variant"] for r in final if r["variant"].startswith(after_prefix))
    rows = [{"shape": r["shape"], "before (TOPS)": before[r["shape"]]["tops"], "after (TOPS)": r["tops"],
             "after / before": r["tops"] / before[r["shape"]]["tops"], "same bits": r["bit_identical_to_default"]}
            for r in final if r["variant"] == after]
    return rows, next(iter(before.values()))["variant"], after


def role_split_rows(document: dict) -> list[dict]:
    """The built role split (``*-sm90-sweep-role-split.json``): each variant's kernel-only TOPS and ratio."""
    return [{"shape": r["shape"], "variant": r["variant"].replace("default", "two consumers (the kernel)"),
             "kernel-only TOPS": r["tops"], "against the kernel": r["vs_preset"], "same bits": r["bit_identical"]}
            for r in document["rows"]]
