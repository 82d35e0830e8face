"""The notebooks of a run: found in ``notebooks/`` (``NN_name.py``, jupytext py:percent), read, and their
one ``parameters`` cell parsed into literal defaults.
"""

from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from sagelib import paths
from sagelib.errors import InputError
from sagelib.run.types import Declared, declare

NOTEBOOKS_DIR = paths.NOTEBOOKS_DIR


PARAMETERS_TAG = "parameters"


OUTPUT_DIR_PARAMETER = "output_dir"


_NOTEBOOK_FILE = re.compile(r"^(\d\d)_([A-Za-z0-9_]+)\.py$")


IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Notebook:
    """One notebook of the workbook, read and checked.

    ``cells`` keeps each cell's source so a failure can be named by its place in
    the ``.py`` file; ``parameters`` are the literal defaults of its parameters cell, ``declared`` what the cell
    says of each (type annotation, help comment; :mod:`sagelib.run.types`).
    """

    name: str
    path: Path
    parameters: dict[str, Any]
    parameters_cell: int
    cells: tuple[str, ...]
    declared: dict[str, Declared] = field(default_factory=dict)


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


def parse_declarations(source: str, path: str | os.PathLike) -> dict[str, Declared]:
    """``{name: Declared}`` of a parameters cell that :func:`parse_parameters_cell` accepts: each line's
    annotation (``name: int = 3``) and trailing ``# help`` comment, as papermill's ``--help-notebook`` reads them."""
    lines = source.splitlines()
    declared = {}
    for statement in ast.parse(source).body:
        annotated = isinstance(statement, ast.AnnAssign)
        target = statement.target if annotated else statement.targets[0]
        last = lines[statement.end_lineno - 1]
        tail = last[statement.end_col_offset:].strip()
        help_text = tail[1:] if tail.startswith("#") else ""
        annotation = ast.get_source_segment(source, statement.annotation) if annotated else None
        text = " ".join(ast.get_source_segment(source, statement).split())
        declared[target.id] = declare(target.id, annotation, help_text, text, str(path))
    return declared


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
    declared = parse_declarations(nb.cells[index].source, path)
    return Notebook(path.stem, path, parameters, index, tuple(cell.source for cell in nb.cells), declared)


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


def export_notebook(path: str | os.PathLike, folder: str | os.PathLike) -> Path:
    """Write the notebook at ``path`` as ``folder/NN_name.ipynb`` (no outputs, its ``parameters`` cell tagged),
    the file ``papermill NN_name.ipynb out.ipynb -p NAME VALUE`` runs as it is; returns the path written."""
    import nbformat

    notebook = load_notebook(path)  # checked first: one parameters cell of literals
    nb = read_notebook(notebook.path)
    nb.metadata.pop("jupytext", None)  # an .ipynb paired with nothing; jupytext would look for the .py beside it
    target = Path(folder) / f"{notebook.name}.ipynb"
    target.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, target)
    return target
