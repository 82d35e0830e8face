"""Building ``kernels/*.cu`` with NVRTC, for the running GPU or a named architecture preset.

The cache key is a hash of the kernel source, of every header under
``kernels/include`` (NVRTC resolves them itself, so a cache keyed on the main
file alone would serve a stale binary after a header edit), of the options,
the architecture, the template instantiations and the NVRTC version. Cubins
live in ``$SAGELIB_KERNEL_CACHE`` (default ``~/.cache/sagelib/kernels``).

NVRTC is driven directly (``cupy_backends.cuda.libs.nvrtc``) rather than
through ``cupy.RawModule``: CuPy appends its own ``-arch`` option, which NVRTC 12
refuses next to ours and which would hide the ``a`` of ``sm_90a``. Compiling
needs no GPU; loading the cubin does (:func:`load_function`). CuPy's ``getCUBIN``
drops the cubin's last byte (it strips a string's trailing NUL); the driver loads
such a cubin, but cuobjdump and nvdisasm refuse it, so :func:`whole_elf` puts it back.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import struct
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from sagelib import paths
from sagelib.errors import InputError, SagelibError

REPO_ROOT = paths.REPO_ROOT
KERNELS_DIR = REPO_ROOT / "kernels"
INCLUDE_DIR = KERNELS_DIR / "include"

#: Architecture presets every kernel is built and checked for.
ARCH_PRESETS = ("sm_89", "sm_90", "sm_90a", "sm_120a", "sm_121a")

#: Compute capability -> the preset a kernel runs with on that GPU.
_ARCH_BY_CAPABILITY = {(8, 9): "sm_89", (9, 0): "sm_90", (12, 0): "sm_120a", (12, 1): "sm_121a"}

BASE_OPTIONS = ("-std=c++17",)


def macro_options(words, argument: str, example: str) -> tuple[str, ...]:
    """``words`` as a build's extra options, each a macro definition (-DNAME[=VALUE]) or removal (-UNAME): what an
    experiment's switch needs, and all that NVRTC and nvcc builds here accept from a user. A ValueError names
    ``argument``, the words that are not macro options or name a macro no kernel source reads (a misspelt switch
    would build the default and time it as the experiment), and ``example``."""
    words = tuple(words)
    bad = [w for w in words if not _MACRO_WORD.fullmatch(w)]
    if bad:
        raise InputError(f"{argument}: expected -DNAME[=VALUE] or -UNAME words, got {bad}; e.g. {example}")
    unread = [w for w in words if _MACRO_WORD.fullmatch(w).group("name") not in kernel_identifiers()]
    if unread:
        raise InputError(f"{argument}: no kernel source reads the macro of {unread} (kernels/*.cu and kernels/include "
                         f"searched), so it would build the default; check the name, e.g. {example}")
    return words


def define_options(defines, argument: str = "--define") -> tuple[str, ...]:
    """A script's ``--define NAME[=VALUE]`` arguments as build options, checked as :func:`macro_options` checks them
    (a ValueError names ``argument``)."""
    return macro_options([f"-D{d}" for d in defines], argument, f"{argument} SM90_ABLATE_PACK=1")


_MACRO_WORD = re.compile(r"-[DU](?P<name>[A-Za-z_][A-Za-z0-9_]*)(=.*)?", re.S)


def kernel_identifiers() -> frozenset[str]:
    """Every identifier in the kernel sources (kernels/*.cu, kernels/include/), read again when a file changes."""
    files = sorted(p for p in [*KERNELS_DIR.glob("*.cu"), *INCLUDE_DIR.rglob("*")] if p.is_file())
    return _identifiers_of(tuple((str(p), p.stat().st_mtime_ns) for p in files))


@lru_cache(maxsize=4)
def _identifiers_of(stamped_files: tuple[tuple[str, int], ...]) -> frozenset[str]:
    found: set[str] = set()
    for path, _ in stamped_files:
        found.update(re.findall(r"[A-Za-z_][A-Za-z0-9_]*", Path(path).read_text(errors="replace")))
    return frozenset(found)


class KernelCompileError(SagelibError, ValueError):
    """A kernel failed to compile; the message lists each diagnostic as ``file:line: text``."""


@dataclass(frozen=True)
class BuildRequest:
    """One cubin: a kernel file, the template instantiations it must contain, an architecture."""

    kernel: str  #: file name under kernels/, e.g. "attn_mma.cu"
    name_expressions: tuple[str, ...]  #: e.g. ("attn_mma_kernel<128, false>",)
    arch: str  #: one of ARCH_PRESETS
    options: tuple[str, ...] = field(default_factory=tuple)

    def __post_init__(self):
        if self.arch not in ARCH_PRESETS:
            raise InputError(f"arch: expected one of {list(ARCH_PRESETS)}, got {self.arch!r}")
        if not (KERNELS_DIR / self.kernel).is_file():
            known = sorted(p.name for p in KERNELS_DIR.glob("*.cu"))
            raise InputError(f"kernel: expected a file in kernels/ ({', '.join(known)}), got {self.kernel!r}")


@dataclass
class Built:
    """A compiled cubin and the mangled name of each requested instantiation."""

    cubin: bytes
    lowered: dict[str, str]
    key: str
    from_cache: bool


def kernel_files() -> list[Path]:
    """Every kernel source (``kernels/*.cu``), sorted."""
    return sorted(KERNELS_DIR.glob("*.cu"))


def include_hash() -> str:
    """sha256 over every header in kernels/include (names and contents)."""
    h = hashlib.sha256()
    for path in sorted(INCLUDE_DIR.rglob("*")):
        if path.is_file():
            h.update(str(path.relative_to(INCLUDE_DIR)).encode())
            h.update(b"\0")
            h.update(path.read_bytes())
    return h.hexdigest()


def source_hash(kernel: str) -> str:
    """sha256 of one kernel file plus every header: what a result's provenance records."""
    h = hashlib.sha256((KERNELS_DIR / kernel).read_bytes())
    h.update(include_hash().encode())
    return h.hexdigest()[:16]


def arch_for_capability(major: int, minor: int) -> str:
    """The preset for a GPU of compute capability major.minor (ValueError when unsupported)."""
    try:
        return _ARCH_BY_CAPABILITY[(major, minor)]
    except KeyError:
        raise InputError(
            f"arch: the portable mma.sync kernels need compute capability 8.9, 9.0, 12.0 or 12.1 "
            f"(fp8 mma.sync), got {major}.{minor}"
        ) from None


def cache_dir() -> Path:
    return Path(os.environ.get("SAGELIB_KERNEL_CACHE", Path.home() / ".cache" / "sagelib" / "kernels"))


def nvrtc_version() -> tuple[int, int] | None:
    """NVRTC's (major, minor), or None where the library cannot be loaded."""
    try:
        from cupy_backends.cuda.libs import nvrtc

        return tuple(nvrtc.getVersion())
    except Exception:
        return None


def nvrtc_options(request: BuildRequest) -> tuple[str, ...]:
    extra = ("-lineinfo",) if os.environ.get("SAGELIB_KERNEL_LINEINFO") else ()
    return (*BASE_OPTIONS, f"-arch={request.arch}", f"-I{INCLUDE_DIR}", f"-I{KERNELS_DIR}",
            f"-DSAGELIB_INCLUDE_HASH=0x{include_hash()[:15]}", *extra, *request.options)


def cache_key(request: BuildRequest) -> str:
    h = hashlib.sha256()
    for part in ((KERNELS_DIR / request.kernel).read_text(), include_hash(), repr(nvrtc_options(request)),
                 repr(sorted(request.name_expressions)), repr(nvrtc_version())):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


def compile_cubin(request: BuildRequest, *, use_cache: bool = True) -> Built:
    """Compile (or fetch from the cache) the cubin of ``request``. Needs NVRTC, not a GPU."""
    key = cache_key(request)
    cubin_path = cache_dir() / f"{key}.cubin"
    names_path = cache_dir() / f"{key}.json"
    if use_cache and cubin_path.is_file() and names_path.is_file():
        return Built(cubin_path.read_bytes(), json.loads(names_path.read_text()), key, True)
    cubin, lowered = _nvrtc_compile(request)
    cache_dir().mkdir(parents=True, exist_ok=True)
    tmp = cubin_path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(cubin)
    tmp.replace(cubin_path)
    names_path.write_text(json.dumps(lowered))
    return Built(cubin, lowered, key, False)


def _nvrtc_compile(request: BuildRequest) -> tuple[bytes, dict[str, str]]:
    try:
        from cupy_backends.cuda.libs import nvrtc
    except Exception as exc:  # pragma: no cover - depends on the install
        raise RuntimeError(f"NVRTC is not available: {exc}; install with pip install -e '.[cuda13]'") from exc
    path = KERNELS_DIR / request.kernel
    program = nvrtc.createProgram(path.read_text(), f"kernels/{request.kernel}", (), ())
    try:
        for name in request.name_expressions:
            nvrtc.addNameExpression(program, name)
        try:
            nvrtc.compileProgram(program, nvrtc_options(request))
        except nvrtc.NVRTCError:
            raise KernelCompileError(format_compile_log(request, nvrtc.getProgramLog(program))) from None
        lowered = {name: nvrtc.getLoweredName(program, name) for name in request.name_expressions}
        return whole_elf(nvrtc.getCUBIN(program)), lowered
    finally:
        nvrtc.destroyProgram(program)


def elf_size(image: bytes) -> int:
    """The bytes a 64-bit little-endian ELF image declares: its header, program and section
    headers, and every section's contents (what a complete file holds)."""
    if image[:4] != b"\x7fELF" or len(image) < 64 or image[4] != 2 or image[5] != 1:
        raise InputError(f"image: expected a 64-bit little-endian ELF, got {image[:8]!r}")
    ph_off, sh_off = struct.unpack_from("<QQ", image, 0x20)
    ph_size, ph_count, sh_size, sh_count = struct.unpack_from("<HHHH", image, 0x36)
    end = max(64, ph_off + ph_size * ph_count, sh_off + sh_size * sh_count)
    for i in range(sh_count):
        at = sh_off + i * sh_size
        if at + 0x28 > len(image):
            break
        kind, = struct.unpack_from("<I", image, at + 4)
        offset, size = struct.unpack_from("<QQ", image, at + 0x18)
        if kind != 8:  # SHT_NOBITS occupies no bytes in the file
            end = max(end, offset + size)
    return end


def whole_elf(cubin: bytes) -> bytes:
    """``cubin`` padded with NULs to the size its ELF headers declare (CuPy's getCUBIN returns it one
    byte short, a NUL it takes for a string terminator); unchanged when already whole."""
    missing = elf_size(cubin) - len(cubin)
    if missing > 8:
        raise InputError(f"cubin: {missing} bytes short of what its ELF headers declare; expected at most "
                         "the one byte CuPy's getCUBIN drops. Rebuild with a clean $SAGELIB_KERNEL_CACHE")
    return cubin + b"\0" * max(0, missing)


_DIAGNOSTIC = re.compile(r"^(?P<file>[^\s()]+)\((?P<line>\d+)\): (?P<text>.*)$")


def format_compile_log(request: BuildRequest, log: str) -> str:
    """NVRTC's log with every diagnostic as ``kernels/file.cu:LINE: text`` (repo-relative paths)."""
    lines = [f"kernel: {request.kernel} failed to compile for {request.arch}"]
    for raw in log.splitlines():
        match = _DIAGNOSTIC.match(raw.strip())
        if match:
            file = match["file"]
            try:
                file = str(Path(file).resolve().relative_to(REPO_ROOT)) if Path(file).is_absolute() else file
            except ValueError:
                pass
            lines.append(f"  {file}:{match['line']}: {match['text']}")
        elif raw.strip() and "detected during" not in raw:
            lines.append(f"  {raw.strip()}")
    return "\n".join(lines)


@lru_cache(maxsize=None)
def load_function(kernel: str, name_expression: str, arch: str | None = None, options: tuple[str, ...] = ()):
    """A launchable ``cupy.cuda.function.Function`` for one instantiation (compiles on first use)."""
    import cupy

    if arch is None:
        major, minor = cupy.cuda.Device().compute_capability[0], cupy.cuda.Device().compute_capability[1:]
        arch = arch_for_capability(int(major), int(minor))
    built = compile_cubin(BuildRequest(kernel, (name_expression,), arch, tuple(options)))
    module = cupy.cuda.function.Module()
    module.load(built.cubin)
    return module.get_function(built.lowered[name_expression])  # the Function keeps its Module alive
