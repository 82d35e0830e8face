"""sagelib.run.runner and `sagelib run`: parameters, discovery, the parameters-cell check,
and end-to-end runs of small notebooks (one fine, one failing) and of the real ones."""

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sagelib import cli, paths
from sagelib.run import execute, notebooks, parameters, runner

OK_NOTEBOOK = '''\
# %% [markdown]
# # A notebook that works

# %% tags=["parameters"]
output_dir = "outputs/interactive/01_ok"
n = 3

# %%
import matplotlib.pyplot as plt
from sagelib.records.results import Results

CODE_ONLY_MARKER = n * 2
results = Results("01_ok", output_dir)
results.headline("doubled", CODE_ONLY_MARKER, unit="items", note="n times two")

# %%
fig, ax = plt.subplots()
ax.plot([1, 2, 3], [3, 1, 2])
results.figure(fig, "line")
print("printed by", "the notebook")
'''

FAILING_NOTEBOOK = '''\
# %% tags=["parameters"]
output_dir = "outputs/interactive/02_fail"

# %%
from sagelib.records.results import Results
results = Results("02_fail", output_dir)
results.headline("before_failure", 1.5)
print("first cell ran")

# %%
raise RuntimeError("deliberate failure in the second cell")

# %%
print("never reached")
'''


def write(folder: Path, files: dict) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(textwrap.dedent(text))
    return folder


def notebook_text(parameters: str, tags: str = '["parameters"]') -> str:
    return f"# %% tags={tags}\n{parameters}\n\n# %%\nprint('body')\n"


# ----------------------------------------------------------------- parameter parsing


@pytest.mark.parametrize("text, value", [
    ("3", 3), ("-2", -2), ("1e-3", 1e-3), ("0.5", 0.5),
    ("True", True), ("true", True), ("false", False), ("None", None), ("null", None),
    ("[64, 256]", [64, 256]), ("[cpu, cuda]", ["cpu", "cuda"]), ("{a: 1}", {"a": 1}),
    ("'quoted'", "quoted"), ("cuda", "cuda"), ("fp32+fp32", "fp32+fp32"), ("on", "on"),
    ("", ""),
])
def test_parse_value(text, value):
    parsed = parameters.parse_value(text)
    assert parsed == value and type(parsed) is type(value)


def test_parse_override_splits_at_the_first_equals():
    assert parameters.parse_override("n_tokens=1024") == ("n_tokens", 1024)
    assert parameters.parse_override("label=a=b") == ("label", "a=b")
    assert parameters.parse_overrides(["n=1", "n=2", "device=cuda"]) == {"n": 2, "device": "cuda"}


@pytest.mark.parametrize("text, message", [
    ("n_tokens", "expected NAME=VALUE"),
    ("=3", "expected NAME=VALUE"),
    ("1n=3", "expected NAME=VALUE"),
    ("seq sweep=3", "expected NAME=VALUE"),
    ("seq_sweep=[1, 2", "does not parse"),
    ("output_dir=x", "use --out"),
])
def test_malformed_overrides_are_refused(text, message):
    with pytest.raises(ValueError, match=message):
        parameters.parse_override(text)


# ----------------------------------------------------------------- discovery and the parameters cell


def test_discovery_takes_numbered_py_files_in_order(tmp_path):
    write(tmp_path, {"02_b.py": "", "00_a.py": "", "1_short.py": "", "03_c.ipynb": "", "notes.py": "",
                     "10_late.py": "", "profiles.yaml": ""})
    (tmp_path / "04_dir.py").mkdir()
    assert [p.name for p in notebooks.discover_notebooks(tmp_path)] == ["00_a.py", "02_b.py", "10_late.py"]


def test_discovery_of_a_missing_folder_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        notebooks.discover_notebooks(tmp_path / "nope")


