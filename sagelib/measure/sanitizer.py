"""compute-sanitizer (memcheck, racecheck, initcheck, synccheck) on one program, its verdict parsed.
"""

from __future__ import annotations

import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path

from sagelib.errors import InputError
from sagelib.measure.ncu import last_error
from sagelib.measure.profiling import (
    REPO_ROOT,
    TIMEOUT_S,
    program_environment,
    tool_status,
)

SANITIZER_TOOLS = ("memcheck", "racecheck", "initcheck", "synccheck")


_SUMMARY = re.compile(r"ERROR SUMMARY:\s*([0-9,]+)\s+error")


@dataclass
class SanitizerReport:
    tool: str
    command: list[str]
    returncode: int | None
    errors: int | None
    clean: bool
    reason: str | None = None
    log_tail: str = ""


def sanitize(program: list[str], tool: str = "memcheck", *, timeout_s: int = TIMEOUT_S,
             log_file: str | os.PathLike | None = None, extra_args=(), environment=None) -> SanitizerReport:
    """Run ``program`` under ``compute-sanitizer --tool TOOL`` (with ``extra_args`` before the program, and the
    variables of ``environment`` set); clean means 0 errors and exit 0."""
    if tool not in SANITIZER_TOOLS:
        raise InputError(f"tool: expected one of {', '.join(SANITIZER_TOOLS)}, got {tool!r}")
    status = tool_status("compute-sanitizer")
    if not status.available:
        return SanitizerReport(tool, [], None, None, False, reason=status.reason)
    argv = [status.path, "--tool", tool, "--error-exitcode", "99"]
    if tool == "memcheck":
        argv += ["--leak-check", "no"]
    argv += [*extra_args, *program]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s,
                              env={**program_environment(), **(environment or {})}, cwd=REPO_ROOT)
    except subprocess.TimeoutExpired:
        return SanitizerReport(tool, argv, None, None, False, reason=f"did not finish in {timeout_s} s")
    output = done.stdout + done.stderr
    if log_file:
        Path(log_file).parent.mkdir(parents=True, exist_ok=True)
        Path(log_file).write_text(output)
    return parse_sanitizer_output(tool, argv, done.returncode, output)


def parse_sanitizer_output(tool: str, argv: list[str], returncode: int, output: str) -> SanitizerReport:
    matches = _SUMMARY.findall(output)
    errors = int(matches[-1].replace(",", "")) if matches else None
    clean = errors == 0 and returncode == 0
    reason = None
    if errors is None:
        reason = f"no ERROR SUMMARY in the output (exit {returncode}): {last_error(output)}"
    elif not clean:
        reason = f"{errors} error(s) reported, exit {returncode}"
    return SanitizerReport(tool, argv, returncode, errors, clean, reason, output[-4000:])
