"""The batch runner behind ``sagelib run``: every notebook, one folder of reports.

A notebook is a jupytext py:percent file ``notebooks/NN_name.py`` with exactly
one cell tagged ``parameters`` holding literal defaults, ``output_dir`` among
them. A run:

1. reads ``notebooks/profiles.yaml``: for the chosen profile (``tiny``, ``cpu``,
   ``gpu``) the parameter values of each notebook, and optionally the per-cell
   timeout ``cell_timeout_s``;
2. for each notebook, in file-name order, converts the ``.py`` to a notebook
   with jupytext and executes it with papermill: the kernel named explicitly
   (``python3``, the interpreter of this environment), the working directory
   fixed to the repository root, a per-cell timeout, papermill's progress bar.
   Its parameters are the profile's values, then the ``-p NAME=VALUE``
   overrides, then ``output_dir`` = that notebook's folder in the run;
3. exports each executed notebook to HTML without code (see
   :mod:`sagelib.run.report`), also when it failed half-way, and carries on
   with the next one;
4. writes the run's ``environment.json``, ``run.json`` and ``index.html``.

Layout of a run folder (``outputs/runs/<YYYYmmddTHHMMSSZ>-<profile>/``)::

    index.html  run.json  environment.json
    00_contract/00_contract.ipynb  00_contract/00_contract.html
    00_contract/results.json       00_contract/figures/*.png

Bad input (unknown profile or notebook, malformed ``-p``, a notebook without
exactly one parameters cell) raises ValueError before anything runs.
"""

from __future__ import annotations

import ast
import os
import re
import sys
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

import yaml

from sagelib import paths
from sagelib.errors import InputError
from sagelib.records.datafile import utc_stamp

REPO_ROOT = paths.REPO_ROOT
NOTEBOOKS_DIR = REPO_ROOT / "notebooks"
PROFILES_FILE = "profiles.yaml"
RUNS_DIR = Path("outputs") / "runs"
KERNEL_NAME = "python3"
DEFAULT_CELL_TIMEOUT_S = 600
PARAMETERS_TAG = "parameters"
OUTPUT_DIR_PARAMETER = "output_dir"
#: Profile-level settings that sit beside the notebook entries of a profile.
PROFILE_SETTINGS = ("cell_timeout_s",)