def test_parameters_cell_is_read_as_literals(tmp_path):
    write(tmp_path, {"00_x.py": notebook_text(
        'output_dir = "outputs/interactive/00_x"\nn: int = 4\nsweep = [1, 2]\ndevice = "cpu"\nscale = None')})
    nb = notebooks.load_notebook(tmp_path / "00_x.py")
    assert nb.name == "00_x" and nb.parameters_cell == 0
    assert nb.parameters == {"output_dir": "outputs/interactive/00_x", "n": 4, "sweep": [1, 2],
                             "device": "cpu", "scale": None}


@pytest.mark.parametrize("text, message", [
    ("# %%\noutput_dir = 'x'\n", "found 0"),
    (notebook_text("output_dir = 'x'") + "\n# %% tags=[\"parameters\"]\nn = 1\n", r"found 2 \(cells 1, 3\)"),
    ('# %% [markdown] tags=["parameters"]\n# text\n', "markdown cell"),
    (notebook_text("output_dir = 'x'\nn = 2 * 3"), "n = 2 \\* 3 is not a literal"),
    (notebook_text("output_dir = 'x'\nimport os"), "only  name = literal"),
    (notebook_text("output_dir = 'x'\n%matplotlib inline"), "not plain Python"),
    (notebook_text("n = 3"), "has no output_dir"),
])
def test_parameters_cell_check(tmp_path, text, message):
    write(tmp_path, {"00_x.py": text})
    with pytest.raises(ValueError, match=message):
        notebooks.load_notebook(tmp_path / "00_x.py")


def test_select_by_name_number_or_title():
    paths = [Path("00_contract.py"), Path("01_quant_kernels.py")]
    assert notebooks.select_notebooks(paths, None) == paths
    assert notebooks.select_notebooks(paths, ["01"]) == paths[1:]
    assert notebooks.select_notebooks(paths, ["quant_kernels", "00_contract"]) == paths  # file order kept
    with pytest.raises(ValueError, match="'02'.*known notebooks: 00_contract, 01_quant_kernels"):
        notebooks.select_notebooks(paths, ["02"])


# ----------------------------------------------------------------- profiles


def test_profiles_file(tmp_path):
    path = write(tmp_path, {"profiles.yaml": """\
        tiny:
          cell_timeout_s: 30
          00_x: {n: 1}
        cpu:
          00_x:
        """}) / "profiles.yaml"
    profiles = parameters.load_profiles(path)
    assert profiles["tiny"] == parameters.Profile("tiny", {"00_x": {"n": 1}}, 30)
    assert profiles["cpu"] == parameters.Profile("cpu", {"00_x": {}}, execute.DEFAULT_CELL_TIMEOUT_S)
    assert parameters.load_profiles(tmp_path / "absent.yaml") == {}
    with pytest.raises(ValueError, match="'gpu'.*known profiles: tiny, cpu"):
        parameters.get_profile(profiles, "gpu", path)


@pytest.mark.parametrize("text, message", [
    ("- a\n- b\n", "expected a mapping"),
    ("tiny: [1]\n", "must map notebook names"),
    ("tiny:\n  cell_timeout_s: -1\n", "positive number"),
    ("tiny:\n  00_x: 3\n", "must map parameter names"),
    ("tiny: {a: [}\n", "not valid YAML"),
])
def test_malformed_profiles_are_refused(tmp_path, text, message):
    write(tmp_path, {"profiles.yaml": text})
    with pytest.raises(ValueError, match=message):
        parameters.load_profiles(tmp_path / "profiles.yaml")


def test_a_profiles_file_that_is_not_text_is_refused_with_its_name(tmp_path):
    (tmp_path / "profiles.yaml").write_bytes(b"\xff\xfe tiny: {}")
    with pytest.raises(ValueError, match="profiles.yaml: not valid YAML"):
        parameters.load_profiles(tmp_path / "profiles.yaml")


