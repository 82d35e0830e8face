"""The notebooks hold narrative, calls into sagelib and plots: no function or class of their own.

Anything a notebook needs beyond a few lines lives in sagelib.studies, where it is imported, documented and tested.
"""

import ast

import pytest

from sagelib import paths
from sagelib.run import notebooks

MAX_FUNCTION_LINES = 5
NOTEBOOKS = sorted(paths.NOTEBOOKS_DIR.glob("[0-9][0-9]_*.py"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_notebook_defines_no_function_longer_than_a_few_lines(path):
    long = [f"{node.name} (line {node.lineno}, {node.end_lineno - node.lineno + 1} lines)"
            for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and (isinstance(node, ast.ClassDef) or node.end_lineno - node.lineno + 1 > MAX_FUNCTION_LINES)]
    assert not long, f"{path.name}: move these into sagelib/studies/: {long}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_parameter_is_read_by_the_notebook(path):
    notebook, nb = notebooks.load_notebook(path), notebooks.read_notebook(path)
    parameters = notebooks.parameters_cell_index(nb, path)
    body = "\n".join(cell.source for i, cell in enumerate(nb.cells) if cell.cell_type == "code" and i != parameters)
    used = {node.id for node in ast.walk(ast.parse(_code_only(body))) if isinstance(node, ast.Name)}
    unused = sorted(set(notebook.parameters) - used)
    assert not unused, f"{path.name}: parameters no cell reads: {unused}; remove them here and in profiles.yaml"


def _code_only(source: str) -> str:
    # jupytext keeps markdown cells as comments and magics as commented lines; what parses is the code
    return "\n".join(line for line in source.splitlines() if not line.lstrip().startswith(("%", "!")))


# a cell's last bare expression is shown in the report: only these calls are meant to show something there
SHOWN_CALLS = {"display", "print", "plots.table"}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_no_cell_ends_in_a_value_the_report_would_show_as_a_repr(path):
    stray = []
    for i, cell in enumerate(notebooks.read_notebook(path).cells):
        source = cell.source.rstrip()
        if cell.cell_type != "code" or source.endswith(";"):
            continue
        body = ast.parse(_code_only(source)).body
        last = body[-1] if body else None
        if isinstance(last, ast.Expr) and not (isinstance(last.value, ast.Call)
                                               and ast.unparse(last.value.func) in SHOWN_CALLS):
            stray.append(f"cell {i + 1}: {ast.unparse(last)[:60]}")
    assert not stray, (f"{path.name}: these cells end in an expression whose value (e.g. a PosixPath) the report "
                       f"would print; end the line with ';' or show it with display(): {stray}")
