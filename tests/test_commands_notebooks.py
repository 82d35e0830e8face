"""`sagelib notebooks export` and the papermill/Jupyter conventions: the exported .ipynb runs under papermill's own
command line with -p and gives what `sagelib run` gives with the same values; --help-notebook knows every
parameter's type; a jupytext round trip (what a JupyterLab save does) leaves the .py files byte for byte."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sagelib import cli, paths
from sagelib.run import notebooks

NOTEBOOKS = sorted(paths.NOTEBOOKS_DIR.glob("[0-9][0-9]_*.py"))



def _export(argv, capsys) -> list[Path]:
    capsys.readouterr()
    assert cli.main(["notebooks", "export", *argv]) == 0
    return [Path(line) for line in capsys.readouterr().out.split()]


def test_export_writes_ipynb_papermill_reads_with_every_type(tmp_path, capsys):
    from papermill.inspection import inspect_notebook

    written = _export(["--out", str(tmp_path)], capsys)
    assert [p.name for p in written] == [p.stem + ".ipynb" for p in NOTEBOOKS]
    for path, source in zip(written, NOTEBOOKS):
        nb = json.loads(path.read_text())
        assert nb["metadata"]["kernelspec"]["name"] == "python3" and "jupytext" not in nb["metadata"]
        assert all(not cell.get("outputs") for cell in nb["cells"])
        tagged = [c for c in nb["cells"] if "parameters" in c["metadata"].get("tags", [])]
        assert len(tagged) == 1
        inferred = inspect_notebook(str(path))
        declared = notebooks.load_notebook(source).declared
        assert list(inferred) == list(declared)
        assert {k: v["inferred_type_name"] for k, v in inferred.items()} == {
            k: d.annotation for k, d in declared.items()}, f"{path.name}: papermill reads other types"


def test_export_only_one_and_refuses_a_file_as_folder(tmp_path, capsys):
    assert [p.name for p in _export(["--only", "00", "--out", str(tmp_path)], capsys)] == ["00_contract.ipynb"]
    (tmp_path / "file").write_text("")
    assert cli.main(["notebooks", "export", "--out", str(tmp_path / "file")]) == 2
    assert "a file, not a folder" in capsys.readouterr().err


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_jupytext_round_trip_leaves_the_file_unchanged(path, tmp_path):
    """What a JupyterLab save does (the .py through a notebook, with the metadata a kernel adds, back to text)."""
    import jupytext
    from jupytext.cli import jupytext as jupytext_cli

    text = path.read_text(encoding="utf-8")
    nb = jupytext.reads(text, fmt="py:percent")
    nb.metadata["language_info"] = {"name": "python", "version": "3.11"}
    assert jupytext.writes(nb, fmt="py:percent") == text
    copy = tmp_path / path.name
    copy.write_text(text, encoding="utf-8")
    jupytext_cli([str(copy), "--to", "ipynb", "--quiet"])
    jupytext_cli([str(copy.with_suffix(".ipynb")), "--to", "py:percent", "--quiet"])
    assert copy.read_text(encoding="utf-8") == text


def _headlines(folder: Path) -> dict:
    return json.loads((folder / "results.json").read_text())["headlines"]


def _papermill(ipynb: Path, out: Path, cwd: Path, *args: str) -> None:
    out.mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "papermill", str(ipynb), str(out / "run.ipynb"), "--cwd", str(cwd),
                           "-p", "output_dir", str(out), "--no-progress-bar", *args],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-1500:]


def test_papermill_on_the_exported_contract_notebook_equals_sagelib_run(tiny_run, tmp_path, capsys):
    """papermill's own command line, the tiny profile's values given as -p (scalars) and -y (lists), against the
    tiny run of `sagelib run`: the same recorded numbers."""
    (ipynb,) = _export(["--only", "00", "--out", str(tmp_path / "export")], capsys)
    tiny = _tiny("00_contract")
    scalars = [arg for k, v in tiny.items() if not isinstance(v, list) for arg in ("-p", k, str(v))]
    lists = {k: v for k, v in tiny.items() if isinstance(v, list)}
    assert "-p" in scalars and lists
    _papermill(ipynb, tmp_path / "pm", paths.REPO_ROOT, *scalars, "-y", json.dumps(lists))
    folder, summary, code, _ = tiny_run["00_contract"]
    assert code == 0
    expected = _headlines(folder / "00_contract")
    assert expected and _headlines(tmp_path / "pm") == expected


def _tiny(name: str) -> dict:
    from sagelib.run import parameters

    return parameters.load_profiles(paths.NOTEBOOKS_DIR / parameters.PROFILES_FILE)["tiny"].notebooks[name]
