"""What the compiler made of the attention kernels: their SASS, and the instruction mix of the exp pass.

A softmax-bound kernel lives or dies by how many instructions it issues per score. The contract fixes
the least a score can cost: its conversion from INT32 (an I2FP, or the integer add of the float-bias
form), the FFMA of scale and running max, the exp2 (MUFU.EX2), the FADD into the row sum, and half an
F2FP (two scores per e4m3 pack). This module compiles the kernels with ``nvcc`` (no GPU needed),
disassembles them with ``cuobjdump -sass``, finds the exp pass (the straight-line basic block with the
most MUFU.EX2: the unmasked path's) and counts its instructions by family, per exp2.

``sagelib kernels sass`` prints the table; notebook 05 draws it. cuobjdump and the nvdisasm it runs ship with the
CUDA toolkit and as NVIDIA's ``nvidia-cuda-cuobjdump`` and ``nvidia-cuda-nvdisasm`` wheels (the test extra has both).
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from sagelib.cuda import check, toolkit

#: the kernel files whose exp pass the table reports, and the architectures each is read for
EXP_PASS_TARGETS = {"attn_sm90.cu": ("sm_90a",), "attn_mma.cu": ("sm_90", "sm_120a")}

#: instruction families, in table order: (name, opcode prefixes)
FAMILIES = (
    ("exp2", ("MUFU.EX2",)),
    ("ffma", ("FFMA",)),
    ("fadd", ("FADD",)),
    ("fmul", ("FMUL",)),
    ("iadd", ("VIADD", "IADD3", "IMAD.IADD", "IADD")),
    ("i2f", ("I2FP", "I2F")),
    ("pack", ("F2FP",)),
    ("max", ("FMNMX", "VIMNMX", "VIMNMX3", "IMNMX")),
    ("sel", ("FSEL", "SEL", "ISETP", "FSETP")),
    ("mma", ("HMMA", "IMMA", "QMMA", "HGMMA", "IGMMA", "QGMMA")),
    ("smem", ("LDS", "LDSM", "STS", "STSM")),
)

#: every family a count has, in table order ("other": opcodes in none of FAMILIES)
FAMILY_NAMES = tuple(name for name, _ in FAMILIES) + ("other",)
#: the families the tables give per exp2 (exp2 itself is the divisor)
PER_EXP2_FAMILIES = tuple(name for name in FAMILY_NAMES if name != "exp2")

_LINE = re.compile(r"^\s*/\*(?P<address>[0-9a-f]{4,})\*/\s*(?P<body>[^;]*);")
_FUNCTION = re.compile(r"^\s*Function : (?P<name>\S+)")
_TARGET = re.compile(r"\bBRA\b.*?0x(?P<target>[0-9a-f]+)\s*$")


@dataclass(frozen=True)
class Instruction:
    address: int
    opcode: str     #: e.g. "MUFU.EX2", without the predicate
    predicate: str  #: "@P0", "@!P1", or "" when it always runs
    operands: str


def family(opcode: str) -> str:
    """The family (:data:`FAMILIES`) an opcode belongs to; "other" when none."""
    for name, prefixes in FAMILIES:
        if any(opcode == p or opcode.startswith(p + ".") for p in prefixes):
            return name
    return "other"


def parse_sass(text: str) -> dict[str, list[Instruction]]:
    """``cuobjdump -sass`` output -> the instructions of each function, by (mangled) name, in address order."""
    functions: dict[str, list[Instruction]] = {}
    current: list[Instruction] | None = None
    for line in text.splitlines():
        if m := _FUNCTION.match(line):
            current = functions.setdefault(m["name"], [])
        elif current is not None and (m := _LINE.match(line)):
            body, predicate = m["body"].strip(), ""
            if body.startswith("@"):
                predicate, _, body = body.partition(" ")
            opcode, _, operands = body.strip().partition(" ")
            current.append(Instruction(int(m["address"], 16), opcode, predicate, operands.strip()))
    return functions


def basic_blocks(instructions: list[Instruction]) -> list[list[Instruction]]:
    """Straight-line runs: a block starts at a branch target and ends after a branch or an EXIT."""
    targets = set()
    for ins in instructions:
        if ins.opcode.startswith("BRA") and (m := _TARGET.search(ins.operands)):
            targets.add(int(m["target"], 16))
    blocks, current = [], []
    for ins in instructions:
        if ins.address in targets and current:
            blocks.append(current)
            current = []
        current.append(ins)
        if ins.opcode.startswith(("BRA", "EXIT", "RET")):
            blocks.append(current)
            current = []
    if current:
        blocks.append(current)
    return blocks


def exp_pass(instructions: list[Instruction]) -> list[Instruction]:
    """The basic block with the most MUFU.EX2; of equals, the one with the fewest selects (the unmasked path's,
    where the masked one compares and selects per score); [] when the function has no exp2."""
    def rank(block):
        return (sum(ins.opcode == "MUFU.EX2" for ins in block), -sum(family(ins.opcode) == "sel" for ins in block))

    blocks = [block for block in basic_blocks(instructions) if rank(block)[0]]
    return max(blocks, key=rank) if blocks else []


@dataclass(frozen=True)
class ExpPassMix:
    """The instruction families of one kernel's exp pass."""

    kernel: str  #: demangled, e.g. "attn_sm90_kernel<64, 6, 3, 128, false>"
    arch: str
    counts: dict[str, int]  #: family -> instructions (every family of FAMILIES, and "other")

    @property
    def instructions(self) -> int:
        return sum(self.counts.values())

    @property
    def exp2(self) -> int:
        return self.counts.get("exp2", 0)

    def per_exp2(self, name: str | None = None) -> float:
        """Instructions of family ``name`` (all of them when None) per MUFU.EX2 of the pass."""
        total = self.instructions if name is None else self.counts.get(name, 0)
        return total / self.exp2 if self.exp2 else float("nan")


