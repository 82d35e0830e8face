"""What one record of the experiment log holds: its fields and their types, its hash, its figures.

A record's content is checked here before it is chained (:mod:`sagelib.records.ledger` appends it);
:func:`figure` and :func:`projection` build its measured and projected quantities.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from sagelib.errors import InputError
from sagelib.paths import REPO_ROOT
from sagelib.records.datafile import (
    DataFileError,
    canonical_json,
    repo_relative,
    sha256_bytes,
    sha256_file,
)

GENESIS_PREV = "0" * 64


STATUSES = {
    "proposed": "opened; nothing measured yet",
    "running": "being measured",
    "retained": "kept: its result or artifact is part of the work going forward",
    "closed": "finished and not kept; reopening follows its rule",
    "blocked": "cannot proceed until a named blocker is resolved",
    "withdrawn": "abandoned before a result, with the reason in the decision",
}


_CHAIN_FIELDS = ("seq", "prev_sha256", "sha256", "recorded_utc")


_CONTENT_FIELDS = {
    "date": str, "phase": str, "status": str, "experiment": str, "technique": (str, type(None)),
    "hypothesis": str, "actions": list, "decision": str, "measured": list,
    "projections": list, "fingerprint": (dict, type(None)), "declarations": list,
}


_OPTIONAL_FIELDS = {"prior_work_id": str, "reopen_rule": dict, "notes": str, "environment": dict}


_HEX64 = re.compile(r"[0-9a-f]{64}")


#: A record's date: YYYY-MM-DD (the log command also refuses a --date no calendar has).
DATE_PATTERN = re.compile(r"\d{4}-\d{2}-\d{2}")


def record_hash(record: dict) -> str:
    """sha256 of a record's canonical JSON without its own ``sha256`` field."""
    body = {k: v for k, v in record.items() if k != "sha256"}
    return sha256_bytes(canonical_json(body).encode("utf-8"))


def _type_name(expected) -> str:
    types = expected if isinstance(expected, tuple) else (expected,)
    return " or ".join("null" if t is type(None) else t.__name__ for t in types)


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _check_amount(item: dict, where: str) -> None:
    value, low, high = item.get("value"), item.get("low"), item.get("high")
    if value is not None:
        if not _is_number(value) or low is not None or high is not None:
            raise InputError(f"{where}: 'value' must be a number, without 'low'/'high'; got {item!r}")
    elif not (_is_number(low) and _is_number(high) and low <= high):
        raise InputError(f"{where}: give a number 'value' or numbers 'low' <= 'high'; got {item!r}")


def _check_artifacts(item: dict, where: str) -> None:
    artifacts = item.get("artifacts")
    if not isinstance(artifacts, list):
        raise InputError(f"{where}: 'artifacts' must be a list of {{path, sha256}}; got {artifacts!r}")
    for artifact in artifacts:
        if not (isinstance(artifact, dict) and isinstance(artifact.get("path"), str)
                and _HEX64.fullmatch(str(artifact.get("sha256", "")))):
            raise InputError(f"{where}: artifact {artifact!r} needs 'path' and a 64-hex 'sha256'")
    if not artifacts and not (isinstance(item.get("unbacked"), str) and item["unbacked"].strip()):
        raise InputError(f"{where}: no artifact backs this figure; list its artifacts or say why "
                         "in 'unbacked'")


