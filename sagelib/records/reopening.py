"""Opening an experiment, with the closed-work rules enforced.

:func:`propose` is what ``sagelib log propose`` runs. Before a proposal is
written to the log it is checked against every closed experiment: the prior
work of ``data/prior_work.yaml`` and every experiment whose latest record in the
log is ``closed``.

1. **Fingerprint.** A proposal's fingerprint is its technique (normalized), the
   sha256 of its kernel sources (contents only, order- and rename-proof) and the
   sha256 of its configuration. If it equals the fingerprint of any closed
   experiment, it is refused outright: repeating a closed experiment unchanged is
   not allowed, whatever is declared.
2. **Technique.** If the technique matches a closed one (its key or an alias),
   the proposal must declare every condition of that experiment's rule, each
   with evidence; otherwise it is refused with the closed result and the rule.

Where a closed experiment's fingerprint is known
------------------------------------------------
The prior work predates this workbook: its sources are not in this repository
(for P0 they are lost), so its fingerprints are unknown and step 1 cannot compare
against them. That is why a ``never_unchanged`` rule also lists the condition
``implementation_changed``: with no recorded fingerprint, the proposer must say
what changed. Fingerprints *are* known for every experiment opened here: the
proposal record stores its fingerprint, and when that experiment is later
closed, every fingerprint recorded under its experiment id becomes a closed
fingerprint. From then on an unchanged repeat is refused mechanically.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from sagelib.errors import InputError
from sagelib.records import ledger, prior_work
from sagelib.records.datafile import (
    amount_text,
    canonical_json,
    repo_relative,
    sha256_bytes,
    sha256_file,
)


@dataclass(frozen=True)
class Declaration:
    condition: str
    evidence: str


@dataclass(frozen=True)
class ClosedExperiment:
    """A closed experiment as the check sees it, from prior work or from the log."""

    id: str
    source: str  # "prior_work" or "log"
    names: tuple[str, ...]
    result: str
    rule: prior_work.Rule
    fingerprints: tuple[dict, ...]

    def matches(self, technique: str) -> bool:
        wanted = prior_work.normalize_technique(technique)
        return any(prior_work.normalize_technique(n) == wanted for n in self.names)


@dataclass
class Decision:
    permitted: bool
    technique: str
    fingerprint: dict
    matched: list[ClosedExperiment] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)
    record: dict | None = None

    def report(self) -> str:
        """The text ``sagelib log propose`` prints."""
        head = "PERMITTED" if self.permitted else "REFUSED"
        lines = [f"{head}: proposal for technique {self.technique!r}"]
        for closed in self.matched:
            lines += [f"  closed experiment {closed.id} ({closed.source})",
                      f"    result: {closed.result}",
                      f"    rule:   {closed.rule.text()}"]
        lines += [f"  - {reason}" for reason in self.reasons]
        if self.record is not None:
            lines.append(f"  recorded as seq {self.record['seq']} (experiment {self.record['experiment']})")
        return "\n".join(lines)


def technique_key(technique: str, prior: prior_work.PriorWorkSet) -> str:
    """The name a record stores: a matching prior-work key, else the name in snake case."""
    matches = prior.matching(technique)
    if matches:
        return matches[0].technique
    return "_".join(re.findall(r"[0-9a-z]+", technique.lower()))


def parse_config(pairs: list[str] | None) -> dict:
    """``["blkq=64", "causal=true", "name=x"]`` -> dict; values read as JSON when they parse."""
    config: dict = {}
    for pair in pairs or []:
        key, sep, raw = pair.partition("=")
        if not sep or not key.strip():
            raise InputError(f"--config {pair!r}: expected KEY=VALUE (for example blkq=64)")
        if key in config:
            raise InputError(f"--config {key!r} given twice; give each key once")
        try:
            config[key] = json.loads(raw)
        except json.JSONDecodeError:
            config[key] = raw
    return config


def fingerprint(technique: str, sources: list[Path | str], config: dict,
                root: Path | str | None = None) -> dict:
    """The identity of an attempt: normalized technique, source contents, configuration."""
    root = Path(root) if root is not None else ledger.REPO_ROOT
    if not sources:
        raise InputError("fingerprint sources: expected at least one kernel source file, got none; "
                         "pass every file the attempt compiles (--fingerprint-source FILE ...)")
    listed = []
    for source in sources:
        relative = repo_relative(source, root)
        if not (root / relative).is_file():
            raise InputError(f"fingerprint source {str(source)!r}: no such file in the repository")
        listed.append({"path": relative, "sha256": sha256_file(root / relative)})
    listed.sort(key=lambda s: (s["sha256"], s["path"]))
    contents = sorted(s["sha256"] for s in listed)
    return {
        "technique": prior_work.normalize_technique(technique),
        "source_sha256": sha256_bytes(canonical_json(contents).encode()),
        "config_sha256": sha256_bytes(canonical_json(config).encode()),
        "sources": listed,
        "config": config,
    }


def _same_attempt(a: dict, b: dict) -> bool:
    keys = ("technique", "source_sha256", "config_sha256")
    return all(a.get(k) == b.get(k) for k in keys)


def _figures_text(measured: list[dict]) -> str:
    parts = []
    for item in measured:
        parts.append(f"{item['quantity']} {amount_text(item)} {item['unit']}".rstrip())
    return "; ".join(parts)


def closed_experiments(prior: prior_work.PriorWorkSet, records: list[dict]) -> list[ClosedExperiment]:
    """Prior work plus every log experiment whose latest record is ``closed``."""
    by_experiment: dict[str, list[dict]] = {}
    for record in records:
        by_experiment.setdefault(record["experiment"], []).append(record)

    def fingerprints_of(experiment: str) -> tuple[dict, ...]:
        return tuple(r["fingerprint"] for r in by_experiment.get(experiment, []) if r["fingerprint"])

    closed = [
        ClosedExperiment(entry.id, "prior_work", (entry.technique, *entry.aliases),
                         entry.result_text(), entry.rule, fingerprints_of(entry.id))
        for entry in prior
    ]
    prior_ids = {entry.id for entry in prior}
    default_rule = prior_work.Rule("never_unchanged", ("implementation_changed",), None)
    for experiment, history in by_experiment.items():
        last = history[-1]
        if experiment in prior_ids or last["status"] != "closed":
            continue
        names = tuple(r["technique"] for r in history if r["technique"])
        raw_rule = last.get("reopen_rule")
        rule = (prior_work.Rule(raw_rule["kind"], tuple(raw_rule["conditions"]), raw_rule.get("note"))
                if raw_rule else default_rule)
        closed.append(ClosedExperiment(experiment, "log", names,
                                       _figures_text(last["measured"]) or last["decision"] or "no figure",
                                       rule, fingerprints_of(experiment)))
    return closed


def check_declarations(declarations: list[Declaration]) -> None:
    for declaration in declarations:
        if declaration.condition not in prior_work.CONDITIONS:
            raise InputError(f"--declare {declaration.condition!r}: unknown condition; expected one of "
                             f"{', '.join(prior_work.CONDITIONS)}")
        if not declaration.evidence.strip():
            raise InputError(f"--declare {declaration.condition}: the evidence is empty; give --evidence "
                             "TEXT saying what shows the condition holds")


def evaluate(technique: str, print_: dict, declarations: list[Declaration],
             closed: list[ClosedExperiment]) -> Decision:
    """Decide whether a proposal may open; no side effects."""
    check_declarations(declarations)
    decision = Decision(permitted=True, technique=technique, fingerprint=print_)
    for experiment in closed:
        if any(_same_attempt(print_, known) for known in experiment.fingerprints):
            decision.permitted = False
            decision.matched.append(experiment)
            decision.reasons.append(
                f"the fingerprint equals closed experiment {experiment.id}'s (same technique, "
                "sources and configuration): a closed experiment is not repeated unchanged, "
                "and no declaration lifts this")
    declared = {d.condition for d in declarations}
    for experiment in closed:
        if not experiment.matches(technique) or experiment in decision.matched:
            continue
        decision.matched.append(experiment)
        missing = [c for c in experiment.rule.conditions if c not in declared]
        if not missing:
            decision.reasons.append(f"{experiment.id}: its conditions are declared "
                                    f"({', '.join(experiment.rule.conditions)})")
        else:
            decision.permitted = False
            flags = " ".join(f"--declare {c} --evidence '...'" for c in missing)
            decision.reasons.append(f"{experiment.id} is closed; to reopen it declare {flags}")
    return decision


def propose(technique: str, sources: list[Path | str], config: dict, declarations: list[Declaration],
            *, experiment: str, hypothesis: str, phase: str, date: str | None = None,
            path: Path | str | None = None, view: Path | str | None = "default",
            prior_path: Path | str | None = None, root: Path | str | None = None) -> Decision:
    """Check a proposal and, when permitted, append it to the log as ``proposed``."""
    if not prior_work.normalize_technique(technique):
        raise InputError(f"--technique {technique!r}: expected a technique name with letters or digits")
    if not hypothesis.strip():
        raise InputError("--hypothesis: expected the reason this attempt could work, got nothing")
    prior = prior_work.load(prior_path)
    log_path = Path(path) if path is not None else ledger.DEFAULT_LOG
    records = ledger.read(log_path) if log_path.exists() else []
    if any(r["experiment"] == experiment for r in records) or experiment in {e.id for e in prior}:
        raise InputError(f"--experiment {experiment!r}: that id is already in the log or the prior "
                         "work; choose a new id for a new attempt")
    print_ = fingerprint(technique, sources, config, root)
    decision = evaluate(technique, print_, declarations, closed_experiments(prior, records))
    if not decision.permitted:
        return decision
    reopened = [c.id for c in decision.matched]
    decision.record = ledger.append({
        "date": date or ledger.utc_now()[:10],
        "phase": phase,
        "status": "proposed",
        "experiment": experiment,
        "technique": technique_key(technique, prior),
        "hypothesis": hypothesis,
        "actions": [],
        "decision": ("opened; reopens " + ", ".join(reopened) + " under the declared conditions"
                     if reopened else "opened; no closed experiment matches this technique"),
        "measured": [],
        "projections": [],
        "fingerprint": print_,
        "declarations": [{"condition": d.condition, "evidence": d.evidence, "reopens": reopened}
                         for d in declarations],
    }, log_path, view)
    return decision


def prior_work_fields(entry: prior_work.PriorWork, date: str) -> dict:
    """The closed record that carries one prior-work entry into the log."""
    unbacked = f"the evidence named for it is not in this repository; location: {entry.evidence.location}"
    measured = [{**fig.as_dict(), "artifacts": [], "unbacked": unbacked} for fig in entry.figures]
    retained = ", ".join(entry.evidence.retained) or "none named"
    missing = ", ".join(entry.evidence.missing) or "none named"
    notes = (f"Evidence retained: {retained}. Missing: {missing}. "
             + (f"{entry.evidence.note} " if entry.evidence.note else "")
             + "The date the experiment itself closed is not in the research log; "
               "the date here is that of the Phase 0 import.")
    return {
        "date": date,
        "phase": entry.phase or "not stated",
        "status": "closed",
        "experiment": entry.id,
        "technique": entry.technique,
        "prior_work_id": entry.id,
        "hypothesis": "not recorded in the research log; this record carries the closed result",
        "actions": [f"carried over from the research log's closed prior work; the full entry is "
                    f"{entry.id} in data/prior_work.yaml"],
        "decision": f"closed: {entry.summary}" + (f" ({entry.qualitative})" if entry.qualitative else ""),
        "measured": measured,
        "projections": [],
        "fingerprint": None,
        "declarations": [],
        "reopen_rule": entry.rule.as_dict(),
        "notes": notes,
    }


def import_prior_work(date: str, path: Path | str | None = None, view: Path | str | None = "default",
                      prior_path: Path | str | None = None) -> list[dict]:
    """Append a closed record for every prior-work entry the log does not hold yet."""
    prior = prior_work.load(prior_path)
    log_path = Path(path) if path is not None else ledger.DEFAULT_LOG
    records = ledger.read(log_path) if log_path.exists() else []
    present = {r.get("prior_work_id") for r in records}
    return [ledger.append(prior_work_fields(entry, date), log_path, view)
            for entry in prior if entry.id not in present]