def mix_of(kernel: str, arch: str, instructions: list[Instruction]) -> ExpPassMix:
    counts = dict.fromkeys(FAMILY_NAMES, 0)
    for ins in exp_pass(instructions):
        counts[family(ins.opcode)] += 1
    return ExpPassMix(kernel, arch, counts)


def find_cuobjdump() -> str | None:
    """cuobjdump, where nvdisasm (which it runs) is found as well; None otherwise."""
    cuobjdump = toolkit.find("cuobjdump")
    if cuobjdump is None:
        return None
    beside = Path(cuobjdump).parent / "nvdisasm"
    return cuobjdump if beside.exists() or toolkit.find("nvdisasm") else None


def unavailable_reason() -> str | None:
    """None when the exp-pass table can be made here (nvcc, cuobjdump and nvdisasm); otherwise what is missing."""
    if check.nvcc_path() is None:
        return "needs nvcc (the CUDA toolkit) to compile the kernels"
    if find_cuobjdump() is None:
        return ("needs cuobjdump and nvdisasm to read the SASS: install the CUDA toolkit, or pip install "
                "nvidia-cuda-cuobjdump nvidia-cuda-nvdisasm (both in sagelib's test extra)")
    return None


def sass_text(cubin: Path, cuobjdump: str) -> str:
    """``cuobjdump -sass`` of a cubin; cuobjdump runs nvdisasm from PATH, which the toolkit and the wheels keep
    beside it."""
    nvdisasm = toolkit.find("nvdisasm")
    folders = [str(Path(cuobjdump).parent)] + ([str(Path(nvdisasm).parent)] if nvdisasm else [])
    env = dict(os.environ, PATH=os.pathsep.join(folders + [os.environ.get("PATH", "")]))
    proc = subprocess.run([cuobjdump, "-sass", str(cubin)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"cuobjdump -sass {cubin} failed: {(proc.stderr or proc.stdout).strip()[:500]}")
    return proc.stdout


def disassemble(cubin: Path, cuobjdump: str) -> dict[str, list[Instruction]]:
    return parse_sass(sass_text(cubin, cuobjdump))


def exp_pass_mixes(targets: dict[str, tuple[str, ...]] = EXP_PASS_TARGETS, *, options: tuple[str, ...] = (),
                   jobs: int = 2) -> list[ExpPassMix]:
    """Compile each (kernel file, arch) of ``targets`` with nvcc (and the extra nvcc ``options``, e.g. an
    experiment's macro) and read every instance's exp pass.

    Raises RuntimeError naming what is missing (:func:`unavailable_reason`) or which compile failed."""
    return exp_pass_builds(targets, (options,), jobs=jobs)[0]


def exp_pass_builds(targets: dict[str, tuple[str, ...]], option_sets: tuple[tuple[str, ...], ...], *,
                    jobs: int = 2) -> list[list[ExpPassMix]]:
    """:func:`exp_pass_mixes` for each of ``option_sets`` (e.g. an experiment's build and the default one), every
    compile in one pool, so the builds run side by side; one list of mixes per option set, in their order."""
    missing = unavailable_reason()
    if missing:
        raise RuntimeError(f"the SASS table {missing}")
    nvcc, cuobjdump = check.nvcc_path(), find_cuobjdump()
    pairs = [(file, arch) for file, archs in targets.items() for arch in archs]
    check.require_known([file for file, _ in pairs], [arch for _, arch in pairs])
    jobs_list = [(file, arch, options, i) for i, options in enumerate(option_sets) for file, arch in pairs]
    builds: list[list[ExpPassMix]] = [[] for _ in option_sets]
    with tempfile.TemporaryDirectory(prefix="sagelib-sass-") as tmp:
        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            results = list(pool.map(lambda fao: check.compile_target(fao[0], fao[1], nvcc, Path(tmp), fao[2]),
                                    jobs_list))
        for (file, arch, options, i), result in zip(jobs_list, results):
            if not result.ok:
                built = f" with {' '.join(options)}" if options else ""
                raise RuntimeError(f"{file} for {arch}{built} did not compile: {result.error.splitlines()[0]}")
            functions = disassemble(check.cubin_path(Path(tmp), file, arch, options), cuobjdump)
            names = check.demangle(list(functions))
            wanted = set(check.INSTANCES[file])
            builds[i] += [mix_of(names[mangled], arch, instructions) for mangled, instructions in functions.items()
                          if names[mangled] in wanted]
    return builds


def format_table(mixes: list[ExpPassMix]) -> str:
    """One row per kernel: the exp pass's length and exp2 count, then each family per exp2."""
    width = max([len("kernel")] + [len(m.kernel) for m in mixes])
    lines = [f"{'':<{width}}  {'':<7} {'block':>5} {'':>4}  instructions per exp2",
             f"{'kernel':<{width}}  {'arch':<7} {'instr':>5} {'exp2':>4}  "
             + " ".join(f"{name:>5}" for name in PER_EXP2_FAMILIES) + f" {'all':>5}"]
    for m in mixes:
        lines.append(f"{m.kernel:<{width}}  {m.arch:<7} {m.instructions:>5} {m.exp2:>4}  "
                     + " ".join(f"{m.per_exp2(name):>5.2f}" for name in PER_EXP2_FAMILIES) + f" {m.per_exp2():>5.2f}")
    return "\n".join(lines)


def format_change(baseline: list[ExpPassMix], changed: list[ExpPassMix], options: tuple[str, ...]) -> str:
    """What ``options`` did to each kernel's exp pass: one row per kernel in both lists, the block's length before
    and after, then each family's change in instructions per exp2 (after minus before; blank where none)."""
    before = {(m.kernel, m.arch): m for m in baseline}
    pairs = [(before[(m.kernel, m.arch)], m) for m in changed if (m.kernel, m.arch) in before]
    width = max([len("kernel")] + [len(m.kernel) for _, m in pairs])

    def delta(old: ExpPassMix, new: ExpPassMix, name: str | None) -> str:
        if not (old.exp2 and new.exp2):
            return f"{'n/a':>6}"
        change = new.per_exp2(name) - old.per_exp2(name)
        return f"{change:>+6.2f}" if abs(change) >= 0.005 else f"{'':>6}"

    lines = [f"{' '.join(options)} against the default build: change in instructions per exp2",
             f"{'kernel':<{width}}  {'arch':<7} {'instr':>12}  " + " ".join(f"{name:>6}" for name in PER_EXP2_FAMILIES)
             + f" {'all':>6}"]
    for old, new in pairs:
        lines.append(f"{new.kernel:<{width}}  {new.arch:<7} {old.instructions:>5}->{new.instructions:<5}  "
                     + " ".join(delta(old, new, name) for name in PER_EXP2_FAMILIES) + f" {delta(old, new, None)}")
    if pairs and all(old.counts == new.counts for old, new in pairs):
        lines.append("no exp pass changed: check the macro's name (a name no kernel reads changes nothing)")
    return "\n".join(line.rstrip() for line in lines)


SCHEMA = "sagelib.sass_exp_pass/1"


def rows(mixes: list[ExpPassMix]) -> list[dict]:
    """The table as rows (a notebook's, a report's): kernel, arch, the block's length and exp2, and each family
    per exp2 (None for a kernel without exp2: strict JSON has no NaN)."""
    def per(m: ExpPassMix, name: str | None) -> float | None:
        return round(m.per_exp2(name), 3) if m.exp2 else None

    return [{"kernel": m.kernel, "arch": m.arch, "block instructions": m.instructions, "exp2": m.exp2,
             **{f"{name} per exp2": per(m, name) for name in PER_EXP2_FAMILIES}, "all per exp2": per(m, None)}
            for m in mixes]


def exp_pass_table(targets: dict[str, tuple[str, ...]] = EXP_PASS_TARGETS) -> dict:
    """{"mixes": [...], "reason": None} where the table can be made here; {"mixes": [], "reason": why} otherwise
    (nvcc or cuobjdump missing, a compile failed): for a notebook, which says why instead of failing."""
    reason = unavailable_reason()
    if reason is None:
        try:
            return {"mixes": exp_pass_mixes(targets), "reason": None}
        except RuntimeError as exc:
            reason = str(exc)
    return {"mixes": [], "reason": reason}


def to_json(mixes: list[ExpPassMix], options: tuple[str, ...] = (),
            baseline: list[ExpPassMix] | None = None) -> dict:
    """The table as a document: each kernel's counts by family, and the nvcc options it was built with; with
    ``baseline``, the same kernels built without the options as well."""
    def kernels(found: list[ExpPassMix]) -> list[dict]:
        return [{"kernel": m.kernel, "arch": m.arch, "instructions": m.instructions, "exp2": m.exp2,
                 "counts": m.counts} for m in found]

    document = {"schema": SCHEMA, "options": list(options), "kernels": kernels(mixes)}
    if baseline is not None:
        document["baseline_kernels"] = kernels(baseline)
    return document


# --- fingerprints: one hash of each built instance's machine code, to show that a source change left it alone ---

FINGERPRINT_SCHEMA = "sagelib.sass_fingerprint/1"
_ENCODING = re.compile(r"/\*\s*(0x[0-9a-f]{16})\s*\*/")


def function_listings(text: str) -> dict[str, list[str]]:
    """``cuobjdump -sass`` output -> each function's lines as ``instruction | encodings``: the address comment
    dropped, the instruction text kept, and the 64-bit encoding words (which hold the scheduling control bits the
    text leaves out) appended to the instruction they encode."""
    functions: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if m := _FUNCTION.match(line):
            current = functions.setdefault(m["name"], [])
        elif current is not None and (m := _LINE.match(line)):
            current.append(" ".join(m["body"].split()) + " |" + "".join(" " + w for w in _ENCODING.findall(line)))
        elif current and line.strip().startswith("/* 0x") and (words := _ENCODING.findall(line)):
            current[-1] += "".join(" " + w for w in words)  # the instruction's second encoding word
    return functions


def fingerprint(lines: list[str]) -> str:
    """sha256 of a function's normalised listing (:func:`function_listings`)."""
    return hashlib.sha256("\n".join(lines).encode()).hexdigest()


def fingerprints(files: list[str] | None = None, archs: list[str] | None = None, *, jobs: int = 2) -> dict[str, str]:
    """Compile every instance the launcher builds (``instances.INSTANCES``, each build of ``instances.builds``) for
    every architecture it is built for, as `sagelib kernels check` does, and hash each one's SASS:
    ``"file: kernel<...>[ [-D...]]@arch" -> sha256``. RuntimeError names what is missing or what failed."""
    missing = unavailable_reason()
    if missing:
        raise RuntimeError(f"the fingerprints {missing}")
    nvcc, cuobjdump = check.nvcc_path(), find_cuobjdump()
    files = files or sorted(check.INSTANCES)
    archs = archs or list(check.ARCH_PRESETS)
    check.require_known(files, archs)
    work = [(f, a, o) for f in files for a in archs if a in check.ONLY_ARCHS.get(f, archs) for o in check.builds(f)]
    found: dict[str, str] = {}
    with tempfile.TemporaryDirectory(prefix="sagelib-fingerprint-") as tmp:
        def one(fao):
            file, arch, options = fao
            result = check.compile_target(file, arch, nvcc, Path(tmp), options)
            if not result.ok:
                raise RuntimeError(f"{result.label} for {arch} did not compile: {result.error.splitlines()[0]}")
            return fao, listings_of(check.cubin_path(Path(tmp), file, arch, options), cuobjdump)

        with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            for (file, arch, options), functions in pool.map(one, work):
                names = check.demangle(list(functions))
                wanted = set(check.INSTANCES[file])
                for mangled, lines in functions.items():
                    if names[mangled] in wanted:
                        found[f"{file}: {names[mangled]}{check.variant_suffix(options)}@{arch}"] = fingerprint(lines)
                absent = wanted - {names[m] for m in functions}
                if absent:
                    raise RuntimeError(f"{file} for {arch}: no SASS for {sorted(absent)}")
    return dict(sorted(found.items()))


def listings_of(cubin: Path, cuobjdump: str) -> dict[str, list[str]]:
    """:func:`function_listings` of a cubin."""
    return function_listings(sass_text(cubin, cuobjdump))


def compare_fingerprints(before: dict[str, str], after: dict[str, str]) -> tuple[str, bool]:
    """A table of every instance in either set: identical, DIFFERENT, or only in one; and whether all are identical."""
    keys = sorted(set(before) | set(after))
    width = max([len("instance@arch")] + [len(k) for k in keys])
    lines = [f"{'instance@arch':<{width}}  result", f"{'-' * width}  ------"]
    same = 0
    for key in keys:
        if key not in after:
            verdict = "only in the baseline"
        elif key not in before:
            verdict = "new (not in the baseline)"
        elif before[key] == after[key]:
            verdict, same = "identical", same + 1
        else:
            verdict = "DIFFERENT"
        lines.append(f"{key:<{width}}  {verdict}")
    ok = same == len(keys)
    lines.append(f"\n{same} of {len(keys)} instance x arch builds identical" + ("" if ok else "; NOT ALL IDENTICAL"))
    return "\n".join(lines), ok
