"""Nsight Compute on one launch: the sections and metrics asked for (only those this ncu has), always with
``--clock-control none``, its CSV parsed into one summary per kernel.
"""

from __future__ import annotations

import csv
import functools
import io
import os
import re
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from sagelib.measure.profiling import (
    REPO_ROOT,
    TIMEOUT_S,
    program_environment,
    tool_status,
)

#: ncu sections collected (filtered by what the installed ncu lists; the rest are reported).
NCU_SECTIONS = (
    "SpeedOfLight", "LaunchStats", "Occupancy", "ComputeWorkloadAnalysis", "MemoryWorkloadAnalysis",
    "MemoryWorkloadAnalysis_Tables", "WarpStateStats", "SchedulerStats",
)


#: Metrics collected beside the sections (each kept only if ncu knows its base name for this GPU).
NCU_METRICS = (
    "gpu__time_duration.sum",
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_imma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_tensor_op_hmma.sum",
    "sm__inst_executed_pipe_tensor_op_imma.sum",
    "sm__inst_executed_pipe_tensor_op_gmma.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__maximum_warps_per_active_cycle_pct",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block_static",
    "launch__shared_mem_per_block_dynamic",
    "l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
    "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
    "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
)


def _names_listed(argv: list[str], pattern: str) -> tuple[set[str] | None, str | None]:
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"{' '.join(argv)} failed: {exc}"
    names = set(re.findall(pattern, done.stdout, flags=re.MULTILINE))
    if done.returncode != 0 or not names:
        first = (done.stderr or done.stdout).strip().splitlines()[:1]
        return None, f"{' '.join(argv)} exited {done.returncode}: {first[0] if first else 'no output'}"
    return names, None


@functools.lru_cache(maxsize=None)
def supported_sections(ncu: str) -> tuple[set[str] | None, str | None]:
    """Section identifiers this ncu knows (``ncu --list-sections``)."""
    return _names_listed([ncu, "--list-sections"], r"^\s*([A-Za-z][A-Za-z0-9_]+)\s")


@functools.lru_cache(maxsize=None)
def supported_metric_bases(ncu: str, chip: str | None = None) -> tuple[set[str] | None, str | None]:
    """Metric base names ncu knows for the local GPU (or ``chip``), from ``ncu --query-metrics``."""
    argv = [ncu, "--query-metrics"] + (["--chip", chip] if chip else [])
    return _names_listed(argv, r"^\s*\"?([a-z0-9]+__[a-z0-9_]+)")


def ncu_argv(ncu: str, program: list[str], *, log_file: str, sections, metrics, kernel_regex: str | None,
             launch_count: int) -> list[str]:
    argv = [ncu, "--clock-control", "none", "--profile-from-start", "off", "--csv", "--page", "raw",
            "--log-file", log_file, "--launch-count", str(launch_count)]
    for section in sections:
        argv += ["--section", section]
    if metrics:
        argv += ["--metrics", ",".join(metrics)]
    if kernel_regex:
        argv += ["--kernel-name", f"regex:{kernel_regex}"]
    return argv + list(program)


def _number(text: str):
    cleaned = text.strip().replace(",", "")
    try:
        value = float(cleaned)
    except ValueError:
        return text.strip()
    return int(value) if value.is_integer() and "." not in cleaned and "e" not in cleaned.lower() else value


_ID_COLUMNS = ("ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context", "Stream",
               "Block Size", "Grid Size", "Device", "CC")


def parse_ncu_csv(text: str) -> list[dict]:
    """Kernels from ncu ``--csv`` output: ``[{"name", "id", "block", "grid", "metrics": {m: {value, unit}}}]``.

    Reads both the raw page (one wide row per kernel, units in the row under the header) and the
    details page (one long row per metric). Lines ncu writes about itself (``==PROF==``,
    ``==WARNING==``) are skipped.
    """
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID",')), None)
    if start is None:
        return []
    # The program's own output may be interleaved: keep only quoted CSV rows after the header.
    rows = list(csv.reader(io.StringIO("\n".join(line for line in lines[start:] if line.startswith('"')))))
    header = rows[0]
    kernels: dict[str, dict] = {}
    if "Metric Name" in header:  # details page: long format
        col = {name: header.index(name) for name in header}
        for row in rows[1:]:
            if len(row) != len(header):
                continue
            kid = row[col["ID"]]
            kernel = kernels.setdefault(kid, _kernel_entry(row, col))
            unit = row[col["Metric Unit"]] if "Metric Unit" in col else ""
            kernel["metrics"][row[col["Metric Name"]]] = {"value": _number(row[col["Metric Value"]]), "unit": unit}
        return list(kernels.values())
    col = {name: i for i, name in enumerate(header)}
    units = rows[1] if len(rows) > 1 and not (rows[1][col["ID"]] if "ID" in col else "x").strip() else None
    for row in rows[2 if units else 1:]:
        if len(row) != len(header):
            continue
        kernel = _kernel_entry(row, col)
        for name, i in col.items():
            if name in _ID_COLUMNS:
                continue
            kernel["metrics"][name] = {"value": _number(row[i]), "unit": units[i] if units else ""}
        kernels[kernel["id"]] = kernel
    return list(kernels.values())


def _kernel_entry(row, col) -> dict:
    def get(name):
        return row[col[name]] if name in col else None
    return {"id": get("ID"), "name": get("Kernel Name"), "block": get("Block Size"), "grid": get("Grid Size"),
            "device": get("Device"), "cc": get("CC"), "metrics": {}}


def _value(metrics: dict, *names):
    for name in names:
        if name in metrics and isinstance(metrics[name]["value"], (int, float)):
            return metrics[name]["value"]
    return None


