"""sagelib.run.parameters: papermill's ways of giving parameters (-p NAME VALUE, -r, -y, -f) beside -p NAME=VALUE,
and each value checked against its notebook's declared type before any notebook starts."""

import pytest

from sagelib import cli
from sagelib.errors import InputError
from sagelib.run import parameters, runner

TYPED = '''\
# %% tags=["parameters"]
output_dir: str = "outputs/interactive/01_typed"  # folder
n_tokens: int = 64  # tokens (at least 1)
sweep: list[int] = [8, 16]  # lengths (at least 1)
device: str = "cpu"  # where (one of cpu, cuda)

# %%
print(n_tokens, sweep, device)
'''


@pytest.fixture
def workbook(tmp_path):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    (folder / "01_typed.py").write_text(TYPED)
    (folder / "profiles.yaml").write_text("tiny:\n  01_typed: {n_tokens: 32}\nbad:\n  01_typed: {sweep: 8}\n")
    return folder


def test_papermill_and_sagelib_forms_of_p_give_the_same_values():
    assert parameters.parse_overrides([["n_tokens", "1024"], ["sweep=[64, 256]"], "x=true"]) == {
        "n_tokens": 1024, "sweep": [64, 256], "x": True}
    assert parameters.parse_overrides([["sweep", "[64, 256]"], ["name", "a=b"]]) == {"sweep": [64, 256], "name": "a=b"}


@pytest.mark.parametrize("item, message", [
    (["1x", "3"], "'1x' is not a parameter name"),
    (["output_dir", "d"], "output_dir is set by the runner"),
    (["a", "b", "c"], "expected -p NAME VALUE or -p NAME=VALUE"),
    (["s", "[1, 2"], "opens a list or mapping but does not parse"),
])
def test_malformed_papermill_p_is_refused(item, message):
    with pytest.raises(InputError, match=message.replace("[", r"\[")):
        parameters.parse_param(item)


def test_yaml_file_raw_and_p_combine_in_papermills_order(tmp_path):
    values_file = tmp_path / "values.yaml"
    values_file.write_text("n_tokens: 8\nsweep: [1, 2]\ndevice: cuda\n")
    values = parameters.collect_overrides([["n_tokens", "16"]], raw=[["device", "042"]],
                                          yaml_texts=["{sweep: [3, 4], n_tokens: 9}"], files=[values_file])
    assert values == {"n_tokens": 16, "sweep": [3, 4], "device": "042"}


@pytest.mark.parametrize("kwargs, message", [
    ({"yaml_texts": ["[1, 2]"]}, "expected a mapping of parameter names to values, got list"),
    ({"yaml_texts": ["{a: [1"]}, "not valid YAML"),
    ({"files": ["/nonexistent/values.yaml"]}, "no such file"),
    ({"raw": [["output_dir", "x"]]}, "output_dir is set by the runner"),
])
def test_bad_yaml_or_files_are_refused(kwargs, message):
    with pytest.raises(InputError, match=message):
        parameters.collect_overrides(**kwargs)


def test_values_are_checked_against_declared_types_before_any_notebook_runs(workbook, tmp_path):
    plan = runner.plan_run("tiny", notebooks_dir=workbook, out=tmp_path / "out",
                           overrides=parameters.collect_overrides([["sweep", "4,8"]]))
    chosen = parameters.notebook_parameters(plan.notebooks[0], plan.profile, plan.overrides, tmp_path)
    assert chosen["sweep"] == [4, 8] and chosen["n_tokens"] == 32  # a tuple taken as a list; the profile's value
    with pytest.raises(InputError, match=r"profile 'bad' \(profiles.yaml\): 01_typed's parameter sweep is a list"):
        runner.plan_run("bad", notebooks_dir=workbook, out=tmp_path / "refused")
    assert not (tmp_path / "refused").exists()  # a refused run leaves no folder behind


@pytest.fixture
def only_run(monkeypatch):
    monkeypatch.setattr(cli, "COMMAND_MODULES", ("sagelib.commands.run",))


@pytest.mark.parametrize("argv, message", [
    (["-p", "n_tokens=abc"], "01_typed's parameter n_tokens is an int, got 'abc'"),
    (["-p", "n_tokens", "abc"], "n_tokens is an int"),
    (["-p", "n_tokens=0"], "n_tokens must be at least 1, got 0"),
    (["-p", "sweep", "8"], "sweep is a list[int], written [a, b], got 8"),
    (["-y", "{device: gpu}"], "device is one of cpu, cuda, got 'gpu'"),
    (["-p", "sweep", "[8, x]"], "every element an int"),
])
def test_a_wrongly_typed_value_is_one_line_and_exit_2(workbook, tmp_path, capsys, only_run, argv, message):
    code = cli.main(["run", "--notebooks", str(workbook), "--profile", "tiny", "--out", str(tmp_path / "out"), *argv])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("sagelib run: error: -") and message in err, err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("argv", [["-p", "heads=0"], ["-p", "n_tokens=abc"], ["-p", "seq_sweep", "256"]])
def test_the_real_contract_notebook_refuses_bad_values_at_once(tmp_path, capsys, only_run, argv):
    code = cli.main(["run", "--only", "00", "--profile", "tiny", "--out", str(tmp_path / "out"), *argv])
    err = capsys.readouterr().err
    assert code == 2 and "00_contract's parameter" in err and err.count("\n") == 1, err
    assert not (tmp_path / "out").exists()
