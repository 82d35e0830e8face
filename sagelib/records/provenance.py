"""Where a result came from: the machine, the toolchain, the source tree, the artifacts.

:func:`environment` is written beside every run's results so a number can be
traced to the GPU, driver, CUDA runtime, compiler, library versions and git
commit that produced it. Every probe fails soft: a tool that is absent or a
query that errors is recorded as ``None`` with its reason under ``"missing"``;
nothing here raises because the machine lacks something.

The reference inventory (``data/reference_inventory.json``) records, by sha256,
the artifacts results rest on, and lists as *blockers* whatever a result would
need but whose provenance is unknown. :func:`verify_inventory` rehashes every
artifact; :func:`blockers` lists the blockers; :func:`inventory_add` and
:func:`add_blocker` extend it.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import importlib
import json
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from sagelib import paths
from sagelib.cuda import toolkit
from sagelib.errors import InputError
from sagelib.records.datafile import DataFileError, repo_relative, sha256_file

REPO_ROOT = paths.REPO_ROOT

_PROBE_TIMEOUT_S = 10


def _run(argv: list[str], cwd: Path | None = None) -> tuple[str | None, str | None]:
    """Run a probe command; return (stdout, None) or (None, reason)."""
    if shutil.which(argv[0]) is None:
        return None, f"{argv[0]} not found on PATH"
    try:
        done = subprocess.run(
            argv, cwd=cwd, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S
        )
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"{' '.join(argv)} failed: {exc}"
    if done.returncode != 0:
        lines = (done.stderr or done.stdout).strip().splitlines()
        first = lines[0].strip() if lines else "no output"
        return None, f"{' '.join(argv)} exited {done.returncode}: {first}"
    return done.stdout, None


def _module_version(name: str) -> tuple[str | None, str | None]:
    try:
        module = importlib.import_module(name)
    except Exception as exc:  # an import can fail in many ways; all mean "absent"
        return None, f"{name} not importable: {type(exc).__name__}: {exc}"
    return str(getattr(module, "__version__", "unknown")), None


def _gpus_and_driver() -> tuple[list[str] | None, str | None, dict[str, str]]:
    """GPU names and driver version: nvidia-smi first, then torch, then CuPy."""
    missing: dict[str, str] = {}
    out, reason = _run(
        ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"]
    )
    if out is not None:
        rows = [line.split(",") for line in out.strip().splitlines() if line.strip()]
        names = [row[0].strip() for row in rows]
        drivers = sorted({row[1].strip() for row in rows if len(row) > 1})
        if names:
            return names, ", ".join(drivers) or None, missing
    smi_reason = reason or "nvidia-smi listed no GPU"

    names: list[str] | None = None
    try:
        import torch

        if torch.cuda.is_available():
            names = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    except Exception as exc:
        smi_reason += f"; torch.cuda probe failed: {exc}"

    driver = None
    try:
        import cupy

        version = cupy.cuda.runtime.driverGetVersion()
        if version > 0:  # 0 means no driver is loaded
            driver = f"CUDA driver API {version // 1000}.{(version % 1000) // 10}"
        if names is None:
            count = cupy.cuda.runtime.getDeviceCount()
            names = [
                cupy.cuda.runtime.getDeviceProperties(i)["name"].decode()
                for i in range(count)
            ] or None
    except Exception as exc:
        smi_reason += f"; CuPy probe failed: {type(exc).__name__}"

    if names is None:
        missing["gpus"] = f"no GPU visible ({smi_reason})"
    if driver is None:
        missing["driver"] = f"driver version unknown ({smi_reason})"
    return names, driver, missing


def _nvcc_version() -> tuple[str | None, str | None]:
    out, reason = _run([toolkit.find("nvcc") or "nvcc", "--version"])
    if out is None:
        return None, reason
    match = re.search(r"release\s+([\d.]+),\s*V([\d.]+)", out)
    if match is None:
        return None, "nvcc --version printed no 'release X, VY' line"
    return match.group(2), None


#: Names the commit a tree was copied from, where the copy has no .git (recorded as declared).
SOURCE_COMMIT_VARIABLE = "SAGELIB_SOURCE_COMMIT"


def _git_state(root: Path) -> tuple[str | None, bool | None, dict[str, str]]:
    missing: dict[str, str] = {}
    commit, reason = _run(["git", "rev-parse", "HEAD"], cwd=root)
    declared = os.environ.get(SOURCE_COMMIT_VARIABLE, "").strip()
    if declared and (commit is None or not commit.strip().startswith(declared)):
        # a copied tree (a GPU host): the commit is what the copier declared, and says so. A .git
        # that came with the copy but names another HEAD is stale, so it is reported, not used.
        missing["git_commit"] = (f"no git checkout here; commit declared by {SOURCE_COMMIT_VARIABLE}" if commit is None
                                 else f"the .git here names HEAD {commit.strip()[:12]}, not the tree; commit declared "
                                      f"by {SOURCE_COMMIT_VARIABLE}")
        missing["git_dirty"] = "unknown: the tree was copied, so git cannot compare it with the declared commit"
        return declared, None, missing
    if commit is None:
        missing["git_commit"] = f"not a git checkout with commits ({reason}); set {SOURCE_COMMIT_VARIABLE} " \
                                "when running a copied tree"
    status, reason = _run(["git", "status", "--porcelain"], cwd=root)
    if status is None:
        missing["git_dirty"] = f"git status unavailable ({reason})"
        return (commit.strip() if commit else None), None, missing
    return (commit.strip() if commit else None), bool(status.strip()), missing


def environment(repo_root: Path | str | None = None) -> dict:
    """Describe this machine and source tree as a JSON-able dict.

    Keys: ``gpus`` (list of names or None), ``driver``, ``cuda_runtime``
    (``torch.version.cuda``), ``nvcc``, ``torch``, ``cupy``, ``triton``,
    ``python``, ``platform``, ``hostname``, ``git_commit``, ``git_dirty``,
    ``timestamp_utc`` and ``missing`` (key -> why that value is None).
    """
    root = Path(repo_root) if repo_root is not None else REPO_ROOT
    missing: dict[str, str] = {}

    gpus, driver, gpu_missing = _gpus_and_driver()
    missing.update(gpu_missing)

    torch_version, reason = _module_version("torch")
    cuda_runtime = None
    if torch_version is None:
        missing["torch"] = reason
        missing["cuda_runtime"] = "torch not importable"
    else:
        import torch

        cuda_runtime = torch.version.cuda
        if cuda_runtime is None:
            missing["cuda_runtime"] = f"torch {torch_version} is a CPU-only build"

    nvcc, reason = _nvcc_version()
    if nvcc is None:
        missing["nvcc"] = reason

    versions = {}
    for name in ("cupy", "triton"):
        versions[name], reason = _module_version(name)
        if reason:
            missing[name] = reason

    commit, dirty, git_missing = _git_state(root)
    missing.update(git_missing)

    return {
        "gpus": gpus,
        "driver": driver,
        "cuda_runtime": cuda_runtime,
        "nvcc": nvcc,
        "torch": torch_version,
        "cupy": versions["cupy"],
        "triton": versions["triton"],
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "git_commit": commit,
        "git_dirty": dirty,
        "timestamp_utc": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "missing": missing,
    }


#: The keys :func:`environment` writes, by which a JSON document is recognised as an environment record.
ENVIRONMENT_KEYS = ("gpus", "driver", "cuda_runtime", "nvcc", "torch", "cupy", "triton", "python", "platform",
                    "hostname", "git_commit", "git_dirty", "timestamp_utc", "missing")


def environment_of(document: dict) -> dict | None:
    """The environment record in ``document``: the document itself when it has any of :data:`ENVIRONMENT_KEYS` (a
    run's environment.json), else its ``environment`` object when that has them (a bench file), else
    None. A whole results document stored as an environment would copy every figure into the inventory."""
    if any(key in document for key in ENVIRONMENT_KEYS):
        return document
    nested = document.get("environment")
    if isinstance(nested, dict) and any(key in nested for key in ENVIRONMENT_KEYS):
        return nested
    return None


def dirty_tree_hint(env: dict) -> str | None:
    """What to do when a recording names its tree by a HEAD with uncommitted changes (None when it does not).

    On a GPU host that received a copy of the working tree, a stale ``.git`` makes every recording name the
    wrong commit as dirty; :data:`SOURCE_COMMIT_VARIABLE` names the right one.
    """
    if not env.get("git_dirty") or os.environ.get(SOURCE_COMMIT_VARIABLE, "").strip():
        return None
    commit = str(env.get("git_commit") or "unknown")[:12]
    return (f"note: this recording names commit {commit} with uncommitted changes. If this tree is a copy of "
            f"another commit (a GPU host), set {SOURCE_COMMIT_VARIABLE}=<that commit> so recordings name it; "
            "otherwise commit first for a record that can be rebuilt.")


_hinted = False


def print_dirty_tree_hint(env: dict) -> None:
    """Print :func:`dirty_tree_hint` to stderr, once per process."""
    global _hinted
    hint = dirty_tree_hint(env)
    if hint and not _hinted:
        _hinted = True
        print(hint, file=sys.stderr)


# ----------------------------------------------------------------------------- inventory
#
# data/reference_inventory.json lists the artifacts results rest on, by hash, and the
# blockers: things a result would need whose provenance is unknown. Nothing in it is
# filled in by guess: an artifact is recorded only by hashing the file here and now,
# and what cannot be hashed is a blocker with its reason.

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
    """One artifact after rehashing: status is ``ok``, ``changed`` or ``missing``."""

    path: str
    kind: str
    status: str
    recorded_sha256: str
    current_sha256: str | None
    recorded_size: int
    current_size: int | None

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
    record = Artifact(relative, sha256_file(root / relative), (root / relative).stat().st_size, kind,
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


def verify_inventory(path: Path | str | None = None, root: Path | str | None = None) -> list[InventoryRow]:
    """Rehash every artifact; one row each with status ok, changed or missing."""
    root = Path(root) if root is not None else REPO_ROOT
    rows = []
    for artifact in load_inventory(path, root).artifacts:
        file = root / artifact.path
        if not file.is_file():
            rows.append(InventoryRow(artifact.path, artifact.kind, "missing", artifact.sha256, None,
                                     artifact.size, None))
            continue
        current = sha256_file(file)
        status = "ok" if current == artifact.sha256 else "changed"
        rows.append(InventoryRow(artifact.path, artifact.kind, status, artifact.sha256, current,
                                 artifact.size, file.stat().st_size))
    return rows


def blockers(path: Path | str | None = None, root: Path | str | None = None) -> list[Blocker]:
    """The inventory's blockers: what results would need but whose provenance is unknown."""
    return list(load_inventory(path, root).blockers)
