"""Closed prior work as data, and the vocabulary of its reopening rules.

``data/prior_work.yaml`` lists every experiment the earlier research closed: what
was tried, what it measured, what evidence survives, and the rule under which it
may be opened again. :func:`load` reads and checks the file; every problem is a
:class:`~sagelib.records.datafile.DataFileError` naming the file, line, entry and field.

A rule has a *kind* from :data:`RULE_KINDS` and a list of *conditions* from
:data:`CONDITIONS`. A proposal that matches a closed technique must declare every
listed condition true, with evidence, before it may proceed (enforced by
:mod:`sagelib.records.reopening`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from sagelib import paths
from sagelib.records.datafile import DataFileError, amount_text

REPO_ROOT = paths.REPO_ROOT
DEFAULT_PATH = REPO_ROOT / "data" / "prior_work.yaml"

RULE_KINDS = {
    "never_unchanged": (
        "do not repeat unchanged: a new attempt must state what differs from the closed one, "
        "and its fingerprint must differ from every fingerprint recorded for the technique"
    ),
    "requires_condition": (
        "reopen only when every listed condition is declared true, with evidence"
    ),
}

CONDITIONS = {
    "implementation_changed": (
        "the new attempt differs from the closed one in a stated way that could change the "
        "result (what changed, and why it matters)"
    ),
    "ownership_structure_changed": (
        "the state-ownership structure changes: the state that stayed private and live is "
        "transferred or partitioned differently between threads, warps or stages"
    ),
    "producer_consumer_pipeline_changed": (
        "the loads run in a different producer/consumer pipeline from the one the closed "
        "attempt lived in (for example warp-specialized producers with asynchronous barriers)"
    ),
    "staging_dataflow_changed": (
        "the shared-memory staging instructions or the dataflow through shared memory change, "
        "not only the padding or layout of the same loads"
    ),
    "inside_owned_attention_pipeline": (
        "the partial implementation is reused only inside an attention pipeline this project "
        "owns end to end, not as a separate pass in front of another kernel"
    ),
    "isa_toolchain_supports_instruction": (
        "the instruction set and the toolchain for the target accept the instruction "
        "(shown by a compile log for that target)"
    ),
    "capability_changed": (
        "the target gains the needed public capability (shown by documentation or by a "
        "compile-and-run log on the target)"
    ),
}

_FIELDS = ("id", "technique", "phase", "result", "evidence", "rule")


def normalize_technique(name: str) -> str:
    """Compact form used for matching: lowercase letters and digits only.

    ``"Register caps"``, ``"register_caps"`` and ``"register-caps"`` all become
    ``"registercaps"``.
    """
    return re.sub(r"[^0-9a-z]", "", str(name).lower())


@dataclass(frozen=True)
class Figure:
    """One measured number as the source log gave it (value, or a low..high range)."""

    quantity: str
    unit: str
    value: float | None
    low: float | None
    high: float | None
    approximate: bool
    scope: str
    measured_on: str

    def text(self) -> str:
        return (f"{self.quantity} {amount_text(self.__dict__)} {self.unit} "
                f"({self.scope}; measured on {self.measured_on})")

    def as_dict(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if v is not None}


@dataclass(frozen=True)
class Rule:
    kind: str
    conditions: tuple[str, ...]
    note: str | None

    def text(self) -> str:
        parts = [f"{self.kind}: {RULE_KINDS[self.kind]}"]
        parts += [f"condition {c}: {CONDITIONS[c]}" for c in self.conditions]
        if self.note:
            parts.append(self.note)
        return "; ".join(parts)

    def as_dict(self) -> dict:
        out = {"kind": self.kind, "conditions": list(self.conditions)}
        if self.note:
            out["note"] = self.note
        return out


@dataclass(frozen=True)
class Evidence:
    retained: tuple[str, ...]
    missing: tuple[str, ...]
    location: str
    note: str | None


@dataclass(frozen=True)
class PriorWork:
    id: str
    technique: str
    aliases: tuple[str, ...]
    phase: str | None
    summary: str
    figures: tuple[Figure, ...]
    qualitative: str | None
    evidence: Evidence
    source_complete: bool | None
    rule: Rule

    def matches(self, technique: str) -> bool:
        wanted = normalize_technique(technique)
        return any(normalize_technique(n) == wanted for n in (self.technique, *self.aliases))

    def result_text(self) -> str:
        pieces = [f.text() for f in self.figures]
        if self.qualitative:
            pieces.append(self.qualitative)
        return "; ".join(pieces) or "no figure recorded"


@dataclass(frozen=True)
class PriorWorkSet:
    """The loaded table: iterate it, look entries up, or turn it into display rows."""

    path: Path
    entries: tuple[PriorWork, ...]

    def __iter__(self):
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)

    def by_id(self, entry_id: str) -> PriorWork:
        for entry in self.entries:
            if entry.id == entry_id:
                return entry
        known = ", ".join(e.id for e in self.entries)
        raise KeyError(f"no prior-work entry {entry_id!r}; known ids: {known}")

    def matching(self, technique: str) -> list[PriorWork]:
        return [e for e in self.entries if e.matches(technique)]

    def table_rows(self) -> list[dict]:
        """One plain dict per entry, ready for a notebook table."""
        return [
            {
                "id": e.id,
                "technique": e.technique,
                "phase": e.phase or "not stated",
                "result": e.result_text(),
                "evidence retained": ", ".join(e.evidence.retained) or "none named",
                "evidence missing": ", ".join(e.evidence.missing) or "none named",
                "rule": e.rule.kind,
                "reopen when": "; ".join(CONDITIONS[c] for c in e.rule.conditions),
            }
            for e in self.entries
        ]


def _is_instance(value, types: tuple) -> bool:
    # bool is an int to Python, but true is not a number in these files
    if isinstance(value, bool) and bool not in types:
        return False
    return isinstance(value, types)


class _Checker:
    """Reads typed fields out of the parsed YAML and reports problems with a line number."""

    def __init__(self, path: Path, root_node: yaml.Node | None):
        self.path = path
        self.root_node = root_node

    def line_of(self, keys: tuple) -> int | None:
        node = self.root_node
        line = node.start_mark.line + 1 if node is not None else None
        for key in keys:
            child = None
            if isinstance(node, yaml.MappingNode):
                child = next((v for k, v in node.value if k.value == key), None)
            elif isinstance(node, yaml.SequenceNode) and isinstance(key, int) and key < len(node.value):
                child = node.value[key]
            if child is None:
                break
            node, line = child, child.start_mark.line + 1
        return line

    def fail(self, keys: tuple, problem: str, fix: str):
        raise DataFileError(self.path, self.line_of(keys), problem, fix)

    def where(self, keys: tuple) -> str:
        if len(keys) >= 2 and keys[0] == "entries":
            field = ".".join(str(k) for k in keys[2:]) or "(entry)"
            return f"entry {keys[1] + 1} field {field!r}"
        return f"field {'.'.join(str(k) for k in keys)!r}"

    def get(self, mapping: dict, keys: tuple, expected: type | tuple, *, optional=False):
        value = mapping.get(keys[-1]) if isinstance(mapping, dict) else None
        if value is None and optional:
            return None
        types = expected if isinstance(expected, tuple) else (expected,)
        if not _is_instance(value, types):
            names = " or ".join(t.__name__ for t in types)
            got = "nothing" if value is None else f"{type(value).__name__} {value!r}"
            self.fail(keys, f"{self.where(keys)}: expected {names}, got {got}",
                      f"give {keys[-1]!r} a {names} value (see the field guide at the top of the file)")
        return value

    def text_list(self, mapping: dict, keys: tuple) -> tuple[str, ...]:
        items = self.get(mapping, keys, list)
        for i, item in enumerate(items):
            if not isinstance(item, str) or not item.strip():
                self.fail(keys + (i,), f"{self.where(keys)} item {i + 1}: expected a non-empty string, got {item!r}",
                          "write each item as plain text")
        return tuple(items)


def _figure(check: _Checker, raw, keys: tuple) -> Figure:
    if not isinstance(raw, dict):
        check.fail(keys, f"{check.where(keys)}: expected a mapping, got {raw!r}",
                   "write the figure as {quantity: ..., value: ..., unit: ...}")
    number = (int, float)
    value = check.get(raw, keys + ("value",), number, optional=True)
    low = check.get(raw, keys + ("low",), number, optional=True)
    high = check.get(raw, keys + ("high",), number, optional=True)
    if (value is None) == (low is None or high is None) or (value is not None and (low, high) != (None, None)):
        check.fail(keys, f"{check.where(keys)}: give either 'value' or both 'low' and 'high'",
                   "use value: N for one number, or low: A, high: B for a range")
    return Figure(
        quantity=check.get(raw, keys + ("quantity",), str),
        unit=check.get(raw, keys + ("unit",), str),
        value=value, low=low, high=high,
        approximate=check.get(raw, keys + ("approximate",), bool),
        scope=check.get(raw, keys + ("scope",), str),
        measured_on=check.get(raw, keys + ("measured_on",), str),
    )


def _entry(check: _Checker, raw, index: int, seen: set) -> PriorWork:
    keys = ("entries", index)
    if not isinstance(raw, dict):
        check.fail(keys, f"entry {index + 1}: expected a mapping, got {raw!r}", "write the entry as a mapping")
    for name in _FIELDS:
        if name not in raw:
            check.fail(keys, f"entry {index + 1} ({raw.get('id', 'no id')}): missing field {name!r}",
                       f"add {name!r}; every entry needs {', '.join(_FIELDS)}")
    entry_id = check.get(raw, keys + ("id",), str)
    if entry_id in seen:
        check.fail(keys + ("id",), f"entry {index + 1}: duplicate id {entry_id!r}", "give every entry its own id")
    seen.add(entry_id)

    technique = check.get(raw, keys + ("technique",), dict)
    result = check.get(raw, keys + ("result",), dict)
    evidence = check.get(raw, keys + ("evidence",), dict)
    rule = check.get(raw, keys + ("rule",), dict)

    kind = check.get(rule, keys + ("rule", "kind"), str)
    if kind not in RULE_KINDS:
        check.fail(keys + ("rule", "kind"),
                   f"entry {index + 1} ({entry_id}) field 'rule.kind': unknown kind {kind!r}",
                   f"use one of {', '.join(RULE_KINDS)}")
    conditions = check.text_list(rule, keys + ("rule", "conditions"))
    if not conditions:
        check.fail(keys + ("rule", "conditions"),
                   f"entry {index + 1} ({entry_id}) field 'rule.conditions': empty",
                   "list at least one condition id (never_unchanged uses implementation_changed)")
    for condition in conditions:
        if condition not in CONDITIONS:
            check.fail(keys + ("rule", "conditions"),
                       f"entry {index + 1} ({entry_id}) field 'rule.conditions': unknown condition {condition!r}",
                       f"use ids from sagelib.records.prior_work.CONDITIONS: {', '.join(CONDITIONS)}")
    if kind == "never_unchanged" and "implementation_changed" not in conditions:
        check.fail(keys + ("rule", "conditions"),
                   f"entry {index + 1} ({entry_id}): rule never_unchanged without implementation_changed",
                   "list implementation_changed among the conditions of a never_unchanged rule")

    figures_raw = check.get(result, keys + ("result", "figures"), list)
    phase = raw.get("phase")
    if phase is not None and not isinstance(phase, str):
        check.fail(keys + ("phase",),
                   f"entry {index + 1} ({entry_id}) field 'phase': expected text or null, got {phase!r}",
                   "write the phase label (e.g. P0) or null where the source does not give one")
    source_complete = raw.get("source_complete")
    if source_complete is not None and not isinstance(source_complete, bool):
        check.fail(keys + ("source_complete",),
                   f"entry {index + 1} ({entry_id}) field 'source_complete': expected true, false or null, "
                   f"got {source_complete!r}",
                   "write true, false, or null when the source does not say")
    return PriorWork(
        id=entry_id,
        technique=check.get(technique, keys + ("technique", "key"), str),
        aliases=check.text_list(technique, keys + ("technique", "aliases")),
        phase=phase,
        summary=" ".join(check.get(result, keys + ("result", "summary"), str).split()),
        figures=tuple(_figure(check, f, keys + ("result", "figures", i)) for i, f in enumerate(figures_raw)),
        qualitative=check.get(result, keys + ("result", "qualitative"), str, optional=True),
        evidence=Evidence(
            retained=check.text_list(evidence, keys + ("evidence", "retained")),
            missing=check.text_list(evidence, keys + ("evidence", "missing")),
            location=check.get(evidence, keys + ("evidence", "location"), str),
            note=check.get(evidence, keys + ("evidence", "note"), str, optional=True),
        ),
        source_complete=source_complete,
        rule=Rule(kind, conditions, check.get(rule, keys + ("rule", "note"), str, optional=True)),
    )


def load(path: Path | str | None = None) -> PriorWorkSet:
    """Read and check ``data/prior_work.yaml`` (or ``path``)."""
    path = Path(path) if path is not None else DEFAULT_PATH
    text = path.read_text(encoding="utf-8")
    try:
        root_node = yaml.compose(text, Loader=yaml.SafeLoader)
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        raise DataFileError(path, line, f"not valid YAML ({getattr(exc, 'problem', exc)})",
                            "correct the YAML syntax at that line") from None
    check = _Checker(path, root_node)
    if not isinstance(data, dict) or data.get("schema") != 1:
        check.fail((), "expected a mapping with 'schema: 1' and 'entries'", "start the file with schema: 1")
    entries_raw = check.get(data, ("entries",), list)
    seen: set[str] = set()
    entries = tuple(_entry(check, raw, i, seen) for i, raw in enumerate(entries_raw))
    keys: dict[str, str] = {}
    for index, entry in enumerate(entries):
        for name in (entry.technique, *entry.aliases):
            compact = normalize_technique(name)
            if compact in keys and keys[compact] != entry.id:
                check.fail(("entries", index, "technique"),
                           f"entry {index + 1} ({entry.id}): technique name {name!r} also names {keys[compact]}",
                           "make every technique key and alias unique across entries")
            keys[compact] = entry.id
    return PriorWorkSet(path=path, entries=entries)
