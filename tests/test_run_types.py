"""sagelib.run.types: a parameter's declared type and bounds, and the real notebooks' declarations."""

import pytest

from sagelib import paths
from sagelib.errors import InputError
from sagelib.run import notebooks, types

CELL = '''\
output_dir: str = "x"  # where it goes
n_tokens: int = 2048  # tokens per sequence (at least 1)
scale: float = 0.5  # a share (more than 0)
sweep: list[int] = [256, 1024]  # lengths (at least 1)
names: list[str] = ["a"]  # names
strengths: list[float] = [0, 2]  # (at least 0)
flag: bool = True
device: str = "cpu"  # where (one of cpu, cuda)
anything = 3
'''


@pytest.fixture(scope="module")
def declared():
    return notebooks.parse_declarations(CELL, "nb.py")


def test_declarations_read_annotation_help_and_line(declared):
    assert declared["n_tokens"].annotation == "int" and declared["n_tokens"].help == "tokens per sequence (at least 1)"
    assert declared["sweep"].annotation == "list[int]" and declared["sweep"].element == "int"
    assert declared["n_tokens"].line == "n_tokens: int = 2048"
    assert declared["flag"].help == "" and declared["anything"].annotation is None


@pytest.mark.parametrize("name, value, expected", [
    ("n_tokens", 1024, 1024), ("scale", 2, 2), ("scale", 0.25, 0.25), ("sweep", (64, 128), [64, 128]),
    ("names", ["a", 3], ["a", "3"]), ("strengths", [0, 1.5], [0, 1.5]), ("flag", False, False),
    ("device", "cuda", "cuda"), ("output_dir", 2024, "2024"), ("anything", "free", "free"),
])
def test_values_of_the_declared_type_pass(declared, name, value, expected):
    assert types.check(declared[name], value, None, "-p", "00_nb") == expected


@pytest.mark.parametrize("name, value, message", [
    ("n_tokens", "abc", "00_nb's parameter n_tokens is an int, got 'abc' (declared `n_tokens: int = 2048`)"),
    ("n_tokens", 0, "n_tokens must be at least 1, got 0"),
    ("n_tokens", True, "is an int"),
    ("n_tokens", 1.5, "is an int"),
    ("scale", 0, "must be more than 0"),
    ("sweep", "256,1024", "is a list[int], written [a, b]"),
    ("sweep", 256, "is a list[int]"),
    ("sweep", [256, "x"], "every element an int"),
    ("sweep", [256, 0], "must be at least 1"),
    ("strengths", [-1], "must be at least 0"),
    ("flag", "yes", "is a bool"),
    ("device", "gpu", "is one of cpu, cuda"),
])
def test_wrong_values_are_refused_naming_parameter_and_fix(declared, name, value, message):
    with pytest.raises(InputError) as refused:
        types.check(declared[name], value, 7, "-p", "00_nb")
    text = str(refused.value)
    assert message in text and text.startswith("-p: ") and "give e.g. -p " in text and "\n" not in text


def test_an_annotation_the_runner_cannot_check_is_refused():
    with pytest.raises(InputError, match="declared 'Optional\\[int\\]', a type the runner cannot check"):
        notebooks.parse_declarations("x: Optional[int] = 3\n", "nb.py")
    with pytest.raises(InputError, match="declared 'list\\[dict\\]'"):
        notebooks.parse_declarations("x: list[dict] = []\n", "nb.py")


NOTEBOOKS = sorted(paths.NOTEBOOKS_DIR.glob("[0-9][0-9]_*.py"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_every_real_parameter_is_declared_with_a_type_and_help_its_default_meets(path):
    notebook = notebooks.load_notebook(path)
    for name, default in notebook.parameters.items():
        declared = notebook.declared[name]
        assert declared.annotation, f"{path.name}: {name} has no type; write  {name}: TYPE = ...  # help"
        assert declared.help, f"{path.name}: {name} has no help comment (papermill --help-notebook shows it)"
        assert "=" not in declared.help, f"{path.name}: {name}'s help holds '=': papermill skips such a line"
        assert types.check(declared, default, default, "default", notebook.name) == default
