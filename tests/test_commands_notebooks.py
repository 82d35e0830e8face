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

SMALL = '''\
# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3
#     language: python
#     name: python3
# ---

# %% tags=["parameters"]
output_dir: str = "outputs/interactive/01_small"  # folder
n: int = 3  # a count (at least 1)
sweep: list[int] = [1, 2]  # values (at least 1)
label: str = "a"  # a name

# %%
from sagelib.records.results import Results

results = Results("01_small", output_dir)
results.headline("total", n * sum(sweep), note=label)
results.headline("types", " ".join(type(v).__name__ for v in (n, sweep, label)))
'''


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


def test_papermill_on_the_export_equals_sagelib_run(tmp_path, capsys):
    folder = tmp_path / "nbs"
    folder.mkdir()
    (folder / "01_small.py").write_text(SMALL)
    (folder / "profiles.yaml").write_text("tiny: {}\n")
    assert cli.main(["run", "--notebooks", str(folder), "--profile", "tiny", "--out", str(tmp_path / "run"),
                     "--no-progress", "-p", "n", "4", "-p", "sweep", "[5, 6]", "-p", "label=b"]) == 0
    (ipynb,) = _export(["--notebooks", str(folder), "--out", str(tmp_path / "export")], capsys)
    # papermill's own -p reads [5, 6] as text: a list goes in with -y
    _papermill(ipynb, tmp_path / "pm", tmp_path, "-p", "n", "4", "-p", "label", "b", "-y", "{sweep: [5, 6]}")
    ours = _headlines(tmp_path / "run" / "01_small")
    assert ours["total"]["value"] == 44 and ours["types"]["value"] == "int list str"
    assert _headlines(tmp_path / "pm") == ours


@pytest.mark.slow
def test_papermill_on_the_exported_contract_notebook_equals_sagelib_run(tmp_path, capsys):
    assert cli.main(["run", "--only", "00", "--profile", "tiny", "--out", str(tmp_path / "run"), "--no-progress",
                     "-p", "n_tokens", "128", "-p", "seq_sweep", "[64, 128]"]) == 0
    (ipynb,) = _export(["--only", "00", "--out", str(tmp_path / "export")], capsys)
    tiny = {**_tiny("00_contract"), "seq_sweep": [64, 128]}  # what the tiny profile gives, as papermill's -y
    _papermill(ipynb, tmp_path / "pm", paths.REPO_ROOT, "-y", json.dumps(tiny), "-p", "n_tokens", "128")
    ours = _headlines(tmp_path / "run" / "00_contract")
    assert ours and _headlines(tmp_path / "pm") == ours


def _tiny(name: str) -> dict:
    from sagelib.run import parameters

    return parameters.load_profiles(paths.NOTEBOOKS_DIR / parameters.PROFILES_FILE)["tiny"].notebooks[name]
