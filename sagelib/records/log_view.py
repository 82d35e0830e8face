"""The experiment log as Markdown: ``EXPERIMENT_LOG.md``, regenerated, never edited.

The view shows every record in order. Measured figures appear with the
artifacts that back them (or the stated reason none does); projections appear
only in their own block, headed as estimates, so a projection can never be read
as a result. The first lines say the file is generated and carry the anchor
(record count and head hash) that :func:`sagelib.records.ledger.verify` uses to detect
removed trailing records.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from sagelib import paths
from sagelib.records import log_schema
from sagelib.records.datafile import amount_text
from sagelib.records.prior_work import CONDITIONS, RULE_KINDS


def _cell(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _measured(items: list[dict]) -> list[str]:
    if not items:
        return []
    lines = ["**Measured**", "", "| quantity | value | unit | scope | measured on | backed by |",
             "|---|---|---|---|---|---|"]
    for item in items:
        backing = ", ".join(f"`{a['path']}` ({a['sha256'][:12]})" for a in item["artifacts"])
        backing = backing or f"no artifact: {item['unbacked']}"
        lines.append("| " + " | ".join(_cell(x) for x in (
            item["quantity"], amount_text(item), item["unit"], item.get("scope", ""),
            item.get("measured_on", ""), backing)) + " |")
    return lines + [""]


def _projections(items: list[dict]) -> list[str]:
    if not items:
        return []
    lines = ["**Projections (estimates, not measured results)**", "",
             "| quantity | projected | unit | basis |", "|---|---|---|---|"]
    for item in items:
        lines.append("| " + " | ".join(_cell(x) for x in (
            item["quantity"], f"projected {amount_text(item)}", item["unit"], item["basis"])) + " |")
    return lines + [""]


def _rule(rule: dict) -> str:
    conditions = "; ".join(f"`{c}` ({CONDITIONS.get(c, 'unknown condition')})" for c in rule["conditions"])
    text = f"`{rule['kind']}`: {RULE_KINDS.get(rule['kind'], 'unknown kind')}. Conditions: {conditions}."
    return text + (f" {rule['note']}" if rule.get("note") else "")


def render_record(record: dict) -> list[str]:
    title = (f"## {record['seq']}. {record['date']} · {record['experiment']} · "
             f"`{record['status']}` · phase {record['phase']}")
    lines = [title, ""]
    if record.get("technique"):
        lines += [f"**Technique**: `{record['technique']}`"
                  + (f" (prior work `{record['prior_work_id']}`)" if record.get("prior_work_id") else ""), ""]
    lines += [f"**Hypothesis**: {record['hypothesis']}", ""]
    if record["actions"]:
        lines += ["**Actions**", ""] + [f"- {a}" for a in record["actions"]] + [""]
    lines += _measured(record["measured"])
    lines += _projections(record["projections"])
    if record["decision"]:
        lines += [f"**Decision**: {record['decision']}", ""]
    for declaration in record["declarations"]:
        reopens = ", ".join(declaration.get("reopens", [])) or "-"
        lines += [f"**Declared** `{declaration['condition']}` (reopens {reopens}): "
                  f"{declaration['evidence']}", ""]
    if record.get("reopen_rule"):
        lines += [f"**Reopening rule**: {_rule(record['reopen_rule'])}", ""]
    fingerprint = record["fingerprint"]
    if fingerprint:
        lines += [f"**Fingerprint**: technique `{fingerprint['technique']}`, source "
                  f"`{fingerprint['source_sha256'][:16]}`, config `{fingerprint['config_sha256'][:16]}`", ""]
    if record.get("notes"):
        lines += [f"**Notes**: {record['notes']}", ""]
    lines += [f"<sub>sha256 `{record['sha256']}` · prev `{record['prev_sha256'][:16]}` · "
              f"recorded {record['recorded_utc']}</sub>", ""]
    return lines


@dataclass(frozen=True)
class IndexRow:
    """One technique of the log: where it stands now, the records that tried it, the last decision."""

    technique: str
    status: str  #: the status of its newest record
    seqs: tuple[int, ...]
    decision: str  #: the first sentence of the newest record's decision


def first_sentence(text: str, limit: int = 200) -> str:
    """The text up to its first full stop followed by a space (or its end), cut at ``limit`` characters."""
    text = " ".join(text.split())
    end = next((i + 1 for i in range(len(text) - 1) if text[i] == "." and text[i + 1] == " "), len(text))
    line = text[:end]
    return line if len(line) <= limit else line[: limit - 1].rstrip() + "…"


def index_rows(records: list[dict]) -> list[IndexRow]:
    """One row per technique (records without one are listed under their experiment), in order of first record."""
    groups: dict[str, list[dict]] = {}
    for record in records:
        groups.setdefault(record.get("technique") or record["experiment"], []).append(record)
    return [IndexRow(technique=name, status=group[-1]["status"], seqs=tuple(r["seq"] for r in group),
                     decision=first_sentence(group[-1]["decision"])) for name, group in groups.items()]


def render_index(records: list[dict]) -> list[str]:
    """The index a reader scans before the records: is a lever closed, and where is it recorded."""
    if not records:
        return []
    lines = ["## Index: every technique, where it stands", "",
             "One row per technique, in order of its first record: the status of its newest record, the records "
             "(by seq) that tried it, and the first sentence of the newest decision. A `closed` technique carries "
             "a reopening rule in its record; `sagelib log propose` enforces it.", "",
             "| technique | status now | records | decision (newest) |", "|---|---|---|---|"]
    for row in index_rows(records):
        seqs = ", ".join(str(s) for s in row.seqs)
        lines.append(f"| `{row.technique}` | `{row.status}` | {seqs} | {_cell(row.decision)} |")
    return lines + [""]


def render(data: bytes, log_name: str) -> str:
    records = [json.loads(line) for line in data.splitlines() if line]
    head = records[-1]["sha256"] if records else log_schema.GENESIS_PREV
    lines = [
        f"<!-- Generated by `sagelib log render` from {log_name}. Do not edit by hand: "
        "the log is the record and this file is rewritten from it. -->",
        f"<!-- ledger-anchor: records={len(records)} head_sha256={head} -->",
        "",
        "# Experiment log",
        "",
        f"Generated from `{log_name}` ({len(records)} records, head `{head[:16]}`); "
        "`sagelib log verify` checks the chain. The log is append-only: a correction is a new "
        "record. Projections are estimates and appear only in blocks headed as such; they are "
        "never results.",
        "",
    ]
    lines += render_index(records)
    for record in records:
        lines += render_record(record)
    return "\n".join(lines).rstrip("\n") + "\n"


def write_view(data: bytes, log_path: Path, view_path: Path) -> None:
    """Write the view atomically (temporary file, then rename)."""
    try:
        log_name = log_path.resolve().relative_to(paths.REPO_ROOT).as_posix()
    except ValueError:
        log_name = log_path.name
    text = render(data, log_name)
    temporary = view_path.with_name(f".{view_path.name}.tmp-{os.getpid()}")
    temporary.write_text(text, encoding="utf-8")
    os.replace(temporary, view_path)
