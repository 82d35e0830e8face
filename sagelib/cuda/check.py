"""``sagelib kernels check``: every kernel, every target architecture, through nvcc and ptxas.

Needs ``nvcc`` but no GPU (CI runs it). For each kernel file and each
architecture preset, a small translation unit includes the kernel and takes
the address of every instantiation the launcher uses (:mod:`sagelib.cuda.instances`),
so exactly those are compiled, once per build the launcher makes (``instances.builds``: the
default, and e.g. quant_qk.cu with 128-token blocks, reported as ``kernel<...> [-DQUANT_QK_ROWS=128]``).
ptxas' ``-v`` report gives, per kernel: registers, spill stores/loads, stack frame and static
shared memory.

A failed target, or spill bytes above the committed baseline
(``kernels/check_baseline.json``, which records every known spill and is
expected to hold zeros), fails the check.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

from sagelib.cuda import nvcc_cache, toolkit
from sagelib.cuda.build import ARCH_PRESETS, INCLUDE_DIR, KERNELS_DIR
from sagelib.cuda.instances import INSTANCES, ONLY_ARCHS, builds
from sagelib.errors import InputError

BASELINE_PATH = KERNELS_DIR / "check_baseline.json"


@dataclass
class KernelReport:
    kernel: str  #: demangled instantiation, e.g. "attn_mma_kernel<128, false>"
    file: str
    arch: str
    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    stack_bytes: int = 0
    smem_bytes: int = 0

    @property
    def key(self) -> str:
        return f"{self.kernel}@{self.arch}"


@dataclass
class TargetResult:
    file: str
    arch: str
    ok: bool
    kernels: list[KernelReport] = field(default_factory=list)
    error: str = ""
    options: tuple[str, ...] = ()  #: the build's extra nvcc options (instances.builds); () for the default

    @property
    def label(self) -> str:
        """The file, with the build's options where it has any."""
        return self.file + variant_suffix(self.options)


def variant_suffix(options: tuple[str, ...]) -> str:
    """What a build with ``options`` appends to its kernels' names: "" for the default, " [-D...]" otherwise."""
    return f" [{' '.join(options)}]" if options else ""


def instance_keys(file: str, arch: str, options: tuple[str, ...] = ()) -> list[str]:
    """The kernel@arch keys of ``file``'s instances in the build with ``options`` (the baseline's keys)."""
    return [f"{name}{variant_suffix(options)}@{arch}" for name in INSTANCES[file]]


@dataclass
class CheckResult:
    targets: list[TargetResult]
    failures: list[str]

    @property
    def ok(self) -> bool:
        return not self.failures


def nvcc_path() -> str | None:
    return toolkit.find("nvcc")


def gencode(arch: str) -> str:
    """nvcc's -gencode for a preset (the long form: -arch=sm_90a also runs a plain sm_90 pass)."""
    number = arch.removeprefix("sm_")
    return f"-gencode=arch=compute_{number},code=sm_{number}"


def translation_unit(file: str) -> str:
    names = ", ".join(f"(void *)&{name}" for name in INSTANCES[file])
    return (f'#include "{KERNELS_DIR / file}"\n'
            f"__attribute__((used)) static void *sagelib_instances[] = {{{names}}};\n")


_ENTRY = re.compile(r"Compiling entry function '(?P<name>[^']+)' for '(?P<arch>[^']+)'")
_FRAME = re.compile(r"(?P<stack>\d+) bytes stack frame, (?P<st>\d+) bytes spill stores, (?P<ld>\d+) bytes spill loads")
_USED = re.compile(r"Used (?P<regs>\d+) registers(?:.*?(?P<smem>\d+) bytes smem)?")


def demangle(names: list[str]) -> dict[str, str]:
    """Mangled -> short demangled name (``kernel<args>``); mangled names kept where c++filt is missing."""
    tool = shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    out = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True).stdout.splitlines()
    short = {}
    for mangled, full in zip(names, out):
        text = full.removeprefix("void ")
        depth, cut = 0, len(text)
        for i, ch in enumerate(text):  # drop the parameter list after the template arguments
            depth += ch == "<"
            depth -= ch == ">"
            if ch == "(" and depth == 0:
                cut = i
                break
        short[mangled] = text[:cut]
    return short


def parse_ptxas(log: str, file: str, arch: str) -> list[KernelReport]:
    """ptxas -v output -> one report per entry function."""
    reports: list[KernelReport] = []
    current: KernelReport | None = None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = KernelReport(kernel=m["name"], file=file, arch=arch)
            reports.append(current)
        elif current is not None and (m := _FRAME.search(line)):
            current.stack_bytes, current.spill_stores, current.spill_loads = int(m["stack"]), int(m["st"]), int(m["ld"])
        elif current is not None and (m := _USED.search(line)):
            current.registers = int(m["regs"])
            current.smem_bytes = int(m["smem"] or 0)
    names = demangle([r.kernel for r in reports])
    for r in reports:
        r.kernel = names.get(r.kernel, r.kernel)
    return reports


def cubin_path(workdir: Path, file: str, arch: str, options: tuple[str, ...] = ()) -> Path:
    """Where :func:`compile_target` writes ``file``'s cubin for ``arch``: one name per option set, so the default and
    its variants can build side by side in one folder."""
    variant = "".join(c if c.isalnum() else "_" for c in "_".join(options))
    return workdir / f"{file.removesuffix('.cu')}_{arch}{'_' + variant if variant else ''}.cubin"