_TENSOR_PIPE = re.compile(r"^sm__(?:inst_executed_)?pipe_tensor\w*\.avg\.pct_of_peak_sustained_active$")


_STALL = re.compile(r"^smsp__average_warps?_(?:latency_)?issue_stalled_([a-z_]+?)_per_issue_active\.ratio$")


def summarize_kernel(metrics: dict) -> dict:
    """The figures that decide an attention kernel, picked out of one kernel's raw metrics.

    A figure the profiler did not report is None (the raw metrics show what was there).
    """
    def total(*names):
        values = [v for v in (_value(metrics, n) for n in names) if v is not None]
        return sum(values) if values else None

    tensor = {name: m["value"] for name, m in metrics.items()
              if _TENSOR_PIPE.match(name) and isinstance(m["value"], (int, float))}
    stalls = {}
    for name, m in metrics.items():
        match = _STALL.match(name)
        if match and isinstance(m["value"], (int, float)) and m["value"] > 0:
            stalls[match.group(1)] = m["value"]
    duration = metrics.get("gpu__time_duration.sum")
    return {
        "duration": duration,
        "tensor_pipe_pct": tensor,
        "tensor_pipe_pct_max": max(tensor.values()) if tensor else None,
        "achieved_occupancy_pct": _value(metrics, "sm__warps_active.avg.pct_of_peak_sustained_active"),
        "theoretical_occupancy_pct": _value(metrics, "sm__maximum_warps_per_active_cycle_pct"),
        "registers_per_thread": _value(metrics, "launch__registers_per_thread"),
        "shared_mem_per_block_bytes": _value(metrics, "launch__shared_mem_per_block")
        or total("launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic"),
        "local_memory_bytes": total("l1tex__t_bytes_pipe_lsu_mem_local_op_ld.sum",
                                    "l1tex__t_bytes_pipe_lsu_mem_local_op_st.sum"),
        "smem_bank_conflicts": total("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
                                     "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"),
        "smem_wavefronts": total("l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
                                 "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"),
        "dram_throughput_pct": _value(metrics, "dram__throughput.avg.pct_of_peak_sustained_elapsed",
                                      "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"),
        "dram_bytes": total("dram__bytes_read.sum", "dram__bytes_write.sum"),
        "issue_stalls": dict(sorted(stalls.items(), key=lambda kv: -kv[1])),
    }


@dataclass
class NcuReport:
    """What one ncu run gave: the kernels, or why there are none."""

    command: list[str]
    returncode: int | None
    kernels: list[dict] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)
    skipped: dict[str, str] = field(default_factory=dict)
    reason: str | None = None
    log_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.reason is None and bool(self.kernels)


def ncu_profile(program: list[str], *, log_file: str | os.PathLike, kernel_regex: str | None = None,
                launch_count: int = 8, sections=NCU_SECTIONS, metrics=NCU_METRICS,
                timeout_s: int = TIMEOUT_S) -> NcuReport:
    """Profile the launches inside ``program``'s profiler region; every kernel's metrics parsed.

    ``kernel_regex`` keeps only kernels whose name matches; ``launch_count`` caps how many
    launches are profiled. The CSV that ncu wrote stays in ``log_file`` for a second look.
    """
    status = tool_status("ncu")
    report = NcuReport(command=[], returncode=None)
    if not status.available:
        report.reason = status.reason
        return report
    known_sections, why = supported_sections(status.path)
    chosen_sections = [s for s in sections if known_sections is None or s in known_sections]
    for s in sections:
        if known_sections is not None and s not in known_sections:
            report.skipped[s] = "section not listed by ncu --list-sections"
    known_metrics, why_metrics = supported_metric_bases(status.path)
    if known_metrics is None:
        chosen_metrics = []
        report.skipped["metrics"] = f"not collected: the metric list could not be read ({why_metrics})"
    else:
        chosen_metrics = [m for m in metrics if m.split(".")[0] in known_metrics]
        for m in metrics:
            if m not in chosen_metrics:
                report.skipped[m] = "metric not known to ncu on this GPU"
    log_file = str(log_file)
    Path(log_file).parent.mkdir(parents=True, exist_ok=True)
    argv = ncu_argv(status.path, program, log_file=log_file, sections=chosen_sections, metrics=chosen_metrics,
                    kernel_regex=kernel_regex, launch_count=launch_count)
    report.command, report.sections, report.metrics = argv, chosen_sections, chosen_metrics
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, env=program_environment(),
                              cwd=REPO_ROOT)
    except subprocess.TimeoutExpired:
        report.reason = f"ncu did not finish in {timeout_s} s"
        return report
    report.returncode = done.returncode
    report.log_tail = (done.stdout + done.stderr)[-4000:]
    text = Path(log_file).read_text(errors="replace") if Path(log_file).is_file() else ""
    report.kernels = parse_ncu_csv(text) or parse_ncu_csv(done.stdout)
    for kernel in report.kernels:
        kernel["summary"] = summarize_kernel(kernel["metrics"])
    if done.returncode != 0:
        report.reason = f"ncu exited {done.returncode}: {last_error(text + report.log_tail)}"
    elif not report.kernels:
        report.reason = ("ncu profiled no kernel: the program made no launch inside its profiler region"
                         + (f" matching {kernel_regex!r}" if kernel_regex else "")
                         + f" ({last_error(text + report.log_tail)})")
    return report


def last_error(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if "ERROR" in line or "Error" in line]
    if lines:
        return lines[-1]
    tail = [line.strip() for line in text.splitlines() if line.strip()]
    return tail[-1] if tail else "no output"
