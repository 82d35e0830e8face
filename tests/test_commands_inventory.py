"""``sagelib inventory``: add, block and verify through the command, with exit codes."""

import pytest

from sagelib import cli


def run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def repo(tmp_path):
    (tmp_path / "contract.md").write_text("v1\n")
    return tmp_path


def inv(repo, action, *rest):
    return ("inventory", action, "--inventory", str(repo / "inventory.json"), "--root", str(repo), *rest)


def test_add_verify_drift_and_blockers(capsys, repo):
    code, out, _ = run(capsys, *inv(repo, "add", "contract.md", "--kind", "contract", "--command", "by hand"))
    assert code == 0 and "recorded contract.md" in out
    code, out, _ = run(capsys, *inv(repo, "block", "inputs", "--subject", "tensors", "--reason", "never kept",
                                    "--unblock", "generate"))
    assert code == 0
    code, out, _ = run(capsys, *inv(repo, "verify"))
    assert code == 0 and "1 ok, 0 changed, 0 missing" in out and "[inputs] tensors: never kept" in out
    (repo / "contract.md").write_text("v2\n")
    code, out, _ = run(capsys, *inv(repo, "verify"))
    assert code == 1 and "changed" in out
    (repo / "contract.md").unlink()
    code, out, _ = run(capsys, *inv(repo, "verify"))
    assert code == 1 and "0 changed, 1 missing" in out


def test_bad_input_exits_2(capsys, repo, tmp_path_factory):
    outside = tmp_path_factory.mktemp("elsewhere") / "x.md"
    outside.write_text("x")
    code, _, err = run(capsys, *inv(repo, "add", str(outside), "--kind", "contract", "--command", "c"))
    assert code == 2 and "outside the repository" in err
    code, _, err = run(capsys, *inv(repo, "verify"))
    assert code == 2 and "no such file" in err
    (repo / "inventory.json").write_text("{broken")
    code, _, err = run(capsys, *inv(repo, "verify"))
    assert code == 2 and "line 1" in err and "Fix:" in err


def test_environment_file_is_recorded(capsys, repo):
    (repo / "env.json").write_text('{"gpus": ["NVIDIA H200"]}')
    code, _, _ = run(capsys, *inv(repo, "add", "contract.md", "--kind", "contract", "--command", "c",
                                  "--environment", str(repo / "env.json")))
    assert code == 0
    assert '"NVIDIA H200"' in (repo / "inventory.json").read_text()


def test_environment_is_taken_from_a_bench_file_and_other_documents_are_refused(capsys, repo):
    """A bench file carries its environment under 'environment': that object is recorded, not the whole file's
    figures; a document with no environment record at all is refused and nothing is written."""
    (repo / "bench.json").write_text('{"schema": 1, "records": [{"tops": 843.8}], '
                                     '"environment": {"gpus": ["NVIDIA H200"], "git_commit": "ab901c9"}}')
    code, _, _ = run(capsys, *inv(repo, "add", "contract.md", "--kind", "timing", "--command", "c",
                                  "--environment", str(repo / "bench.json")))
    stored = (repo / "inventory.json").read_text()
    assert code == 0 and '"ab901c9"' in stored and "843.8" not in stored
    (repo / "figures.json").write_text('{"records": [1, 2]}')
    code, _, err = run(capsys, *inv(repo, "add", "contract.md", "--kind", "timing", "--command", "c", "--replace",
                                    "--environment", str(repo / "figures.json")))
    assert code == 2 and "expected an environment record" in err and "['records']" in err
    assert (repo / "inventory.json").read_text() == stored


def test_paths_it_cannot_use_are_named_with_the_fix(capsys, repo, tmp_path_factory):
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    add = ("add", "contract.md", "--kind", "contract", "--command", "by hand")
    assert run(capsys, *inv(repo, *add))[0] == 0
    for argv, message in [
        (("inventory", "add", "--inventory", str(elsewhere), "--root", str(repo), *add[1:]), "a folder, not a file"),
        (("inventory", "add", "--inventory", str(elsewhere / "no" / "inv.json"), "--root", str(repo), *add[1:]),
         "does not exist"),
        (("inventory", "verify", "--inventory", str(elsewhere), "--root", str(repo)), "a folder, not a file"),
        (("inventory", "verify", "--inventory", str(repo / "inventory.json"), "--root", str(repo / "absent")),
         f"--root {str(repo / 'absent')!r}: no such folder"),
    ]:
        code, _, err = run(capsys, *argv)
        assert code == 2 and err.startswith("sagelib inventory: error: --") and message in err, err
    assert list(elsewhere.iterdir()) == []


def test_errors_name_the_inventory_command_even_with_its_command_flag(capsys, repo):
    code, _, err = run(capsys, *inv(repo, "add", "absent.md", "--kind", "contract", "--command", "by hand"))
    assert code == 2 and err.startswith("sagelib inventory: error: artifact 'absent.md'"), err
