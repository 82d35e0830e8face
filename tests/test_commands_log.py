"""``sagelib log``: exit codes and output of each action, on logs in a temporary folder."""

import json

import pytest

from sagelib import cli
from sagelib.records import ledger

SOURCE = "sagelib/records/datafile.py"  # any repository file serves as a kernel source for the fingerprint


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def log(tmp_path):
    return str(tmp_path / "log.jsonl")


def append(capsys, log, *extra):
    return run(capsys, "log", "append", "--log", log, "--new-log", "--phase", "1", "--experiment", "e",
               "--status", "running", "--hypothesis", "h", *extra)


def test_append_show_verify_render(capsys, log, tmp_path):
    code, out, _ = append(capsys, log, "--action", "built", "--measured", "tops=812.5:TOPS",
                          "--artifact", "data/prior_work.yaml", "--measured-on", "H200",
                          "--projection", "tops=900..1000:TOPS", "--basis", "roofline estimate")
    assert code == 0 and "appended seq 0" in out
    record = json.loads((tmp_path / "log.jsonl").read_text())
    assert record["measured"][0]["value"] == 812.5
    assert record["measured"][0]["artifacts"][0]["path"] == "data/prior_work.yaml"
    assert record["projections"] == [{"quantity": "tops", "low": 900.0, "high": 1000.0, "unit": "TOPS",
                                      "basis": "roofline estimate"}]
    code, out, _ = run(capsys, "log", "show", "--log", log)
    assert code == 0 and "running" in out
    code, out, _ = run(capsys, "log", "verify", "--log", log)
    assert code == 0 and "chain intact" in out
    code, out, _ = run(capsys, "log", "render", "--log", log)
    assert code == 0 and (tmp_path / "log.md").is_file()


def test_verify_exits_1_and_names_the_line(capsys, log, tmp_path):
    for _ in range(3):
        assert append(capsys, log)[0] == 0
    path = tmp_path / "log.jsonl"
    lines = path.read_text().splitlines()
    path.write_text(lines[0] + "\n" + lines[2] + "\n")
    code, out, _ = run(capsys, "log", "verify", "--log", log)
    assert code == 1 and "deleted" in out and "line 2" in out


def test_a_figure_names_its_own_artifacts_with_at(capsys, log, tmp_path):
    """@PATH after a figure backs that figure alone; figures without one take every --artifact."""
    code, out, err = append(capsys, log, "--measured", "tops=491.5:TOPS@data/prior_work.yaml@pyproject.toml",
                            "--measured", "share=0.71", "--artifact", "README.md")
    assert code == 0, err
    own, shared = json.loads((tmp_path / "log.jsonl").read_text())["measured"]
    assert (own["quantity"], own["value"], own["unit"]) == ("tops", 491.5, "TOPS")
    assert [a["path"] for a in own["artifacts"]] == ["data/prior_work.yaml", "pyproject.toml"]
    assert [a["path"] for a in shared["artifacts"]] == ["README.md"]


@pytest.mark.parametrize("extra, message", [
    (("--measured", "tops=fast"), "expected QUANTITY=VALUE"),
    (("--measured", "tops=1:TOPS"), "--measured needs --artifact"),
    (("--measured", "tops=1@README.md", "--measured", "x=2"), "--measured needs --artifact"),
    (("--measured", "tops=1@"), "followed by @PATH for each result file"),
    (("--projection", "tops=1:TOPS"), "--projection needs --basis"),
    (("--measured", "tops=1", "--artifact", "/etc/hostname"), "outside the repository"),
    (("--rule", "requires_condition"), "--rule-condition"),
])
def test_append_bad_input_exits_2_without_traceback(capsys, log, extra, message):
    code, _, err = append(capsys, log, *extra)
    assert code == 2 and message in err and "Traceback" not in err


def test_unknown_status_is_refused_by_the_parser(capsys, log):
    with pytest.raises(SystemExit) as caught:
        run(capsys, "log", "append", "--log", log, "--status", "finished")
    assert caught.value.code == 2


def propose(capsys, log, *extra):
    return run(capsys, "log", "propose", "--log", log, "--new-log", "--technique", "padded V smem", "--phase", "2",
               "--hypothesis", "h", "--fingerprint-source", SOURCE, "--config", "blkk=128", *extra)


def test_propose_refused_then_permitted(capsys, log, tmp_path):
    code, out, _ = propose(capsys, log)
    assert code == 1 and "REFUSED" in out and "p0-padded-v-smem" in out
    assert "staging_dataflow_changed" in out
    assert not (tmp_path / "log.jsonl").exists() or (tmp_path / "log.jsonl").read_text() == ""
    code, out, _ = propose(capsys, log, "--experiment", "pv-1", "--declare", "staging_dataflow_changed",
                           "--evidence", "V now staged by TMA with a swizzled layout")
    assert code == 0 and "PERMITTED" in out
    (record,) = ledger.read(tmp_path / "log.jsonl")
    assert record["declarations"][0]["evidence"] == "V now staged by TMA with a swizzled layout"


@pytest.mark.parametrize("extra, message", [
    (("--declare", "staging_dataflow_changed"), "--evidence"),
    (("--declare", "luck", "--evidence", "x"), "unknown condition"),
])
def test_propose_bad_declarations_exit_2(capsys, log, extra, message):
    code, _, err = propose(capsys, log, *extra)
    assert code == 2 and message in err


