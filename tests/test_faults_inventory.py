"""Faults against the reference inventory: an artifact edited with its hash, an entry removed, an unlisted result
file, an unreadable artifact. Each is a named row, a fix and exit 1 from `sagelib inventory verify`.

The inventories live in temporary git repositories; the committed inventory is never touched.
"""

import json
import os
import subprocess

import pytest

from sagelib.records import inventory

GIT = ["git", "-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"]


@pytest.fixture
def repo(tmp_path):
    """A git checkout with two recorded results, committed."""
    if subprocess.run(["git", "--version"], capture_output=True).returncode != 0:
        pytest.skip("needs git")
    results = tmp_path / "data" / "results"
    results.mkdir(parents=True)
    for name in ("a.json", "b.json"):
        (results / name).write_text(json.dumps({"value": name}) + "\n")
        inventory.inventory_add(f"data/results/{name}", "timing", "made by hand for a test",
                                path=tmp_path / "data" / "inventory.json", root=tmp_path)
    subprocess.run([*GIT, "init", "-q", str(tmp_path)], check=True)
    subprocess.run([*GIT, "-C", str(tmp_path), "add", "."], check=True)
    subprocess.run([*GIT, "-C", str(tmp_path), "commit", "-qm", "two results"], check=True)
    return tmp_path


def verify(sagelib_cli, repo):
    code, out, err = sagelib_cli("inventory", "verify", "--inventory", str(repo / "data" / "inventory.json"),
                                 "--root", str(repo))
    return code, out + err


def statuses(repo):
    return {r.path: r.status for r in inventory.verify_inventory(repo / "data" / "inventory.json", repo)}


def test_a_clean_inventory_names_the_commit_it_was_compared_with(repo, sagelib_cli):
    code, text = verify(sagelib_cli, repo)
    assert code == 0 and "2 ok, 0 changed, 0 missing" in text and "as committed in" in text


def test_an_artifact_edited_together_with_its_hash(repo, sagelib_cli):
    (repo / "data" / "results" / "a.json").write_text('{"value": "forged"}\n')
    inventory.inventory_add("data/results/a.json", "timing", "made by hand for a test", replace=True,
                            path=repo / "data" / "inventory.json", root=repo)
    assert statuses(repo) == {"data/results/a.json": "rerecorded", "data/results/b.json": "ok"}
    code, text = verify(sagelib_cli, repo)
    assert code == 1 and "rerecorded: data/results/a.json: its hash differs from the entry committed in" in text


def test_an_entry_removed_since_the_last_commit(repo, sagelib_cli):
    path = repo / "data" / "inventory.json"
    data = json.loads(path.read_text())
    data["artifacts"] = [a for a in data["artifacts"] if a["path"] != "data/results/b.json"]
    path.write_text(json.dumps(data, indent=2))
    (repo / "data" / "results" / "b.json").unlink()  # the file goes too, so nothing else would show it
    assert statuses(repo) == {"data/results/a.json": "ok", "data/results/b.json": "removed"}
    code, text = verify(sagelib_cli, repo)
    assert code == 1 and "removed: data/results/b.json: listed in the inventory committed in" in text


def test_a_result_file_nobody_listed(repo, sagelib_cli):
    (repo / "data" / "results" / "new.json").write_text("{}\n")
    assert statuses(repo)["data/results/new.json"] == "unlisted"
    code, text = verify(sagelib_cli, repo)
    assert code == 1 and "unlisted: data/results/new.json" in text and "sagelib inventory add" in text
    inventory.inventory_add("data/results/new.json", "timing", "unknown", path=repo / "data" / "inventory.json",
                            root=repo)
    assert verify(sagelib_cli, repo)[0] == 0  # listed: fine, and an addition is no change to a committed entry


def test_an_unreadable_artifact_is_a_row_not_a_traceback(repo, sagelib_cli, monkeypatch):
    def refuse(path):
        raise PermissionError(13, "Permission denied", str(path))

    monkeypatch.setattr(inventory, "sha256_file", refuse)
    code, text = verify(sagelib_cli, repo)
    assert code == 1 and "Traceback" not in text
    assert "unreadable: data/results/a.json: cannot be read (Permission denied)" in text and "chmod a+r" in text


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads through file modes; the monkeypatched case covers it")
def test_an_unreadable_artifact_by_file_mode(repo, sagelib_cli):
    artifact = repo / "data" / "results" / "a.json"
    artifact.chmod(0)
    try:
        code, text = verify(sagelib_cli, repo)
    finally:
        artifact.chmod(0o644)
    assert code == 1 and "unreadable: data/results/a.json" in text


def test_outside_git_the_comparison_is_said_not_to_be_made(tmp_path, sagelib_cli, monkeypatch):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "x.md").write_text("x\n")
    inventory.inventory_add("data/x.md", "contract", "by hand", path=tmp_path / "data" / "inventory.json",
                            root=tmp_path)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    code, text = verify(sagelib_cli, tmp_path)
    assert code == 0 and "committed inventory: not compared" in text