_NOTEBOOK_FILE = re.compile(r"^(\d\d)_([A-Za-z0-9_]+)\.py$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def default_profile() -> str:
    """The profile that fits this machine: ``gpu`` where torch sees CUDA, else ``cpu``."""
    import torch

    return "gpu" if torch.cuda.is_available() else "cpu"


# --------------------------------------------------------------------------- notebooks


@dataclass(frozen=True)
class Notebook:
    """One notebook of the workbook, read and checked.

    ``cells`` keeps each cell's source so a failure can be named by its place in
    the ``.py`` file; ``parameters`` are the literal defaults of its parameters cell.
    """

    name: str
    path: Path
    parameters: dict[str, Any]
    parameters_cell: int
    cells: tuple[str, ...]


def discover_notebooks(notebooks_dir: str | os.PathLike = NOTEBOOKS_DIR) -> list[Path]:
    """The ``NN_name.py`` files of ``notebooks_dir``, in name order."""
    directory = Path(notebooks_dir)
    if not directory.is_dir():
        found = "is a file, not a folder" if directory.exists() else "does not exist"
        raise InputError(f"--notebooks {str(directory)!r}: {found}; pass the folder holding the NN_name.py notebooks")
    return sorted(p for p in directory.iterdir() if p.is_file() and _NOTEBOOK_FILE.match(p.name))


def read_notebook(path: str | os.PathLike):
    """The jupytext ``.py`` at ``path`` as an nbformat notebook node."""
    import jupytext

    return jupytext.read(Path(path), fmt="py:percent")


def parameters_cell_index(nb, path: str | os.PathLike) -> int:
    """Index of the one cell tagged ``parameters``; ValueError if there is not exactly one."""
    tagged = [i for i, cell in enumerate(nb.cells) if PARAMETERS_TAG in cell.get("metadata", {}).get("tags", [])]
    if len(tagged) != 1:
        where = f" (cells {', '.join(str(i + 1) for i in tagged)})" if tagged else ""
        raise InputError(
            f"{path}: expected exactly one cell tagged 'parameters', found {len(tagged)}{where}; "
            'mark the one cell of literal defaults with  # %% tags=["parameters"]'
        )
    if nb.cells[tagged[0]].cell_type != "code":
        raise InputError(f"{path}: the cell tagged 'parameters' is a {nb.cells[tagged[0]].cell_type} cell; "
                         "tag a code cell")
    return tagged[0]


def parse_parameters_cell(source: str, path: str | os.PathLike) -> dict[str, Any]:
    """``{name: default}`` from a parameters cell of plain ``name = literal`` lines."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise InputError(f"{path}: the parameters cell is not plain Python ({exc.msg}, line {exc.lineno}); "
                         "keep only  name = literal  lines there") from None
    parameters: dict[str, Any] = {}
    for statement in tree.body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
            target, value = statement.targets[0], statement.value
        elif isinstance(statement, ast.AnnAssign) and statement.value is not None:
            target, value = statement.target, statement.value
        else:
            raise InputError(
                f"{path}: the parameters cell has {ast.get_source_segment(source, statement)!r} at line "
                f"{statement.lineno}; it may hold only  name = literal  assignments"
            )
        if not isinstance(target, ast.Name):
            raise InputError(f"{path}: parameters cell line {statement.lineno} assigns to "
                             f"{ast.get_source_segment(source, target)!r}; assign to a plain name")
        try:
            parameters[target.id] = ast.literal_eval(value)
        except ValueError:
            raise InputError(
                f"{path}: parameter {target.id} = {ast.get_source_segment(source, value)} is not a literal; "
                "give a literal default (number, string, bool, None, list, dict) and compute from it in a later cell"
            ) from None
    return parameters


def load_notebook(path: str | os.PathLike) -> Notebook:
    """Read and check one notebook: one parameters cell of literals, ``output_dir`` among them."""
    path = Path(path)
    match = _NOTEBOOK_FILE.match(path.name)
    if not match:
        raise InputError(f"{path}: notebook files are named NN_name.py (two digits, underscore, name)")
    nb = read_notebook(path)
    index = parameters_cell_index(nb, path)
    parameters = parse_parameters_cell(nb.cells[index].source, path)
    if OUTPUT_DIR_PARAMETER not in parameters:
        raise InputError(
            f"{path}: the parameters cell has no {OUTPUT_DIR_PARAMETER}; add  "
            f"{OUTPUT_DIR_PARAMETER} = \"outputs/interactive/{path.stem}\"  (the runner sets it to the run's folder)"
        )
    return Notebook(path.stem, path, parameters, index, tuple(cell.source for cell in nb.cells))


def select_notebooks(paths: Sequence[Path], only: Sequence[str] | None) -> list[Path]:
    """The notebooks named by ``--only`` (``00_contract``, ``00`` or ``contract``), or all.

    Keeps file order; an unknown name is a ValueError listing the known ones.
    """
    if not only:
        return list(paths)
    chosen: set[Path] = set()
    for name in only:
        hits = [p for p in paths if name in (p.stem, p.stem[:2], p.stem[3:])]
        if not hits:
            known = ", ".join(p.stem for p in paths) or "none"
            raise InputError(f"--only {name!r}: no such notebook; known notebooks: {known}")
        chosen.update(hits)
    return [p for p in paths if p in chosen]


# --------------------------------------------------------------------------- parameters


_WORDS = {"true": True, "false": False, "null": None, "none": None, "~": None}


def parse_value(text: str) -> Any:
    """A ``-p`` value: a Python literal (``3``, ``1e-3``, ``[64, 256]``, ``'x'``, ``None``,
    ``True``), a YAML word (``true``, ``false``, ``null``) or flow list/mapping
    (``[cpu, cuda]``), else the text itself as a string (``cuda``).

    A value that opens a list or mapping but does not parse is a ValueError.
    """
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        pass
    stripped = text.strip()
    if stripped.lower() in _WORDS:
        return _WORDS[stripped.lower()]
    if stripped[:1] in ("[", "{"):
        try:
            value = yaml.safe_load(stripped)
        except yaml.YAMLError:
            value = None
        if not isinstance(value, (list, dict)):
            raise InputError(f"value {text!r} opens a list or mapping but does not parse; write e.g. [64, 256]")
        return value
    return text


def parse_override(text: str) -> tuple[str, Any]:
    """``"NAME=VALUE"`` -> ``(NAME, parsed VALUE)``; ValueError naming the fix otherwise."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not _IDENTIFIER.match(name):
        raise InputError(f"-p {text!r}: expected NAME=VALUE with NAME a Python identifier, e.g. -p n_tokens=1024")
    if name == OUTPUT_DIR_PARAMETER:
        raise InputError(f"-p {text!r}: output_dir is set by the runner; use --out DIR to choose the run folder")
    try:
        return name, parse_value(value)
    except ValueError as exc:
        raise InputError(f"-p {text!r}: {exc}") from None


def parse_overrides(texts: Sequence[str] | None) -> dict[str, Any]:
    """All ``-p`` values, later ones winning."""
    return dict(parse_override(t) for t in texts or ())


@dataclass(frozen=True)
class Profile:
    """One profile of ``profiles.yaml``: per-notebook values and the per-cell timeout."""

    name: str
    notebooks: dict[str, dict[str, Any]]
    cell_timeout_s: float = DEFAULT_CELL_TIMEOUT_S


def load_profiles(path: str | os.PathLike) -> dict[str, Profile]:
    """Parse ``profiles.yaml``: ``{profile: {cell_timeout_s?: s, NN_name: {param: value}}}``."""
    path = Path(path)
    if not path.is_file():
        return {}
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: not valid YAML ({exc}); fix the file") from None
    if not isinstance(document, dict):
        raise InputError(f"{path}: expected a mapping of profile name -> notebooks, got {type(document).__name__}")
    profiles = {}
    for name, entries in document.items():
        entries = entries or {}
        if not isinstance(entries, dict):
            raise InputError(f"{path}: profile {name!r} must map notebook names to parameter mappings")
        notebooks = {}
        timeout = DEFAULT_CELL_TIMEOUT_S
        for key, values in entries.items():
            if key == "cell_timeout_s":
                if isinstance(values, bool) or not isinstance(values, (int, float)) or values <= 0:
                    raise InputError(f"{path}: {name}.cell_timeout_s must be a positive number of seconds, "
                                     f"got {values!r}")
                timeout = values
            elif isinstance(values, dict) or values is None:
                notebooks[str(key)] = dict(values or {})
            else:
                raise InputError(f"{path}: {name}.{key} must map parameter names to values, got {values!r}")
        profiles[str(name)] = Profile(str(name), notebooks, timeout)
    return profiles


def get_profile(profiles: dict[str, Profile], name: str, path: str | os.PathLike) -> Profile:
    """The profile called ``name``; ValueError listing the known ones otherwise."""
    if name not in profiles:
        known = ", ".join(profiles) or f"none (no {path})"
        raise InputError(f"--profile {name!r}: no such profile in {path}; known profiles: {known}")
    return profiles[name]


def notebook_parameters(notebook: Notebook, profile: Profile, overrides: dict[str, Any],
                        output_dir: Path) -> dict[str, Any]:
    """What papermill injects into ``notebook``: profile values, then overrides, then ``output_dir``."""
    values = profile.notebooks.get(notebook.name, {})
    unknown = sorted(set(values) - set(notebook.parameters))
    if unknown:
        raise InputError(
            f"profile {profile.name!r} sets {', '.join(unknown)} for {notebook.name}, whose parameters cell has "
            f"{', '.join(sorted(notebook.parameters))}; fix the names in {PROFILES_FILE} or add the parameters"
        )
    chosen = {**values, **{k: v for k, v in overrides.items() if k in notebook.parameters}}
    chosen[OUTPUT_DIR_PARAMETER] = str(output_dir)
    return chosen


def check_overrides(overrides: dict[str, Any], notebooks: Sequence[Notebook]) -> None:
    """Every ``-p`` name must be a parameter of at least one selected notebook."""
    known = set().union(*(nb.parameters for nb in notebooks)) if notebooks else set()
    for name in overrides:
        if name not in known:
            raise InputError(
                f"-p {name}=...: no selected notebook has a parameter {name!r}; "
                f"known parameters: {', '.join(sorted(known - {OUTPUT_DIR_PARAMETER})) or 'none'}"
            )


# --------------------------------------------------------------------------- execution


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
    cwd: Path = REPO_ROOT,
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


# --------------------------------------------------------------------------- a run


def run_folder(runs_dir: Path, profile: str, now: datetime | None = None) -> Path:
    """``runs_dir/<YYYYmmddTHHMMSSZ>-<profile>``, made unique with a suffix if taken."""
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    folder = runs_dir / f"{stamp}-{profile}"
    n = 2
    while folder.exists():
        folder = runs_dir / f"{stamp}-{profile}-{n}"
        n += 1
    return folder


@dataclass
class RunReport:
    """What a run did: its folder, its index, one outcome per notebook."""

    folder: Path
    index: Path
    profile: str
    outcomes: list[Outcome]
    failures: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(o.ok for o in self.outcomes)


@dataclass(frozen=True)
class RunPlan:
    """Everything a run needs, checked before any notebook starts."""

    profile: Profile
    notebooks: list[Notebook]
    overrides: dict[str, Any]
    folder: Path
    cwd: Path


def plan_run(
    profile: str,
    *,
    only: Sequence[str] | None = None,
    overrides: Sequence[str] | dict[str, Any] | None = None,
    out: str | os.PathLike | None = None,
    notebooks_dir: str | os.PathLike = NOTEBOOKS_DIR,
    profiles_path: str | os.PathLike | None = None,
    cwd: str | os.PathLike = REPO_ROOT,
) -> RunPlan:
    """Check every input of a run (ValueError on the first bad one) and fix its folder."""
    notebooks_dir = Path(notebooks_dir)
    profiles_path = Path(profiles_path) if profiles_path else notebooks_dir / PROFILES_FILE
    paths = discover_notebooks(notebooks_dir)  # first: a wrong --notebooks also hides its profiles.yaml
    if not paths:
        raise InputError(f"no notebooks in {notebooks_dir} (files named NN_name.py); pass --notebooks DIR")
    chosen = get_profile(load_profiles(profiles_path), profile, profiles_path)
    notebooks = [load_notebook(p) for p in select_notebooks(paths, only)]
    values = overrides if isinstance(overrides, dict) else parse_overrides(overrides)
    check_overrides(values, notebooks)
    cwd = Path(cwd).resolve()
    folder = Path(out).resolve() if out else run_folder(cwd / RUNS_DIR, profile)
    for nb in notebooks:  # checks the profile's names against each parameters cell
        notebook_parameters(nb, chosen, values, folder / nb.name)
    return RunPlan(chosen, notebooks, values, folder, cwd)


def execute_plan(plan: RunPlan, *, progress_bar: bool = True, log: Callable[[str], None] = print) -> RunReport:
    """Run every notebook of ``plan`` (a failure does not stop the others) and write the index."""
    from sagelib.run import report as run_report

    plan.folder.mkdir(parents=True, exist_ok=True)
    started = datetime.now(timezone.utc)
    warnings = [w for w in (kernel_warning(),) if w]
    for w in warnings:
        log(f"warning: {w}")
    environment = run_report.write_environment(plan.folder, plan.cwd)
    outcomes: list[Outcome] = []
    failures: list[str] = []
    total = len(plan.notebooks)
    for i, nb in enumerate(plan.notebooks, 1):
        log(f"[{i}/{total}] {nb.name} ({plan.profile.name} profile)")
        parameters = notebook_parameters(nb, plan.profile, plan.overrides, plan.folder / nb.name)
        outcome = execute_notebook(
            nb, parameters, plan.folder / nb.name, cwd=plan.cwd,
            cell_timeout_s=plan.profile.cell_timeout_s, progress_bar=progress_bar,
        )
        outcomes.append(outcome)
        if outcome.ok:
            log(f"[{i}/{total}] {nb.name}: ok in {outcome.duration_s:.1f} s")
        else:
            failures.append(describe_failure(outcome, _display_path(nb.path, plan.cwd)))
            log(f"[{i}/{total}] {failures[-1]}")
    summary = {
        "profile": plan.profile.name,
        "started_utc": utc_stamp(started),
        "finished_utc": utc_stamp(),
        "cell_timeout_s": plan.profile.cell_timeout_s,
        "overrides": plan.overrides,
        "command": " ".join(["sagelib", *sys.argv[1:]]) if Path(sys.argv[0]).name == "sagelib" else None,
        "notebooks": [asdict(o) for o in outcomes],
        "failures": failures,
        "warnings": warnings,
    }
    index = run_report.write_run(plan.folder, summary, environment)
    return RunReport(plan.folder, index, plan.profile.name, outcomes, failures, warnings)


def run(profile: str, *, progress_bar: bool = True, log: Callable[[str], None] = print, **plan_options) -> RunReport:
    """Plan (see :func:`plan_run` for the options) and execute a run."""
    return execute_plan(plan_run(profile, **plan_options), progress_bar=progress_bar, log=log)


def _display_path(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)
