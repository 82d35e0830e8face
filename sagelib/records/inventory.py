"""The reference inventory (``data/reference_inventory.json``): every artifact a result rests on, with its
hash, size, kind and the command that made it, and the blockers where provenance is missing.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import json
import os
from dataclasses import dataclass
from pathlib import Path

from sagelib.errors import InputError
from sagelib.paths import REPO_ROOT
from sagelib.records.datafile import DataFileError, repo_relative, sha256_file

DEFAULT_INVENTORY = REPO_ROOT / "data" / "reference_inventory.json"


KINDS = {
    "contract": "a document or module that states the numerical contract",
    "parity": "a recorded parity result (kernel against the contract)",
    "timing": "a recorded timing result",
    "profiler_report": "a profiler report (Nsight Compute / Nsight Systems)",
    "canonical_input": "a canonical input or its specification",
    "prior_work": "the record of closed prior work",
    "anchor": "peer measurements that targets are set against",
}


@dataclass(frozen=True)
class Artifact:
    path: str
    sha256: str
    size: int
    kind: str
    command: str
    environment: dict | None
    added_utc: str
    note: str | None = None


@dataclass(frozen=True)
class Blocker:
    id: str
    subject: str
    reason: str
    unblock: str

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class InventoryRow:
    """One artifact after rehashing: status ``ok``, ``changed``, ``missing`` or ``unreadable``; or a file under
    ``data/results/`` the inventory does not list (``unlisted``); or an entry that differs from the committed
    inventory (``removed`` since the last commit, ``rerecorded`` with another hash)."""

    path: str
    kind: str
    status: str
    recorded_sha256: str
    current_sha256: str | None
    recorded_size: int
    current_size: int | None
    #: what is wrong and the fix, for the statuses beyond ok/changed/missing
    detail: str | None = None

    def as_dict(self) -> dict:
        return dict(self.__dict__)


@dataclass(frozen=True)
class Inventory:
    path: Path
    artifacts: tuple[Artifact, ...]
    blockers: tuple[Blocker, ...]


_ARTIFACT_FIELDS = {"path": str, "sha256": str, "size": int, "kind": str, "command": str,
                    "environment": (dict, type(None)), "added_utc": str}


_BLOCKER_FIELDS = {"id": str, "subject": str, "reason": str, "unblock": str}


def _line_of(text: str, needle: str) -> int | None:
    at = text.find(needle)
    return text.count("\n", 0, at) + 1 if at >= 0 else None


def _check_fields(path: Path, text: str, raw, fields: dict, what: str, index: int, label_key: str):
    label = raw.get(label_key) if isinstance(raw, dict) else None
    line = _line_of(text, json.dumps(label)) if isinstance(label, str) else None
    if not isinstance(raw, dict):
        raise DataFileError(path, line, f"{what} {index + 1}: expected an object, got {raw!r}",
                            f"write each {what} as an object with {', '.join(fields)}")
    for name, expected in fields.items():
        types = expected if isinstance(expected, tuple) else (expected,)
        if name not in raw:
            raise DataFileError(path, line, f"{what} {index + 1} ({label}): missing field {name!r}",
                                f"add {name!r}; every {what} needs {', '.join(fields)}")
        if not isinstance(raw[name], types) or (isinstance(raw[name], bool) and bool not in types):
            raise DataFileError(path, line, f"{what} {index + 1} ({label}) field {name!r}: expected "
                                f"{' or '.join('null' if t is type(None) else t.__name__ for t in types)}, "
                                f"got {raw[name]!r}", f"correct {name!r}")
    return line


def load_inventory(path: Path | str | None = None, root: Path | str | None = None) -> Inventory:
    """Read and check the inventory; errors name the file, line, entry and fix."""
    path = Path(path) if path is not None else DEFAULT_INVENTORY
    root = Path(root) if root is not None else REPO_ROOT
    text = path.read_text(encoding="utf-8")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataFileError(path, exc.lineno, f"not valid JSON ({exc.msg})",
                            "correct the JSON syntax at that line, or restore the file from git") from None
    if not isinstance(data, dict) or data.get("schema") != 1 \
            or not isinstance(data.get("artifacts"), list) or not isinstance(data.get("blockers"), list):
        raise DataFileError(path, 1, "expected an object with \"schema\": 1, \"artifacts\": [...] and "
                            "\"blockers\": [...]", "restore the file from git")
    artifacts, seen = [], set()
    for index, raw in enumerate(data["artifacts"]):
        line = _check_fields(path, text, raw, _ARTIFACT_FIELDS, "artifact", index, "path")
        if raw["kind"] not in KINDS:
            raise DataFileError(path, line, f"artifact {index + 1} ({raw['path']}): unknown kind "
                                f"{raw['kind']!r}", f"use one of {', '.join(KINDS)}")
        try:
            relative = repo_relative(raw["path"], root)
        except ValueError as exc:
            raise DataFileError(path, line, f"artifact {index + 1}: {exc}",
                                "record only paths inside the repository") from None
        if relative != raw["path"]:
            raise DataFileError(path, line, f"artifact {index + 1}: path {raw['path']!r} is not in "
                                f"repository-relative form ({relative!r})", f"write {relative!r}")
        if relative in seen:
            raise DataFileError(path, line, f"artifact {index + 1}: {relative} listed twice",
                                "keep one entry per path (`sagelib inventory add --replace` re-records)")
        seen.add(relative)
        artifacts.append(Artifact(**{k: raw[k] for k in _ARTIFACT_FIELDS}, note=raw.get("note")))
    blockers = []
    for index, raw in enumerate(data["blockers"]):
        _check_fields(path, text, raw, _BLOCKER_FIELDS, "blocker", index, "id")
        blockers.append(Blocker(**{k: raw[k] for k in _BLOCKER_FIELDS}))
    return Inventory(path, tuple(artifacts), tuple(blockers))


def _save_inventory(inventory: Inventory) -> None:
    data = {
        "schema": 1,
        "about": ("Artifacts that results rest on, by sha256, and blockers whose provenance is "
                  "unknown. Written by `sagelib inventory`; checked by `sagelib inventory verify`."),
        "artifacts": [{k: v for k, v in a.__dict__.items() if not (k == "note" and v is None)}
                      for a in inventory.artifacts],
        "blockers": [b.as_dict() for b in inventory.blockers],
    }
    temporary = inventory.path.with_name(f".{inventory.path.name}.tmp-{os.getpid()}")
    temporary.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    os.replace(temporary, inventory.path)


@contextlib.contextmanager
def _inventory_lock(path: Path):
    # The file itself is replaced on write, so lock the folder that holds it.
    fd = os.open(path.parent, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def inventory_add(artifact: Path | str, kind: str, command: str, *, environment: dict | None = None,
                  note: str | None = None, replace: bool = False, path: Path | str | None = None,
                  root: Path | str | None = None) -> Artifact:
    """Hash ``artifact`` now and record it; refuse paths outside the repository.

    ``environment`` is the environment the artifact was produced in (for example the
    ``environment.json`` written beside a run's results), or None when unknown.
    ``replace=True`` re-records an artifact that is already listed.
    """
    root = Path(root) if root is not None else REPO_ROOT
    path = Path(path) if path is not None else DEFAULT_INVENTORY
    if kind not in KINDS:
        raise InputError(f"--kind {kind!r}: unknown kind; expected one of {', '.join(KINDS)}")
    if not command.strip():
        raise InputError("--command: expected the command that produced the artifact, got nothing; "
                         "for a hand-written file say so (e.g. 'written by hand')")
    relative = repo_relative(artifact, root)
    if not (root / relative).is_file():
        raise InputError(f"artifact {str(artifact)!r}: no such file in the repository")
    try:
        digest = sha256_file(root / relative)
    except OSError as exc:
        raise InputError(f"artifact {relative}: cannot be read ({exc.strerror or exc}); give this user read access "
                         "and add it again") from None
    record = Artifact(relative, digest, (root / relative).stat().st_size, kind,
                      command, environment,
                      _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"), note)
    with _inventory_lock(path):
        inventory = load_inventory(path, root) if path.exists() else Inventory(path, (), ())
        listed = [a for a in inventory.artifacts if a.path != relative]
        if len(listed) != len(inventory.artifacts) and not replace:
            raise InputError(f"artifact {relative} is already in {path.name}; pass --replace to "
                             "re-record it (the old hash is dropped)")
        _save_inventory(Inventory(path, tuple(listed) + (record,), inventory.blockers))
    return record


def add_blocker(blocker_id: str, subject: str, reason: str, unblock: str,
                path: Path | str | None = None, root: Path | str | None = None) -> Blocker:
    """Record something a result needs whose provenance is unknown."""
    path = Path(path) if path is not None else DEFAULT_INVENTORY
    for name, value in (("id", blocker_id), ("subject", subject), ("reason", reason), ("unblock", unblock)):
        if not value.strip():
            raise InputError(f"blocker {name}: expected text, got nothing")
    blocker = Blocker(blocker_id, subject, reason, unblock)
    with _inventory_lock(path):
        inventory = load_inventory(path, root) if path.exists() else Inventory(path, (), ())
        if any(b.id == blocker_id for b in inventory.blockers):
            raise InputError(f"blocker {blocker_id!r} already exists in {path.name}; choose a new id")
        _save_inventory(Inventory(path, inventory.artifacts, inventory.blockers + (blocker,)))
    return blocker


@dataclass(frozen=True)
class InventoryCheck:
    rows: list[InventoryRow]
    #: what the inventory was compared with beyond the files: the commit, or why there was none
    notes: list[str]


def verify_inventory(path: Path | str | None = None, root: Path | str | None = None) -> list[InventoryRow]:
    """Rehash every artifact, list unlisted result files and entries changed since the last commit (rows)."""
    return check_inventory(path, root).rows


def check_inventory(path: Path | str | None = None, root: Path | str | None = None) -> InventoryCheck:
    """:func:`verify_inventory` with the notes on what the inventory was compared with."""
    root = Path(root) if root is not None else REPO_ROOT
    path = Path(path) if path is not None else DEFAULT_INVENTORY
    listed = load_inventory(path, root)
    rows = [_rehash(artifact, root) for artifact in listed.artifacts]
    rows += _unlisted(listed, root)
    notes: list[str] = []
    rows += _against_commit(listed, path, notes)
    return InventoryCheck(rows, notes)


def _rehash(artifact: Artifact, root: Path) -> InventoryRow:
    file = root / artifact.path
    if not file.is_file():
        return InventoryRow(artifact.path, artifact.kind, "missing", artifact.sha256, None, artifact.size, None)
    try:
        current = sha256_file(file)
    except OSError as exc:
        return InventoryRow(artifact.path, artifact.kind, "unreadable", artifact.sha256, None, artifact.size, None,
                            f"cannot be read ({exc.strerror or exc}); give this user read access "
                            f"(chmod a+r {artifact.path}) and verify again")
    status = "ok" if current == artifact.sha256 else "changed"
    return InventoryRow(artifact.path, artifact.kind, status, artifact.sha256, current, artifact.size,
                        file.stat().st_size)


def _unlisted(listed: Inventory, root: Path) -> list[InventoryRow]:
    """Files under ``data/results/`` that no entry lists: a recorded result must rest on a recorded file."""
    results = root / "data" / "results"
    known = {a.path for a in listed.artifacts}
    found = sorted(p for p in results.rglob("*") if p.is_file() and not p.name.startswith(".")) \
        if results.is_dir() else []
    rows = []
    for file in found:
        relative = file.relative_to(root).as_posix()
        if relative not in known:
            rows.append(InventoryRow(relative, "-", "unlisted", "", None, 0, file.stat().st_size,
                                     f"a result file no inventory entry lists; record it with `sagelib inventory add "
                                     f"{relative} --kind KIND --command CMD` (the command that made it, or say "
                                     "'unknown'), or remove it"))
    return rows


def _against_commit(listed: Inventory, path: Path, notes: list[str]) -> list[InventoryRow]:
    """Entries of the last committed inventory that are gone now, or hold another hash now."""
    from sagelib.records.log_git import committed_version

    found = committed_version(path)
    if isinstance(found, str):
        notes.append(f"committed inventory: not compared ({found}); an entry removed, or an artifact edited together "
                     "with its hash, cannot be seen here")
        return []
    commit, relative, data = found
    short = commit[:12]
    try:
        committed = {a["path"]: a for a in json.loads(data)["artifacts"] if isinstance(a, dict) and "path" in a}
    except (ValueError, KeyError, TypeError) as exc:
        notes.append(f"committed inventory: {relative} at {short} is not readable as an inventory ({exc}); not compared")
        return []
    now = {a.path: a for a in listed.artifacts}
    rows = []
    for name, entry in committed.items():
        if name not in now:
            rows.append(InventoryRow(name, str(entry.get("kind")), "removed", str(entry.get("sha256")), None,
                                     int(entry.get("size") or 0), None,
                                     f"listed in the inventory committed in {short}, gone from it now; restore the "
                                     f"entry (`git show {short}:{relative}`), or commit its removal on purpose"))
        elif entry.get("sha256") != now[name].sha256:
            rows.append(InventoryRow(name, now[name].kind, "rerecorded", str(entry.get("sha256")), now[name].sha256,
                                     int(entry.get("size") or 0), now[name].size,
                                     f"its hash differs from the entry committed in {short}: re-recorded since, or the "
                                     "artifact and its hash were edited together; review `git diff`, then commit "
                                     "both, or restore both from git"))
    notes.append(f"committed inventory: compared with {relative} as committed in {short}")
    return rows


def blockers(path: Path | str | None = None, root: Path | str | None = None) -> list[Blocker]:
    """The inventory's blockers: what results would need but whose provenance is unknown."""
    return list(load_inventory(path, root).blockers)