def test_parameter_precedence_and_checks(tmp_path):
    write(tmp_path, {"00_x.py": notebook_text("output_dir = 'x'\nn = 1\nm = 2\ndevice = 'cpu'")})
    nb = notebooks.load_notebook(tmp_path / "00_x.py")
    profile = parameters.Profile("tiny", {"00_x": {"n": 10, "m": 20}})
    chosen = parameters.notebook_parameters(nb, profile, {"m": 30, "other": 5}, tmp_path / "run" / "00_x")
    assert chosen == {"n": 10, "m": 30, "output_dir": str(tmp_path / "run" / "00_x")}
    with pytest.raises(ValueError, match="sets typo for 00_x"):
        parameters.notebook_parameters(nb, parameters.Profile("tiny", {"00_x": {"typo": 1}}), {}, tmp_path)
    with pytest.raises(ValueError, match="no selected notebook has a parameter 'nn'"):
        parameters.check_overrides({"nn": 1}, [nb])


def test_default_profile_follows_cuda(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert parameters.default_profile() == "gpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert parameters.default_profile() == "cpu"


def test_run_folder_is_utc_stamped_and_unique(tmp_path):
    from datetime import datetime, timezone

    now = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    first = runner.run_folder(tmp_path, "cpu", now)
    assert first == tmp_path / "20260102T030405Z-cpu" and first.is_dir()  # claimed, not only named
    assert runner.run_folder(tmp_path, "cpu", now) == tmp_path / "20260102T030405Z-cpu-2"
    assert runner.run_folder(tmp_path, "cpu", now) == tmp_path / "20260102T030405Z-cpu-3"


# ----------------------------------------------------------------- the command line


@pytest.fixture(autouse=True)
def only_the_run_command(monkeypatch):
    """Parse with `sagelib run` alone, so these tests judge this command, not its neighbours."""
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("sagelib.commands.run",))


@pytest.fixture
def small_workbook(tmp_path):
    return write(tmp_path / "notebooks", {
        "01_ok.py": OK_NOTEBOOK,
        "02_fail.py": FAILING_NOTEBOOK,
        "profiles.yaml": "tiny:\n  cell_timeout_s: 60\n  01_ok: {n: 5}\ncpu: {}\n",
    })


@pytest.mark.parametrize("argv, message", [
    (["--profile", "huge"], "--profile 'huge': no such profile"),
    (["--profile", "tiny", "--only", "99_nothing"], "--only '99_nothing': no such notebook"),
    (["--profile", "tiny", "-p", "n"], "-p 'n': expected NAME=VALUE"),
    (["--profile", "tiny", "-p", "typo=1"], "no selected notebook has a parameter 'typo'"),
    (["--list", "--profile", "huge"], "no such profile"),
])
def test_bad_input_is_one_line_and_exit_2(small_workbook, tmp_path, capsys, argv, message):
    code = cli.main(["run", "--notebooks", str(small_workbook), "--out", str(tmp_path / "out"), *argv])
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("sagelib run: error: ") and message in err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()  # nothing ran


def test_a_wrong_profiles_file_or_notebooks_folder_is_named(small_workbook, tmp_path, capsys):
    (tmp_path / "file").write_text("")
    absent = str(tmp_path / "absent.yaml")
    for argv, message in [
        (["--profiles", absent, "--profile", "tiny"], f"--profiles {absent!r}: no such file; give a profiles YAML"),
        (["--list", "--profiles", absent], f"--profiles {absent!r}: no such file"),
        (["--list", "--profiles", str(small_workbook)], "a folder, not a file"),
        (["--notebooks", str(tmp_path / "file"), "--profile", "tiny"], "is a file, not a folder"),
        (["--notebooks", str(tmp_path / "nope"), "--profile", "tiny"], f"--notebooks {str(tmp_path / 'nope')!r}"),
    ]:
        code = cli.main(["run", "--notebooks", str(small_workbook), "--out", str(tmp_path / "out"), *argv])
        err = capsys.readouterr().err
        assert code == 2 and err.startswith("sagelib run: error: ") and message in err, err
        assert not (tmp_path / "out").exists()


