"""`sagelib notebooks export` and the papermill/Jupyter conventions: the exported .ipynb is what papermill reads
(its --help-notebook knows every parameter's type); a jupytext round trip (what a JupyterLab save does) leaves the
.py files byte for byte. That papermill running the export gives what `sagelib run` gives is in test_runner.py,
beside the shared run of the real notebooks."""

import json
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
