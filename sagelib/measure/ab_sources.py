"""Versions of some source files timed against each other on one GPU, in rotated order (``sagelib ab``).

Use it when the versions differ in code, not in a macro (for macros, ``SAGELIB_SM90_OPTIONS`` and
``sagelib sweep --schedule`` are simpler). A version is a folder that mirrors repository paths, e.g.
``build/ab/fast/kernels/quant_kv.cu``; :func:`snapshot` makes one from the working tree or a git revision.
:func:`run` copies each version's files over the working tree and runs a command once per version and
round. Round r starts at version r (rotated), because whatever runs first in a call tends to read slow.
``{out}`` in the command becomes that run's folder. The working tree's own files are put back at the end,
also after a failure or Ctrl-C. ``runs.json`` (order, version, exit status, seconds, folder) is written
beside one folder per run.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from sagelib import paths
from sagelib.errors import InputError

ROOT = paths.REPO_ROOT


def snapshot(dest: Path, files: list[str], rev: str | None, root: Path | None = None) -> list[str]:
    """Copy ``files`` (repository-relative) into ``dest``, from the working tree or from git ``rev``; ``root`` is the
    repository (default :data:`ROOT`)."""
    root = ROOT if root is None else root
    for rel in files:
        target = dest / _inside(rel, root)
        target.parent.mkdir(parents=True, exist_ok=True)
        if rev is None:
            if not (root / rel).is_file():
                raise InputError(f"snapshot: {rel} is not a file of the working tree ({root})")
            shutil.copyfile(root / rel, target)
        else:
            shown = subprocess.run(["git", "show", f"{rev}:{rel}"], cwd=root, capture_output=True)
            if shown.returncode != 0:
                raise InputError(f"snapshot: git show {rev}:{rel} failed: {shown.stderr.decode().strip()}")
            target.write_bytes(shown.stdout)
    return sorted(files)


def version_files(folder: Path) -> list[str]:
    """Repository-relative paths of every file a version folder holds."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def rotated(names: list[str], rounds: int) -> list[str]:
    return [names[(r + i) % len(names)] for r in range(rounds) for i in range(len(names))]


def check_versions(versions: dict[str, Path], root: Path) -> list[str]:
    """The files the versions replace; InputError when one version lacks a file another holds, or a file lies
    outside the repository."""
    files = sorted({f for folder in versions.values() for f in version_files(folder)})
    for name, folder in versions.items():
        missing = [f for f in files if not (folder / f).is_file()]
        if missing:
            raise InputError(f"--version {name}={folder}: has no {', '.join(missing)}; every version must hold the "
                             f"same files (make them with `sagelib ab snapshot`)")
    for rel in files:
        _inside(rel, root)
    return files


def run(versions: dict[str, Path], command: list[str], rounds: int, out: Path, root: Path | None = None,
        report=print) -> list[dict]:
    """Run ``command`` once per version and round (rotated) with that version's files in the tree ``root`` (default
    :data:`ROOT`); the records."""
    root = ROOT if root is None else root
    files = check_versions(versions, root)
    out.mkdir(parents=True, exist_ok=True)
    records = []
    with tempfile.TemporaryDirectory() as keep:
        saved = Path(keep)
        for rel in files:  # the working tree's own files, put back in `finally`
            if (root / rel).exists():
                (saved / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(root / rel, saved / rel)
        try:
            for order, name in enumerate(rotated(list(versions), rounds), 1):
                for rel in files:
                    shutil.copyfile(versions[name] / rel, root / rel)
                folder = out / f"{order:02d}-{name}"
                folder.mkdir(exist_ok=True)
                argv = [part.replace("{out}", str(folder)) for part in command]
                start = time.monotonic()
                with open(folder / "log.txt", "w") as log:
                    status = subprocess.run(argv, cwd=root, stdout=log, stderr=subprocess.STDOUT).returncode
                records.append({"order": order, "version": name, "exit": status,
                                "seconds": round(time.monotonic() - start, 2), "folder": str(folder)})
                report(f"{order:>3}  {name:<16} exit {status}  {records[-1]['seconds']:.1f} s")
        finally:
            for rel in files:
                if (saved / rel).exists():
                    shutil.copyfile(saved / rel, root / rel)
                else:
                    (root / rel).unlink(missing_ok=True)
    (out / "runs.json").write_text(json.dumps({"command": command, "files": files, "runs": records}, indent=1))
    return records


def _inside(rel: str, root: Path) -> str:
    path = (root / rel).resolve()
    if Path(rel).is_absolute() or not path.is_relative_to(root.resolve()):
        raise InputError(f"path {rel!r}: expected a path inside the repository ({root}), relative to its root")
    return rel
