"""sagelib.run.placement and `sagelib run --gpus`: which device ids a run takes, and notebooks run side by side,
each in a process that sees one device alone (CUDA_VISIBLE_DEVICES), into the same run folder as a serial run."""

import json
import textwrap

import pytest

from sagelib import cli
from sagelib.errors import KernelUnavailable, UsageError
from sagelib.measure import (
    distribute as placement,  # visible_gpus lives there; sagelib.run.placement uses it
)


@pytest.mark.parametrize("gpus, environ, expected", [
    (2, {"CUDA_VISIBLE_DEVICES": "3,5,7"}, ["3", "5"]),
    ("all", {"CUDA_VISIBLE_DEVICES": "3, 5,7"}, ["3", "5", "7"]),
    (1, {"CUDA_VISIBLE_DEVICES": "GPU-aa"}, ["GPU-aa"]),
])
def test_visible_gpus_takes_the_first_of_cuda_visible_devices(gpus, environ, expected):
    assert placement.visible_gpus(gpus, environ) == expected


def test_visible_gpus_refuses_more_than_there_are_or_none():
    with pytest.raises(UsageError, match=r"--gpus 3: only 2 GPU\(s\) visible \(0,1\); give at most 2"):
        placement.visible_gpus(3, {"CUDA_VISIBLE_DEVICES": "0,1"})
    with pytest.raises(KernelUnavailable, match="no CUDA GPU is visible here.*leave out --gpus"):
        placement.visible_gpus("all", {"CUDA_VISIBLE_DEVICES": ""})


SEES = '''\
# %% tags=["parameters"]
output_dir = "outputs/interactive/{name}"

# %%
import os
from sagelib.records.results import Results
Results("{name}", output_dir).headline("device", os.environ.get("CUDA_VISIBLE_DEVICES"))
'''


def test_run_gpus_places_each_notebook_on_its_own_device(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("sagelib.commands.run",))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6,8")
    folder = tmp_path / "nbs"
    folder.mkdir()
    for name in ("01_a", "02_b"):
        (folder / f"{name}.py").write_text(textwrap.dedent(SEES.format(name=name)))
    (folder / "profiles.yaml").write_text("tiny:\n  cell_timeout_s: 120\n")
    out = tmp_path / "out"
    code = cli.main(["run", "--notebooks", str(folder), "--profile", "tiny", "--out", str(out), "--gpus", "2"])
    printed = capsys.readouterr().out
    assert code == 0, printed
    assert "side by side on GPU(s) 4,6" in printed
    seen = {name: json.loads((out / name / "results.json").read_text())["headlines"]["device"]["value"]
            for name in ("01_a", "02_b")}
    assert sorted(seen.values()) == ["4", "6"]  # one device each, never the whole list
    run = json.loads((out / "run.json").read_text())
    assert [(nb["name"], nb["status"]) for nb in run["notebooks"]] == [("01_a", "ok"), ("02_b", "ok")]
    assert (out / "01_a" / "01_a.html").is_file() and (out / "index.html").is_file()
