"""An opt-in cache of nvcc's cubins and ptxas reports, for the runs that compile the same kernels again and again.

Set ``SAGELIB_NVCC_CACHE`` to a folder and :func:`sagelib.cuda.check.compile_target` (``sagelib kernels check``,
``sass``, ``fingerprint``, notebook 05's tables) takes a build whose inputs it has seen from there: the cubin and
the ptxas report of the earlier build. The key covers everything the build reads: the nvcc binary (path, size,
modification time), the command line without its file names, the translation unit, and every ``.cu``/``.cuh``
file under ``kernels/`` by content. The test suite sets it for one session (``tests/conftest.py``), so the
kernels are compiled once per session, not once per test; unset, every build runs nvcc.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

ENV = "SAGELIB_NVCC_CACHE"


def folder() -> Path | None:
    """The cache folder named by ``SAGELIB_NVCC_CACHE``, or None when caching is off."""
    value = os.environ.get(ENV, "").strip()
    return Path(value) if value else None


def sources_digest(kernels_dir: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in kernels_dir.rglob("*") if p.suffix in (".cu", ".cuh") and p.is_file()):
        digest.update(str(path.relative_to(kernels_dir)).encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def key(nvcc: str, args: list[str], unit_text: str, kernels_dir: Path) -> str:
    """One build's key: nvcc itself, its arguments (file names left out), the unit and the kernel sources."""
    binary = Path(shutil.which(nvcc) or nvcc)
    stat = binary.stat() if binary.exists() else None
    identity = f"{binary}|{stat.st_size if stat else 0}|{stat.st_mtime_ns if stat else 0}"
    digest = hashlib.sha256("\0".join([identity, *args, unit_text, sources_digest(kernels_dir)]).encode())
    return digest.hexdigest()


def load(cache: Path, build_key: str, cubin: Path) -> str | None:
    """The ptxas log of a cached build, its cubin copied to ``cubin``; None when the build is not cached."""
    entry = cache / build_key
    if not (entry / "log.txt").is_file() or not (entry / "out.cubin").is_file():
        return None
    shutil.copyfile(entry / "out.cubin", cubin)
    return (entry / "log.txt").read_text()


def store(cache: Path, build_key: str, cubin: Path, log: str) -> None:
    """Keep a successful build; written to a temporary folder and renamed, so a reader never sees half of one."""
    cache.mkdir(parents=True, exist_ok=True)
    entry = cache / build_key
    if entry.exists():
        return
    staging = Path(tempfile.mkdtemp(dir=cache, prefix=".staging-"))
    shutil.copyfile(cubin, staging / "out.cubin")
    (staging / "log.txt").write_text(log)
    try:
        staging.rename(entry)
    except OSError:  # another process stored the same build first
        shutil.rmtree(staging, ignore_errors=True)