def test_repair_and_import_prior(capsys, log, tmp_path):
    assert run(capsys, "log", "import-prior", "--log", log, "--date", "2026-08-26")[0] == 0
    with open(tmp_path / "log.jsonl", "ab") as handle:
        handle.write(b'{"half')
    assert run(capsys, "log", "verify", "--log", log)[0] == 1
    code, out, _ = run(capsys, "log", "repair", "--log", log)
    assert code == 0 and "moved the torn last line" in out
    assert run(capsys, "log", "verify", "--log", log)[0] == 0


@pytest.mark.parametrize("date", ["26/08/2026", "2026-8-26", "2026-02-30", "20260826", "yesterday"])
def test_import_prior_refuses_a_malformed_date_before_any_work(capsys, log, tmp_path, date):
    message = f"--date: expected a calendar date as YYYY-MM-DD, e.g. 2026-08-26, got {date!r}; "
    assert run(capsys, "log", "import-prior", "--log", log, "--date", "2026-08-26")[0] == 0
    before = (tmp_path / "log.jsonl").read_bytes()
    # nothing left to import: the date was still refused, not ignored
    code, out, err = run(capsys, "log", "import-prior", "--log", log, "--date", date)
    assert code == 2 and message in err and "appended" not in out, err
    # checked first: before the prior-work file is looked at, and nothing is written to a new log either
    fresh = str(tmp_path / "fresh.jsonl")
    code, _, err = run(capsys, "log", "import-prior", "--log", fresh, "--date", date,
                       "--prior-work", str(tmp_path / "absent.yaml"))
    assert code == 2 and message in err, err
    assert (tmp_path / "log.jsonl").read_bytes() == before and not (tmp_path / "fresh.jsonl").exists()


def test_append_and_propose_name_a_malformed_date(capsys, log, tmp_path):
    code, _, err = append(capsys, log, "--date", "2026-13-01")
    assert code == 2 and "--date: expected a calendar date as YYYY-MM-DD" in err and "'2026-13-01'" in err, err
    code, _, err = propose(capsys, log, "--date", "26.08.2026")  # would be refused (exit 1) on its merits
    assert code == 2 and "--date: expected a calendar date as YYYY-MM-DD" in err, err
    assert not (tmp_path / "log.jsonl").exists()


def test_missing_log_is_an_input_error(capsys, tmp_path):
    code, _, err = run(capsys, "log", "verify", "--log", str(tmp_path / "absent.jsonl"))
    assert code == 2 and "no such file" in err


@pytest.mark.parametrize("extra, message", [
    (("--json", "absent.json"), "--json 'absent.json': no such file; give a JSON file of record fields"),
    (("--measured", "tops=1", "--artifact", "outputs/absent.json"), "--artifact 'outputs/absent.json': no such file"),
    (("--measured", "tops=1@outputs/absent.json"), "--measured tops=...@ 'outputs/absent.json': no such file"),
    (("--view", "{tmp}"), "a folder, not a file"),
    (("--view", "{tmp}/absent/log.md"), "its folder"),
])
def test_append_names_a_path_it_cannot_use_and_writes_nothing(capsys, log, tmp_path, extra, message):
    code, _, err = append(capsys, log, *[e.format(tmp=tmp_path) for e in extra])
    assert code == 2 and err.startswith("sagelib log: error: " + extra[-2]) and message in err, err
    assert not (tmp_path / "log.jsonl").exists() or (tmp_path / "log.jsonl").read_text() == ""


def test_a_missing_prior_work_file_is_named(capsys, log, tmp_path):
    absent = str(tmp_path / "absent.yaml")
    for argv in (("log", "import-prior", "--log", log, "--date", "2026-08-26", "--prior-work", absent),
                 ("log", "propose", "--log", log, "--technique", "t", "--phase", "2", "--hypothesis", "h",
                  "--fingerprint-source", SOURCE, "--prior-work", absent)):
        code, _, err = run(capsys, *argv)
        assert code == 2 and f"--prior-work {absent!r}: no such file" in err, err


@pytest.mark.parametrize("action", [
    ("append", "--phase", "1", "--experiment", "e", "--status", "running", "--hypothesis", "h"),
    ("propose", "--technique", "t", "--phase", "2", "--hypothesis", "h", "--fingerprint-source", SOURCE),
])
def test_a_mistyped_log_is_refused_unless_a_new_log_is_asked_for(capsys, tmp_path, action):
    typo = tmp_path / "experiment_lgo.jsonl"
    code, _, err = run(capsys, "log", action[0], "--log", str(typo), *action[1:])
    assert code == 2 and f"--log {str(typo)!r}: no such file" in err and "--new-log" in err, err
    assert not typo.exists()  # nothing started beside the real log
    code, out, _ = run(capsys, "log", action[0], "--log", str(typo), "--new-log", *action[1:])
    assert code == 0 and typo.exists() and len(ledger.read(typo)) == 1, out
    # an existing log needs no flag (a second proposal needs an experiment id of its own)
    code, _, err = run(capsys, "log", action[0], "--log", str(typo), *action[1:], "--experiment", "second")
    assert code == 0 and len(ledger.read(typo)) == 2, err


def test_a_log_that_is_a_folder_is_named_so(capsys, tmp_path):
    code, _, err = run(capsys, "log", "verify", "--log", str(tmp_path))
    assert code == 2 and "a folder, not a file" in err