def check_content(record: dict) -> None:
    """Raise ValueError naming the field when a record's content is malformed."""
    for name, expected in _CONTENT_FIELDS.items():
        if name not in record:
            raise InputError(f"missing field {name!r} (every record needs {', '.join(_CONTENT_FIELDS)})")
        types = expected if isinstance(expected, tuple) else (expected,)
        if not isinstance(record[name], types):
            raise InputError(f"field {name!r}: expected {_type_name(expected)}, got {record[name]!r}")
    for name, expected in _OPTIONAL_FIELDS.items():
        if name in record and not isinstance(record[name], expected):
            raise InputError(f"field {name!r}: expected {_type_name(expected)}, got {record[name]!r}")
    unknown = set(record) - set(_CONTENT_FIELDS) - set(_OPTIONAL_FIELDS) - set(_CHAIN_FIELDS)
    if unknown:
        raise InputError(f"unknown field(s) {', '.join(sorted(unknown))}; known: "
                         f"{', '.join([*_CONTENT_FIELDS, *_OPTIONAL_FIELDS])}")
    if record["status"] not in STATUSES:
        raise InputError(f"field 'status': unknown status {record['status']!r}; expected one of "
                         f"{', '.join(STATUSES)}")
    if not DATE_PATTERN.fullmatch(record["date"]):
        raise InputError(f"field 'date': expected YYYY-MM-DD, got {record['date']!r}")
    for name in ("phase", "experiment"):
        if not record[name].strip():
            raise InputError(f"field {name!r}: must not be empty")
    if not all(isinstance(a, str) for a in record["actions"]):
        raise InputError(f"field 'actions': expected a list of strings, got {record['actions']!r}")
    for i, item in enumerate(record["measured"]):
        where = f"field 'measured' item {i + 1}"
        if not isinstance(item, dict) or not isinstance(item.get("quantity"), str) \
                or not isinstance(item.get("unit"), str):
            raise InputError(f"{where}: expected {{quantity, value | low+high, unit, artifacts}}, got {item!r}")
        _check_amount(item, where)
        _check_artifacts(item, where)
    for i, item in enumerate(record["projections"]):
        where = f"field 'projections' item {i + 1}"
        if not isinstance(item, dict) or not isinstance(item.get("quantity"), str) \
                or not isinstance(item.get("unit"), str) or not str(item.get("basis", "")).strip():
            raise InputError(f"{where}: expected {{quantity, value | low+high, unit, basis}}, got {item!r}")
        _check_amount(item, where)
    for i, item in enumerate(record["declarations"]):
        if not (isinstance(item, dict) and isinstance(item.get("condition"), str)
                and isinstance(item.get("evidence"), str) and item["evidence"].strip()):
            raise InputError(f"field 'declarations' item {i + 1}: expected {{condition, evidence}} "
                             f"with non-empty evidence, got {item!r}")
    fingerprint = record["fingerprint"]
    if fingerprint is not None:
        for name in ("technique", "source_sha256", "config_sha256"):
            if not isinstance(fingerprint.get(name), str):
                raise InputError(f"field 'fingerprint': missing {name!r}; got {fingerprint!r}")


def _check_chain_fields(record: dict) -> None:
    if not (isinstance(record.get("seq"), int) and not isinstance(record["seq"], bool) and record["seq"] >= 0):
        raise InputError(f"field 'seq': expected an integer >= 0, got {record.get('seq')!r}")
    for name in ("prev_sha256", "sha256"):
        if not _HEX64.fullmatch(str(record.get(name, ""))):
            raise InputError(f"field {name!r}: expected 64 lowercase hex digits, got {record.get(name)!r}")
    if not isinstance(record.get("recorded_utc"), str):
        raise InputError(f"field 'recorded_utc': expected a UTC timestamp, got {record.get('recorded_utc')!r}")


def figure(quantity: str, value=None, unit: str = "", *, low=None, high=None, artifacts=(),
           unbacked: str | None = None, scope: str | None = None, measured_on: str | None = None,
           root: Path | str | None = None) -> dict:
    """Build a measured figure, hashing each artifact file now (paths must lie in the repo)."""
    root = Path(root) if root is not None else REPO_ROOT
    item = {"quantity": quantity, "unit": unit, "artifacts": []}
    for name, given in (("value", value), ("low", low), ("high", high), ("unbacked", unbacked),
                        ("scope", scope), ("measured_on", measured_on)):
        if given is not None:
            item[name] = given
    for path in artifacts:
        relative = repo_relative(path, root)
        item["artifacts"].append({"path": relative, "sha256": sha256_file(root / relative)})
    _check_amount(item, f"figure {quantity!r}")
    _check_artifacts(item, f"figure {quantity!r}")
    return item


def projection(quantity: str, value=None, unit: str = "", *, low=None, high=None, basis: str) -> dict:
    """Build a projection: an estimate with the basis it rests on. Never a result."""
    item = {"quantity": quantity, "unit": unit, "basis": basis}
    for name, given in (("value", value), ("low", low), ("high", high)):
        if given is not None:
            item[name] = given
    _check_amount(item, f"projection {quantity!r}")
    return item


def load_fields_json(path: Path | str) -> dict:
    """Record content from a JSON file (for ``sagelib log append --json``)."""
    path = Path(path)
    try:
        fields = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise DataFileError(path, exc.lineno, f"not valid JSON ({exc.msg})",
                            "correct the JSON syntax at that line") from None
    if not isinstance(fields, dict):
        raise DataFileError(path, 1, "expected a JSON object of record fields",
                            "write the fields as one object {\"status\": ..., ...}")
    return fields
