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
:func:`add_blocker` extend it."""

from __future__ import annotations

import datetime as _dt
import importlib
import os
import platform
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

from sagelib import paths
from sagelib.cuda import toolkit

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


def environment_or_reason() -> dict:
    """:func:`environment`, with the dirty-tree hint printed once, or a note of why it could not be taken: the
    environment every measurement document carries; taking it must never sink the measurement."""
    try:
        env = environment()
        print_dirty_tree_hint(env)
        return env
    except Exception as exc:
        return {"missing": {"environment": f"provenance.environment() failed: {type(exc).__name__}: {exc}"}}
