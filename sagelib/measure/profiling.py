"""Profiler counters, sanitizers and compiler resource figures for attention kernels.

Three tools answer three questions, and each one's absence is reported, never hidden:

* **Nsight Compute** (``ncu``): what one launch of a kernel did on the hardware. :func:`ncu_profile`
  runs a program under ``ncu --clock-control none`` (the card's clocks are left as found, as
  everywhere in this workbook), collects the sections and metrics that decide attention kernels
  (:data:`NCU_SECTIONS`, :data:`NCU_METRICS`) on the launches inside the program's
  ``cudaProfilerStart``/``Stop`` region, and parses ncu's CSV into JSON: every raw metric, plus a
  :func:`summarize_kernel` digest (tensor-pipe utilisation, achieved occupancy, registers, local
  memory traffic, shared-memory bank conflicts and wavefronts, DRAM throughput, issue stalls).
* **compute-sanitizer**: does a kernel touch memory it must not, race, or read uninitialised
  memory. :func:`sanitize` wraps one tool run and reads its error summary.
* **ptxas** (through the kernels engineer's ``sagelib.cuda.check``): registers, spills, stack and
  shared memory per kernel and architecture, at no device time. :func:`ptxas_table`.

The program profiled is usually ``python -m sagelib profile launch ...`` (see
:func:`launch_command`), which warms a backend up outside the profiled region and then makes
exactly one call inside it, so ncu sees one launch of each kernel that call makes."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
from dataclasses import dataclass

from sagelib import paths
from sagelib.cuda import toolkit
from sagelib.errors import InputError, KernelUnavailable

REPO_ROOT = paths.REPO_ROOT


TIMEOUT_S = 600  # seconds one profiled program (ncu, compute-sanitizer) may run


@dataclass
class ToolStatus:
    name: str
    path: str | None
    version: str | None = None
    reason: str | None = None

    @property
    def available(self) -> bool:
        return self.path is not None and self.reason is None


def tool_status(name: str) -> ToolStatus:
    """Where ``name`` (ncu, compute-sanitizer, nvcc) is and its version, or why it is missing."""
    path = toolkit.find(name)
    if path is None:
        return ToolStatus(name, None, reason=toolkit.not_found(name))
    try:
        done = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30)
        lines = [line for line in (done.stdout + done.stderr).splitlines() if line.strip()]
        return ToolStatus(name, path, version=lines[-1].strip() if lines else None)
    except (OSError, subprocess.SubprocessError) as exc:
        return ToolStatus(name, None, reason=f"{path} --version failed: {exc}")


def tools() -> dict[str, ToolStatus]:
    return {name: tool_status(name) for name in ("ncu", "compute-sanitizer", "nvcc")}


def launch_command(backend: str, shape: str, *, causal: bool = False, dtype: str = "fp16",
                   mode: str = "end_to_end", layout: str = "HND", warmup: int = 3) -> list[str]:
    """The argv of a program that makes one profiled call of ``backend`` on ``shape``."""
    return [sys.executable, "-m", "sagelib", "profile", "launch", "--backend", backend, "--shape", shape,
            "--causal", "yes" if causal else "no", "--dtype", dtype, "--mode", mode, "--layout", layout,
            "--warmup", str(warmup)]


def launch_once(backend_name: str, shape_spec: str, *, causal: bool, dtype: str, mode: str, layout: str,
                warmup: int) -> str:
    """Warm ``backend`` up, then make exactly one call inside a cudaProfilerStart/Stop region."""
    import torch

    from sagelib import backends
    from sagelib.inputs import parse_dtype, parse_shape, random_qkv

    shape = parse_shape(shape_spec)
    if not torch.cuda.is_available():
        raise KernelUnavailable("profile launch: needs a CUDA GPU and torch sees none; run it on a GPU host")
    backend = backends.get(backend_name)
    device = torch.device("cuda")
    q, k, v = random_qkv(shape, parse_dtype(dtype), device, layout, seed=0)
    if mode == "kernel_only":
        call = backend.kernel_only(q, k, v, causal=causal, layout=layout)
        if call is None:
            raise InputError(f"--mode kernel_only: backend {backend_name!r} has no kernel-only closure; "
                             "use --mode end_to_end")
    elif mode == "end_to_end":
        call = lambda: backend.attention(q, k, v, causal=causal, layout=layout)  # noqa: E731
    else:
        raise InputError(f"--mode: expected end_to_end or kernel_only, got {mode!r}")
    for _ in range(max(warmup, 1)):
        call()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    call()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return f"profiled one {mode} call of {backend_name} on {shape.label} (causal={causal})"


def program_environment() -> dict[str, str]:
    """The environment a profiled program runs in: this one, with the repository importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH")]))
    return env


def ptxas_table(files=None, archs=None) -> dict:
    """Registers, spills, stack and shared memory per kernel and architecture, from the kernels check.

    ``{"rows": [...], "failures": [...], "reason": None}``, or no rows and the reason (the check
    module or nvcc absent). The figures come from ``sagelib.cuda.check.run_check`` (the kernels
    engineer's ptxas runner, no GPU needed); this only asks it, so both agree on what a spill is.
    ``files`` / ``archs`` narrow the compile (None: every kernel file, every preset).
    """
    reason = ptxas_unavailable_reason()
    if reason is not None:
        return {"rows": [], "failures": [], "reason": reason}
    from sagelib.cuda import check

    nvcc = tool_status("nvcc")
    try:
        result = check.run_check(files=files or None, archs=archs or None)
    except Exception as exc:  # a failed compile is a finding to show, not a crash
        return {"rows": [], "failures": [], "reason": f"sagelib.cuda.check failed: {type(exc).__name__}: {exc}"}
    rows = []
    for target in result.targets:
        rows += [_plain(k) for k in target.kernels]
        if not target.ok:
            rows.append({"kernel": f"{target.file} (FAILED)", "file": target.file, "arch": target.arch,
                         "error": (target.error or "failed").splitlines()[0]})
    return {"rows": rows, "failures": list(result.failures), "reason": None, "nvcc": nvcc.version}


def ptxas_unavailable_reason() -> str | None:
    """None when the ptxas table can be made here; otherwise what is missing."""
    try:
        importlib.import_module("sagelib.cuda.check")
    except ImportError as exc:
        return f"sagelib.cuda.check is not importable ({exc}); the kernels check is not installed"
    nvcc = tool_status("nvcc")
    return None if nvcc.available else nvcc.reason


def ptxas_by_arch(rows: list[dict]) -> list[dict]:
    """One row per kernel, one column per architecture: "registers r, spill stores B, smem B"."""
    table: dict[str, dict] = {}
    for row in rows:
        cell = (f"FAILED: {row['error']}" if "error" in row else
                f"{row.get('registers')} r" + (f", spill {row['spill_stores']} B" if row.get("spill_stores") else "")
                + (f", smem {row['smem_bytes']} B" if row.get("smem_bytes") else ""))
        table.setdefault(row["kernel"], {"kernel": row["kernel"]})[row["arch"]] = cell
    return list(table.values())


def _plain(row):
    import dataclasses

    if dataclasses.is_dataclass(row) and not isinstance(row, type):
        return dataclasses.asdict(row)
    return dict(row) if isinstance(row, dict) else {"value": str(row)}
