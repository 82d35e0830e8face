"""The batch runner behind ``sagelib run``: plan a run (notebooks, profile, folder), execute it, report it.

The steps live in their own modules, papermill's own split: :mod:`sagelib.run.notebooks` finds and reads
the notebooks, :mod:`sagelib.run.parameters` resolves profiles and ``-p`` overrides, :mod:`sagelib.run.execute`
runs one notebook with papermill, :mod:`sagelib.run.report` writes the HTML reports and the index.
"""

from __future__ import annotations

import itertools
import os
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from sagelib import paths
from sagelib.errors import InputError
from sagelib.records.datafile import utc_stamp
from sagelib.run.execute import (
    Outcome,
    describe_failure,
    execute_notebook,
    kernel_warning,
)
from sagelib.run.notebooks import (
    NOTEBOOKS_DIR,
    Notebook,
    discover_notebooks,
    load_notebook,
    select_notebooks,
)
from sagelib.run.parameters import (
    PROFILES_FILE,
    Profile,
    check_overrides,
    get_profile,
    load_profiles,
    notebook_parameters,
    parse_overrides,
)

RUNS_DIR = Path("outputs") / "runs"


def run_folder(runs_dir: Path, profile: str, now: datetime | None = None) -> Path:
    """Create and return ``runs_dir/<YYYYmmddTHHMMSSZ>-<profile>``, or ``...-2``, ``-3``, ... when taken.

    The folder is claimed with one ``mkdir`` (no exist_ok): of two runs started in the same second one
    gets the name and the other the next, so two runs never share a folder.
    """
    stamp = (now or datetime.now(timezone.utc)).strftime("%Y%m%dT%H%M%SZ")
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the runs folder {runs_dir} ({exc.strerror}); make it writable or "
                         "pass --out DIR") from None
    for n in itertools.count(1):
        folder = runs_dir / (f"{stamp}-{profile}" if n == 1 else f"{stamp}-{profile}-{n}")
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        except OSError as exc:
            raise InputError(f"cannot create the run folder {folder} ({exc.strerror}); make {runs_dir} writable "
                             "or pass --out DIR") from None
        return folder
    raise AssertionError("unreachable")


def check_out(out: str | os.PathLike) -> Path:
    """``--out`` checked before anything runs: a new or empty folder that this process can write.

    An existing folder that holds files is refused, so a run never overwrites another run's reports.
    """
    folder = Path(out).resolve()
    shown = f"--out {str(out)!r}"
    if folder.exists() and not folder.is_dir():
        raise InputError(f"{shown}: a file, not a folder; give a folder for the run (it is created when absent)")
    if folder.is_dir() and any(folder.iterdir()):
        raise InputError(f"{shown}: the folder already holds files (a previous run?); give a new or empty folder "
                         "so that nothing is overwritten, or leave --out out for a fresh outputs/runs/ folder")
    existing = folder
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise InputError(f"{shown}: {existing} is a file, so no folder can be made under it; give another path")
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        raise InputError(f"{shown}: cannot write in {existing} ({exc.strerror or exc}); give a folder you can write "
                         "to") from None
    return folder


def _claim_out(folder: Path, shown: str) -> Path:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"--out {shown!r}: cannot create the folder ({exc.strerror or exc}); give a folder you "
                         "can write to") from None
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
    cwd: str | os.PathLike = paths.REPO_ROOT,
) -> RunPlan:
    """Check every input of a run (ValueError on the first bad one), then create its folder.

    Without ``out`` the folder is a new one under ``cwd/outputs/runs`` (:func:`run_folder`); ``out`` must be a
    new or empty folder that can be written (:func:`check_out`).
    """
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
    folder = check_out(out) if out else cwd / RUNS_DIR / f"<utc-time>-{profile}"
    for nb in notebooks:  # checks the profile's names against each parameters cell
        notebook_parameters(nb, chosen, values, folder / nb.name)
    # every check passed: only now is the folder made (a refused run leaves nothing behind)
    folder = _claim_out(folder, str(out)) if out else run_folder(cwd / RUNS_DIR, profile)
    return RunPlan(chosen, notebooks, values, folder, cwd)


def execute_plan(plan: RunPlan, *, progress_bar: bool = True, log: Callable[[str], None] = print,
                 gpus: Sequence[str] | None = None) -> RunReport:
    """Run every notebook of ``plan`` (a failure does not stop the others) and write the index; with ``gpus``
    (device ids) the notebooks run side by side, each on one of them (:mod:`sagelib.run.placement`)."""
    from sagelib.run import report as run_report

    plan.folder.mkdir(parents=True, exist_ok=True)
    started = datetime.now(timezone.utc)
    from sagelib.cuda.features import switched_off_reason

    warnings = [w for w in (kernel_warning(), switched_off_reason()) if w]
    for w in warnings:
        log(f"warning: {w}")
    environment = run_report.write_environment(plan.folder, plan.cwd)
    outcomes: list[Outcome] = []
    failures: list[str] = []
    total = len(plan.notebooks)
    placed = _placed(plan, gpus, log) if gpus else {}
    for i, nb in enumerate(plan.notebooks, 1):
        log(f"[{i}/{total}] {nb.name} ({plan.profile.name} profile)")
        parameters = notebook_parameters(nb, plan.profile, plan.overrides, plan.folder / nb.name)
        outcome = placed[nb.name].result() if placed else execute_notebook(
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


def _placed(plan: RunPlan, gpus: Sequence[str], log: Callable[[str], None]) -> dict:
    """Every notebook of ``plan`` started on ``gpus`` (sagelib.run.placement); name -> Future of its Outcome."""
    from sagelib.run import placement

    jobs = [(nb, notebook_parameters(nb, plan.profile, plan.overrides, plan.folder / nb.name), plan.folder / nb.name)
            for nb in plan.notebooks]
    return placement.start(jobs, list(gpus), cwd=plan.cwd, cell_timeout_s=plan.profile.cell_timeout_s, log=log)


def run(profile: str, *, progress_bar: bool = True, log: Callable[[str], None] = print, **plan_options) -> RunReport:
    """Plan (see :func:`plan_run` for the options) and execute a run."""
    return execute_plan(plan_run(profile, **plan_options), progress_bar=progress_bar, log=log)


def _display_path(path: Path, root: Path) -> str:
    try:
        return str(path.resolve().relative_to(root))
    except ValueError:
        return str(path)