def compile_target(file: str, arch: str, nvcc: str, workdir: Path, options: tuple[str, ...] = ()) -> TargetResult:
    """Compile ``file``'s instances for ``arch`` into :func:`cubin_path`; ``options`` are extra nvcc options, e.g. a
    build the launcher makes (instances.VARIANTS) or a macro of an experiment (``-DSM90_ABLATE_CVT=1``)."""
    unit = cubin_path(workdir, file, arch, options).with_suffix(".cu")
    unit.write_text(translation_unit(file))
    flags = ["-std=c++17", gencode(arch), "-cubin", f"-I{INCLUDE_DIR}", f"-I{KERNELS_DIR}", "-Xptxas", "-v", *options]
    cache = nvcc_cache.folder()
    build_key = nvcc_cache.key(nvcc, flags, translation_unit(file), KERNELS_DIR) if cache else ""
    log = nvcc_cache.load(cache, build_key, unit.with_suffix(".cubin")) if cache else None
    if log is None:
        proc = subprocess.run([nvcc, *flags, "-o", str(unit.with_suffix(".cubin")), str(unit)],
                              capture_output=True, text=True)
        log = proc.stdout + proc.stderr
        if proc.returncode == 0 and cache:
            nvcc_cache.store(cache, build_key, unit.with_suffix(".cubin"), log)
    else:
        proc = subprocess.CompletedProcess([], 0)
    if proc.returncode != 0:
        errors = [l for l in log.splitlines() if "error" in l.lower()][:8]
        return TargetResult(file, arch, False, error="\n".join(errors) or log[-2000:], options=options)
    kernels = parse_ptxas(log, file, arch)
    for k in kernels:
        k.kernel += variant_suffix(options)
    if len(kernels) != len(INSTANCES[file]):
        return TargetResult(file, arch, False, kernels, options=options,
                            error=f"expected {len(INSTANCES[file])} kernels in the ptxas report, found {len(kernels)}")
    return TargetResult(file, arch, True, kernels, options=options)


def load_baseline(path: Path = BASELINE_PATH) -> dict[str, int]:
    """kernel@arch -> spill-store bytes accepted (absent = 0)."""
    if not path.exists():
        return {}
    return {k: int(v) for k, v in json.loads(path.read_text()).get("spill_store_bytes", {}).items()}


def require_known(files, archs) -> None:
    """ValueError naming the first kernel file or architecture preset that sagelib does not build."""
    for f in files:
        if f not in INSTANCES:
            raise InputError(f"kernel: expected one of {sorted(INSTANCES)}, got {f!r}")
    for a in archs:
        if a not in ARCH_PRESETS:
            raise InputError(f"arch: expected one of {list(ARCH_PRESETS)}, got {a!r}")


def run_check(files: list[str] | None = None, archs: list[str] | None = None, *, jobs: int = 2,
              baseline: dict[str, int] | None = None) -> CheckResult:
    nvcc = nvcc_path()
    if nvcc is None:
        raise FileNotFoundError(toolkit.not_found("nvcc"))
    files = files or sorted(INSTANCES)
    archs = archs or list(ARCH_PRESETS)
    require_known(files, archs)
    baseline = load_baseline() if baseline is None else baseline
    with tempfile.TemporaryDirectory(prefix="sagelib-check-") as tmp:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            targets = list(pool.map(lambda fao: compile_target(fao[0], fao[1], nvcc, Path(tmp), fao[2]),
                                    [(f, a, o) for f in files for a in archs if a in ONLY_ARCHS.get(f, archs)
                                     for o in builds(f)]))
    failures = []
    for t in targets:
        if not t.ok:
            failures.append(f"{t.label} for {t.arch}: {t.error.splitlines()[0] if t.error else 'failed'}")
        for k in t.kernels:
            allowed = baseline.get(k.key, 0)
            if k.spill_stores > allowed:
                failures.append(f"{k.key}: {k.spill_stores} bytes of spill stores (baseline {allowed})")
    return CheckResult(targets, failures)


def baseline_document(result: CheckResult, previous: dict[str, int] | None = None) -> dict:
    """The baseline of ``result``'s spills; entries of ``previous`` for targets the check did not compile are kept."""
    checked = {key for t in result.targets for key in instance_keys(t.file, t.arch, t.options)}
    spills = {key: n for key, n in (previous or {}).items() if key not in checked}
    spills.update({k.key: k.spill_stores for t in result.targets for k in t.kernels if k.spill_stores})
    return {"about": "Spill-store bytes per kernel@arch that `sagelib kernels check` accepts; absent means 0. "
                     "Regenerate with `sagelib kernels check --write-baseline` only when a spill is understood.",
            "spill_store_bytes": dict(sorted(spills.items()))}


def format_table(result: CheckResult) -> str:
    rows = [("kernel", "arch", "regs", "spill st/ld", "stack", "smem")]
    for t in result.targets:
        for k in t.kernels:
            rows.append((k.kernel, k.arch, str(k.registers), f"{k.spill_stores}/{k.spill_loads}",
                         str(k.stack_bytes), str(k.smem_bytes)))
        if not t.ok:
            rows.append((f"{t.label} (FAILED)", t.arch, "-", "-", "-", "-"))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) for r in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def to_json(result: CheckResult) -> dict:
    return {"ok": result.ok, "failures": result.failures,
            "targets": [{**asdict(t), "kernels": [asdict(k) for k in t.kernels]} for t in result.targets]}
