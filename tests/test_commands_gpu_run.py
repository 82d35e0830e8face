"""``sagelib gpu-run``: arguments, the no-GPU path, recording a fetched run folder, and the host-side helpers."""

import json
import subprocess
import sys
import tarfile

import pytest
import torch

from sagelib import cli
from sagelib.run import gpu_run


def run(capsys, *argv):
    code = cli.main(["gpu-run", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _run_folder(root, card="NVIDIA H200", with_bench=True):
    """A `sagelib run` folder as the gpu profile leaves it: run.json, environment.json, results per notebook."""
    root.mkdir(parents=True)
    (root / "run.json").write_text(json.dumps({
        "started_utc": "2030-01-02T03:04:05Z", "finished_utc": "2030-01-02T03:09:00Z",
        "notebooks": [{"name": "00_contract"}, {"name": "03_performance"}, {"name": "04_profile"}]}))
    (root / "environment.json").write_text(json.dumps({"gpus": [card], "git_commit": "abc"}))
    (root / "00_contract").mkdir()
    (root / "00_contract" / "results.json").write_text(json.dumps({"values": {"ok": True}}))
    (root / "03_performance").mkdir()
    if with_bench:
        (root / "03_performance" / "bench.json").write_text(json.dumps({"schema": "sagelib.bench/1", "records": []}))
    (root / "04_profile").mkdir()
    (root / "04_profile" / "results.json").write_text(json.dumps({"values": {"ncu": {"schema": "sagelib.ncu/1"}}}))
    return root


@pytest.mark.parametrize("argv,message", [
    (["--from", "x"], "--from: records a fetched run folder; give --record STEM and --command TEXT"),
    (["--from", "x", "--record", "s", "--command", "c", "--only", "00"], "--only and --wheelhouse go with a run"),
    (["--command", "c"], "--command names the command of a fetched run (--from)"),
    (["--record", "a/b"], "--record 'a/b': expected a file stem"),
    (["--wheelhouse", "/no/such/wheels"], "--wheelhouse '/no/such/wheels': no such folder"),
])
def test_bad_arguments_exit_2_naming_the_flag(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and message in err and out == ""


def test_an_out_that_is_a_file_is_refused(capsys, tmp_path):
    (tmp_path / "f").write_text("")
    code, _, err = run(capsys, "--out", str(tmp_path / "f"))
    assert code == 2 and "a file, not a folder" in err


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_without_a_gpu_nothing_runs_and_it_exits_3(capsys, tmp_path):
    code, out, err = run(capsys, "--out", str(tmp_path / "out"))
    assert code == 3 and "sees no CUDA GPU" in err and "--profile cpu" in err
    assert not (tmp_path / "out").exists() and out == ""


def test_a_fetched_run_is_recorded_once_and_never_overwritten(capsys, tmp_path):
    folder = _run_folder(tmp_path / "run")
    results = tmp_path / "results"
    argv = ["--from", str(folder), "--record", "gpu-run-abc", "--command", "sagelib gpu-run", "--annotation", "note",
            "--results", str(results)]
    code, out, _ = run(capsys, *argv)
    assert code == 0
    names = sorted(p.name for p in results.iterdir())
    assert names == ["2030-01-02-nvidia-h200-gpu-run-abc-ncu.json", "2030-01-02-nvidia-h200-gpu-run-abc-performance.json",
                     "2030-01-02-nvidia-h200-gpu-run-abc.json"]
    main = json.loads((results / names[2]).read_text())
    assert main["schema"] == "sagelib.run/1" and main["device"] == {"name": "NVIDIA H200"}
    assert main["created_utc"] == "2030-01-02T03:09:00Z" and main["annotations"] == ["note"]
    assert main["run"]["notebooks"][0]["results"] == {"values": {"ok": True}}
    assert main["run"]["notebooks"][1]["results"] is None  # notebook 03 kept no results.json
    performance = json.loads((results / names[1]).read_text())
    assert performance["schema"] == "sagelib.bench/1" and performance["command"] == \
        "sagelib gpu-run; notebook 03_performance's sweep"
    before = {p: p.read_text() for p in results.iterdir()}
    code, _, err = run(capsys, *argv)
    assert code == 2 and "never overwritten" in err
    assert {p: p.read_text() for p in results.iterdir()} == before


def test_a_folder_without_run_json_is_refused(capsys, tmp_path):
    code, _, err = run(capsys, "--from", str(tmp_path), "--record", "s", "--command", "c",
                       "--results", str(tmp_path / "r"))
    assert code == 2 and "expected a `sagelib run` folder with run.json" in err
    assert not (tmp_path / "r").exists()


def test_a_run_without_the_performance_notebook_records_what_it_has(tmp_path):
    folder = _run_folder(tmp_path / "run", with_bench=False)
    assert set(gpu_run.run_documents(folder, "c", [])) == {"", "-ncu"}


def test_the_command_line_imports_no_notebook_stack():
    """gpu-run installs the carried notebook stack itself, so building the parser must not need it."""
    code = ("import sys; from sagelib import cli; cli.build_parser(); "
            "print(sorted(m for m in ('papermill', 'nbconvert', 'jupytext', 'ipykernel', 'torch') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_wheelhouse_is_installed_only_when_the_stack_is_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_run, "stack_missing", lambda **kw: None)
    monkeypatch.setattr(gpu_run.subprocess, "run", lambda *a, **kw: pytest.fail("pip ran for a stack already there"))
    env = {}
    assert gpu_run.install_wheelhouse(tmp_path, env) == "notebook stack: already importable" and env == {}
    monkeypatch.undo()
    monkeypatch.setattr(gpu_run, "stack_missing", lambda **kw: "ModuleNotFoundError: No module named 'papermill'")
    with pytest.raises(ValueError, match="no .whl files.*No module named 'papermill'.*build_wheelhouse.sh"):
        gpu_run.install_wheelhouse(tmp_path, {})


def test_the_wgmma_check_says_why_it_could_not_look(tmp_path, monkeypatch):
    from sagelib.cuda import sass

    monkeypatch.setattr(sass, "find_cuobjdump", lambda: None)
    assert gpu_run.wgmma_sass_lines(tmp_path) == [
        "wgmma microbenchmark SASS: not checked (no cuobjdump on PATH or in /usr/local/cuda*/bin)"]
    monkeypatch.setattr(sass, "find_cuobjdump", lambda: "/bin/cuobjdump")
    (tmp_path / "other.cubin").write_bytes(b"attn")
    assert gpu_run.wgmma_sass_lines(tmp_path) == [
        f"wgmma microbenchmark SASS: not checked (no cubin with bench_wgmma in {tmp_path})"]


def test_the_run_folder_is_packed_under_its_own_name(tmp_path):
    folder = _run_folder(tmp_path / "run")
    archive = gpu_run.pack(folder, tmp_path / "run.tgz")
    with tarfile.open(archive) as tar:
        assert "run/run.json" in tar.getnames() and "run/03_performance/bench.json" in tar.getnames()


def test_a_target_install_puts_its_jupyter_data_on_jupyter_path(tmp_path):
    from sagelib.run import gpu_run

    (tmp_path / "share" / "jupyter" / "nbconvert").mkdir(parents=True)
    env = {"PYTHONPATH": "/elsewhere", "JUPYTER_PATH": "/theirs"}
    gpu_run.use_site(tmp_path, env)
    assert env["PYTHONPATH"].split(":") == [str(tmp_path), "/elsewhere"]
    assert env["JUPYTER_PATH"].split(":") == [str(tmp_path / "share" / "jupyter"), "/theirs"]


def test_no_hopper_reaches_the_notebooks_run_and_gpu_txt(capsys, tmp_path, monkeypatch):
    """--no-hopper puts SAGELIB_HOPPER=off in the child's environment (the notebooks inherit it) and says so."""
    seen = {}

    def run_notebooks(run_dir, log, env, only=()):
        seen["setting"] = env.get("SAGELIB_HOPPER")
        return 0

    monkeypatch.delenv("SAGELIB_HOPPER", raising=False)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(gpu_run, "run_notebooks", run_notebooks)
    monkeypatch.setattr(gpu_run, "gpu_line", lambda: "name\nNVIDIA H200")
    monkeypatch.setattr(gpu_run, "wgmma_sass_lines", lambda cache: [])
    monkeypatch.setenv("SAGELIB_KERNEL_CACHE", str(tmp_path / "cache"))
    code, out, _ = run(capsys, "--out", str(tmp_path / "out"), "--no-hopper")
    assert code == 0 and seen["setting"] == "off"
    assert "Hopper paths: off (SAGELIB_HOPPER=off)" in (tmp_path / "out" / "gpu.txt").read_text()
    code, _, _ = run(capsys, "--out", str(tmp_path / "out"))
    assert code == 0 and seen["setting"] is None  # without the flag the child gets no setting