def test_list_shows_parameters_and_profile_values(small_workbook, capsys):
    assert cli.main(["run", "--notebooks", str(small_workbook), "--list"]) == 0
    out = capsys.readouterr().out
    assert "01_ok" in out and "02_fail" in out
    row = next(line.split() for line in out.splitlines() if line.strip().startswith("n "))
    assert row == ["n", "3", "5"]  # parameter, default, tiny (cpu blank: default used)
    assert "tiny 60 s" in out


# ----------------------------------------------------------------- end to end


def test_run_keeps_going_past_a_failure_and_reports_it(small_workbook, tmp_path, capsys):
    out = tmp_path / "out"
    code = cli.main(["run", "--notebooks", str(small_workbook), "--profile", "tiny", "--out", str(out),
                     "--no-progress"])
    captured = capsys.readouterr()
    assert code == 1

    # the notebook that works: executed copy, HTML without code, results with its headline and figure
    ok = out / "01_ok"
    page = (ok / "01_ok.html").read_text()
    assert "printed by the notebook" in page  # outputs are there ...
    assert "CODE_ONLY_MARKER" not in page and "plt.subplots" not in page  # ... inputs are not
    assert "data:image/png;base64" in page  # the figure is embedded
    results = json.loads((ok / "results.json").read_text())
    assert results["headlines"]["doubled"] == {"value": 10, "unit": "items", "note": "n times two"}  # n=5 from tiny
    assert results["figures"] == [{"name": "line", "path": "figures/line.png"}]
    assert (ok / "figures" / "line.png").stat().st_size > 0
    assert (ok / "01_ok.ipynb").is_file()

    # the failing one: partial notebook and HTML kept, results recorded before the failure kept
    fail = out / "02_fail"
    partial = json.loads((fail / "02_fail.ipynb").read_text())
    outputs = "".join(json.dumps(c.get("outputs", [])) for c in partial["cells"])
    assert "first cell ran" in outputs and "deliberate failure" in outputs and "never reached" not in outputs
    assert "deliberate failure in the second cell" in (fail / "02_fail.html").read_text()
    assert json.loads((fail / "results.json").read_text())["headlines"]["before_failure"]["value"] == 1.5

    # the index lists both with status, headline numbers and links
    index = (out / "index.html").read_text()
    assert "01_ok/01_ok.html" in index and "02_fail/02_fail.html" in index
    assert "<td class='ok'>ok</td>" in index and "<td class='failed'>failed</td>" in index
    assert "doubled" in index and "<b>10</b>" in index
    assert "Environment" in index and (out / "environment.json").is_file()

    # every page opens offline (nothing loaded from elsewhere) and stays small
    from sagelib.run import report

    pages = [out / "index.html", *sorted(out.glob("*/*.html"))]
    assert len(pages) == 3
    for page in pages:
        assert report.external_resources(page.read_text()) == [], page
        assert page.stat().st_size < report.HTML_SIZE_LIMIT, page
    run = json.loads((out / "run.json").read_text())
    assert [(nb["name"], nb["status"]) for nb in run["notebooks"]] == [("01_ok", "ok"), ("02_fail", "failed")]
    assert run["notebooks"][0]["parameters"] == {"n": 5, "output_dir": str(ok)}

    # the message names notebook, cell and error; the last line is the index
    failure = [line for line in captured.err.splitlines() if "FAILED" in line]
    assert len(failure) == 1
    assert "02_fail" in failure[0] and "cell 3" in failure[0]
    assert "raise RuntimeError" in failure[0] and "RuntimeError: deliberate failure in the second cell" in failure[0]
    assert captured.out.strip().splitlines()[-1] == f"index: {out / 'index.html'}"


