"""Executing one notebook with papermill: explicit kernel, fixed working folder, per-cell timeout, and a
failure named by its cell.
"""

from __future__ import annotations

import re
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sagelib import paths
from sagelib.run.notebooks import Notebook, read_notebook

KERNEL_NAME = "python3"


def kernel_manager_class():
    """The kernel manager papermill starts each notebook's kernel with: jupyter_client's, talking over Unix
    sockets in a private temporary folder where the platform has them (not Windows).

    Over TCP each kernel picks five free ports by binding to port 0 and letting go before the kernel binds them;
    two kernels started at once (the tests run notebooks in two processes) can pick the same port, and the loser
    never answers ("Kernel didn't respond in 60 seconds", ZMQ "Address already in use"). Socket files cannot
    collide: each kernel gets its own folder."""
    from jupyter_client.manager import AsyncKernelManager

    if sys.platform.startswith("win"):
        return AsyncKernelManager

    class UnixSocketKernelManager(AsyncKernelManager):
        def __init__(self, **kwargs):
            import tempfile

            folder = Path(tempfile.mkdtemp(prefix="sagelib-kernel-"))
            kwargs.setdefault("transport", "ipc")
            kwargs.setdefault("ip", str(folder / "kernel"))
            super().__init__(**kwargs)
            self._socket_folder = folder

        def cleanup_ipc_files(self) -> None:
            super().cleanup_ipc_files()
            try:
                self._socket_folder.rmdir()
            except OSError:  # something else is still in it: leave it
                pass

    return UnixSocketKernelManager


DEFAULT_CELL_TIMEOUT_S = 600


@dataclass
class Outcome:
    """How one notebook's execution went, and where its files are."""

    name: str
    status: str  # "ok" or "failed"
    duration_s: float
    parameters: dict[str, Any]
    folder: str
    ipynb: str | None = None
    html: str | None = None
    error: str | None = None  # one line: cell and exception
    cell: int | None = None  # failing cell, counted from 1 in the .py
    cell_source: str | None = None  # its first non-blank source line

    @property
    def ok(self) -> bool:
        return self.status == "ok"


def failing_cell(notebook: Notebook, source: str | None) -> tuple[int | None, str | None]:
    """(cell number counted from 1 in the ``.py``, first source line) of a failing cell's source."""
    if source is None:
        return None, None
    first = next((line.strip() for line in source.splitlines() if line.strip()), "")
    for i, cell in enumerate(notebook.cells):
        if cell == source:
            return i + 1, first
    return None, first  # the cell papermill injected (parameters), not one of the .py


def _last_started_source(ipynb: Path) -> str | None:
    """Source of the last cell papermill started, read back from a partial notebook."""
    import nbformat

    try:
        nb = nbformat.read(ipynb, as_version=4)
    except Exception:
        return None
    started = [c for c in nb.cells if c.get("metadata", {}).get("papermill", {}).get("start_time")]
    return started[-1].source if started else None


def execute_notebook(
    notebook: Notebook,
    parameters: dict[str, Any],
    folder: Path,
    *,
    cwd: Path = paths.REPO_ROOT,
    cell_timeout_s: float = DEFAULT_CELL_TIMEOUT_S,
    progress_bar: bool = True,
) -> Outcome:
    """Execute one notebook into ``folder`` and export its HTML; never raises for a notebook error."""
    import papermill
    from papermill.exceptions import PapermillExecutionError

    from sagelib.run.report import export_html

    folder.mkdir(parents=True, exist_ok=True)
    ipynb = folder / f"{notebook.name}.ipynb"
    html = folder / f"{notebook.name}.html"
    outcome = Outcome(notebook.name, "ok", 0.0, parameters, str(folder))
    start = time.monotonic()
    try:
        papermill.execute_notebook(
            read_notebook(notebook.path),
            ipynb,
            parameters=parameters,
            kernel_name=KERNEL_NAME,
            language="python",
            cwd=cwd,
            execution_timeout=cell_timeout_s,
            progress_bar=progress_bar,
            request_save_on_cell_execute=True,
            kernel_manager_class=kernel_manager_class(),
            # Kernel machinery warnings (e.g. ipykernel's note about plain TCP on
            # localhost) are noise here; the notebook's own warnings still reach its outputs.
            extra_arguments=["--IPKernelApp.log_level=ERROR"],
        )
    except PapermillExecutionError as exc:
        outcome.status = "failed"
        outcome.cell, outcome.cell_source = failing_cell(notebook, exc.source)
        outcome.error = f"{exc.ename}: {exc.evalue}".strip(": ")
    except Exception as exc:  # kernel died, cell timed out, kernel would not start, ...
        outcome.status = "failed"
        source = _last_started_source(ipynb) if ipynb.exists() else None
        outcome.cell, outcome.cell_source = failing_cell(notebook, source)
        message = " ".join(str(exc).split())
        if len(message) > 160:  # nbclient appends the cell's source: keep the first sentence
            message = re.split(r"(?<=\.)\s", message, maxsplit=1)[0][:300]
        outcome.error = f"{type(exc).__name__}: {message}"
    outcome.duration_s = round(time.monotonic() - start, 2)
    outcome.ipynb = str(ipynb) if ipynb.exists() else None
    outcome.html = str(export_html(ipynb, html, notebook.name, failure=outcome.error, parameters=parameters))
    return outcome


def describe_failure(outcome: Outcome, notebook_path: Path | str) -> str:
    """One line naming the notebook, the failing cell and the error."""
    if outcome.cell is not None:
        where = f"cell {outcome.cell} of {notebook_path} ({outcome.cell_source!r})"
    elif outcome.cell_source is not None:
        where = f"the injected parameters cell ({outcome.cell_source!r})"
    else:
        where = "before any cell ran"
    return f"{outcome.name} failed in {where}: {outcome.error}"


def kernel_warning(kernel_name: str = KERNEL_NAME) -> str | None:
    """A warning when the kernel papermill will start is not this interpreter, else None."""
    from jupyter_client.kernelspec import KernelSpecManager, NoSuchKernel

    try:
        argv = KernelSpecManager().get_kernel_spec(kernel_name).argv
    except NoSuchKernel:
        return f"no Jupyter kernel named {kernel_name!r}; install ipykernel in this environment"
    program = argv[0] if argv else ""
    # jupyter_client runs a bare "python"/"python3" kernel with the current interpreter.
    if program in ("python", f"python{sys.version_info[0]}", f"python{sys.version_info[0]}.{sys.version_info[1]}"):
        return None
    if Path(program).absolute() == Path(sys.executable).absolute():
        return None
    return (f"kernel {kernel_name!r} runs {program}, not this interpreter {sys.executable}; "
            "notebooks may see other packages (remove the stray kernelspec or set JUPYTER_PREFER_ENV_PATH=1)")
