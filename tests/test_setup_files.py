"""The set-up files agree: environment.yml installs what pyproject.toml declares,
.ci/run is `make test` and fails with it, and the README gives the two commands."""

import os
import re
import shutil
import stat
import subprocess
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

ROOT = Path(__file__).resolve().parent.parent
# conda-forge names that differ from the PyPI ones
CONDA_TO_PYPI = {"pytorch": "torch"}


def pyproject():
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def environment():
    return yaml.safe_load((ROOT / "environment.yml").read_text())


def conda_name(spec: str) -> str:
    name = re.match(r"[A-Za-z0-9_.\-]+", spec.strip()).group(0)
    return canonicalize_name(CONDA_TO_PYPI.get(name, name))


def test_environment_yml_installs_the_runtime_dependencies_of_pyproject():
    declared = {canonicalize_name(Requirement(r).name) for r in pyproject()["project"]["dependencies"]}
    env = environment()
    conda = {conda_name(d) for d in env["dependencies"] if isinstance(d, str)} - {"python", "pip"}
    assert conda == declared, f"only in environment.yml: {conda - declared}; only in pyproject: {declared - conda}"
    assert env["channels"] == ["conda-forge"]


def test_environment_yml_installs_sagelib_itself_with_pip():
    pip_sections = [d["pip"] for d in environment()["dependencies"] if isinstance(d, dict) and "pip" in d]
    assert len(pip_sections) == 1
    assert any(re.fullmatch(r"-e \.(\[[a-z0-9,]+\])?", line.strip()) for line in pip_sections[0])
    assert "pip" in environment()["dependencies"]


def test_extras_cover_cuda_lab_and_test():
    extras = pyproject()["project"]["optional-dependencies"]
    assert {"cuda12", "cuda13", "lab", "test"} <= set(extras)


def fake_make(tmp_path: Path, exit_code: int) -> dict:
    """An environment whose `make` records its arguments and exits with exit_code."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    make = bin_dir / "make"
    make.write_text(f'#!/bin/sh\necho "$@" > "{tmp_path}/make-args"\nexit {exit_code}\n')
    make.chmod(make.stat().st_mode | stat.S_IEXEC)
    return {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}


@pytest.mark.parametrize("make_exit", [0, 1])
def test_ci_runs_make_test_and_fails_when_it_fails(tmp_path, make_exit):
    done = subprocess.run(["bash", str(ROOT / ".ci" / "run")], env=fake_make(tmp_path, make_exit),
                          capture_output=True, text=True, timeout=60)
    assert (tmp_path / "make-args").read_text().split() == ["test"]
    assert (done.returncode == 0) == (make_exit == 0)


def test_makefile_has_the_two_targets_and_the_torch_variable():
    makefile = (ROOT / "Makefile").read_text()
    for target in ("run", "test", "lab", "clean"):
        assert re.search(rf"^{target}:", makefile, re.M), f"Makefile has no {target} target"
    assert re.search(r"^TORCH_SPEC \?= torch==", makefile, re.M)


def test_readme_gives_the_two_commands_and_the_gpu_route():
    readme = (ROOT / "README.md").read_text()
    for needle in ("make run", "make test", "make lab", "TORCH_SPEC", "sagelib run --profile gpu",
                   "scripts/build_wheelhouse.sh", "outputs/runs/", ".[cuda13]"):
        assert needle in readme, f"README does not mention {needle}"


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_make_help_prints_no_make_syntax_and_lab_passes_lab_args(tmp_path):
    helped = subprocess.run(["make", "-s", "help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert helped.returncode == 0 and "make run" in helped.stdout and "LAB_ARGS" in helped.stdout
    assert "$(" not in helped.stdout, helped.stdout
    venv = tmp_path / "venv"  # a dry run (-n) on a venv that does not exist: prints, runs nothing
    dry = subprocess.run(["make", "-n", "lab", f"VENV={venv}", "LAB_ARGS=--no-browser --port 8888 --ip 0.0.0.0"],
                         cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert f"{venv}/bin/jupyter lab --no-browser --port 8888 --ip 0.0.0.0" in dry.stdout, dry.stdout
    assert not venv.exists()


def test_the_readme_python_example_runs_on_a_cpu(capsys):
    readme = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", readme, re.S)
    example = next(b for b in blocks if "contract.attention" in b)
    exec(compile(example.replace("1024", "128"), "README.md", "exec"), {})  # a shorter N, the same calls
    printed = float(capsys.readouterr().out.split()[-1])
    assert 0.0 < printed < 0.1, f"the README example's relative L1 is {printed}, not the small error it promises"


def test_the_makefiles_python_one_liners_import():
    """`make run` picks its profile with a python -c one-liner; a name that moved made it print a traceback and
    run with an empty --profile. Each `from X import Y` in the Makefile must resolve."""
    import importlib

    makefile = (ROOT / "Makefile").read_text()
    found = re.findall(r"from (sagelib[\w.]*) import (\w+)", makefile)
    assert found, "the Makefile no longer picks the profile with sagelib: update this test"
    for module, name in found:
        assert hasattr(importlib.import_module(module), name), f"Makefile: {module} has no {name}"