def test_a_cell_over_the_timeout_fails_its_notebook(tmp_path):
    folder = write(tmp_path / "nbs", {
        "00_slow.py": notebook_text("output_dir = 'x'").replace("print('body')", "import time\ntime.sleep(60)"),
        "profiles.yaml": "tiny:\n  cell_timeout_s: 1\n",
    })
    report = runner.run("tiny", notebooks_dir=folder, out=tmp_path / "out", progress_bar=False, log=lambda s: None)
    (outcome,) = report.outcomes
    assert not report.ok and outcome.status == "failed"
    assert "timed out" in outcome.error.lower() or "timeout" in outcome.error.lower()
    assert outcome.cell == 2 and outcome.cell_source == "import time"
    assert outcome.duration_s < 40
    assert Path(outcome.html).is_file()


def test_every_real_notebook_runs_with_the_tiny_profile(tiny_run):
    """The workbook's own notebooks, CPU, tiny parameters: each must finish and leave its report."""
    paths = notebooks.discover_notebooks(notebooks.NOTEBOOKS_DIR)
    assert list(tiny_run) == [p.stem for p in paths]
    for name, (folder, summary, code, stderr) in tiny_run.items():
        # exit status 0: the notebook ran to its end (a failed one exits 1, naming its cell)
        assert code == 0 and summary is not None, f"{name}: `sagelib run --only {name}` exited {code}:\n{stderr}"
        assert (folder / name / "results.json").is_file(), f"{name} wrote no results.json"
        assert json.loads((folder / name / "results.json").read_text())["notebook"] == name
        assert "<html" in (folder / name / f"{name}.html").read_text()
        assert (folder / "index.html").is_file()


def _headlines(folder: Path) -> dict:
    return json.loads((folder / "results.json").read_text())["headlines"]


def _papermill(ipynb: Path, out: Path, cwd: Path, *args: str) -> None:
    out.mkdir(parents=True)
    done = subprocess.run([sys.executable, "-m", "papermill", str(ipynb), str(out / "run.ipynb"), "--cwd", str(cwd),
                           "-p", "output_dir", str(out), "--no-progress-bar", *args],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-1500:]


def test_papermill_on_the_exported_contract_notebook_equals_sagelib_run(tiny_run, tmp_path, monkeypatch):
    """papermill's own command line on the file `sagelib notebooks export` writes, the tiny profile's values given
    as -p (scalars) and -y (lists), against the tiny run of `sagelib run`: the same recorded numbers. (Here, after
    tests/test_kernels_check.py, the shared tiny run finds every kernel build in the session's nvcc cache.)"""
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("sagelib.commands.notebooks",))
    assert cli.main(["notebooks", "export", "--only", "00", "--out", str(tmp_path / "export")]) == 0
    ipynb = tmp_path / "export" / "00_contract.ipynb"
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


def test_kernel_check_flags_a_stray_python3_kernelspec(tmp_path, monkeypatch):
    assert execute.kernel_warning() is None  # this environment's own kernel
    spec = tmp_path / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps(
        {"argv": ["/opt/other/bin/python", "-m", "ipykernel_launcher", "-f", "{connection_file}"],
         "display_name": "Python 3", "language": "python"}))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path))  # searched before the environment's own folder
    warning = execute.kernel_warning()
    assert warning and "/opt/other/bin/python" in warning


@pytest.mark.skipif(sys.platform.startswith("win"), reason="Unix sockets")
def test_notebook_kernels_talk_over_their_own_unix_sockets():
    """Two kernels started at once over TCP can pick the same free port (the loser never answers); each kernel
    papermill starts here gets its own socket folder instead, removed with its sockets."""
    from sagelib.run.execute import kernel_manager_class

    managers = [kernel_manager_class()(kernel_name="python3") for _ in range(2)]
    assert all(m.transport == "ipc" for m in managers)
    folders = [Path(m.ip).parent for m in managers]
    assert folders[0] != folders[1] and all(f.is_dir() for f in folders)
    for m, folder in zip(managers, folders):
        m.cleanup_ipc_files()
        assert not folder.exists()
