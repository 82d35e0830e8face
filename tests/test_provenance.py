"""sagelib.records.provenance and sagelib.records.inventory: the environment record and the reference inventory."""

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sagelib.records import inventory, provenance
from sagelib.records.datafile import DataFileError

REPO = Path(__file__).resolve().parents[1]

KEYS = {"gpus", "driver", "cuda_runtime", "nvcc", "torch", "cupy", "triton", "python", "platform",
        "hostname", "git_commit", "git_dirty", "timestamp_utc", "missing"}


# ----------------------------------------------------------------------------- environment


def fake_tool(folder: Path, name: str, output: str, code: int = 0) -> None:
    script = folder / name
    script.write_text(f"#!/bin/sh\ncat <<'EOF'\n{output}\nEOF\nexit {code}\n")
    script.chmod(0o755)


def test_environment_has_every_key_and_is_json(tmp_path):
    env = provenance.environment()
    assert set(env) == KEYS
    assert set(provenance.ENVIRONMENT_KEYS) == KEYS  # what environment_of recognises is what environment writes
    json.dumps(env)  # JSON-able as it is
    import torch

    assert env["torch"] == torch.__version__
    assert env["python"] == sys.version.split()[0]
    for key, value in env.items():
        if value is None:
            assert env["missing"].get(key), f"{key} is None without a reason"


def test_environment_reads_nvidia_smi_and_nvcc(tmp_path, monkeypatch):
    fake_tool(tmp_path, "nvidia-smi", "NVIDIA H200, 570.86.15\nNVIDIA H200, 570.86.15")
    fake_tool(tmp_path, "nvcc", "nvcc: NVIDIA (R) Cuda compiler driver\n"
                                "Cuda compilation tools, release 13.0, V13.0.88\nBuild cuda_13.0")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    env = provenance.environment()
    assert env["gpus"] == ["NVIDIA H200", "NVIDIA H200"]
    assert env["driver"] == "570.86.15"
    assert env["nvcc"] == "13.0.88"


def test_environment_fails_soft_without_tools_or_git(tmp_path, monkeypatch):
    fake_tool(tmp_path, "nvidia-smi", "NVIDIA-SMI has failed", code=9)
    monkeypatch.setenv("PATH", str(tmp_path))  # no nvcc, no git on PATH
    monkeypatch.setattr(provenance.toolkit, "find", lambda name: None)  # nor in the CUDA install folders
    env = provenance.environment(repo_root=tmp_path)
    assert env["nvcc"] is None and "nvcc not found" in env["missing"]["nvcc"]
    assert env["git_commit"] is None and "git" in env["missing"]["git_commit"]
    assert env["git_dirty"] is None
    assert "gpus" in env["missing"] or env["gpus"]  # torch/CuPy may still see a GPU


def test_environment_outside_a_git_checkout(tmp_path):
    env = provenance.environment(repo_root=tmp_path)
    assert env["git_commit"] is None and env["git_dirty"] is None
    assert "not a git checkout" in env["missing"]["git_commit"]


def test_environment_reports_the_commit_and_dirt(tmp_path):
    run = lambda *a: subprocess.run(["git", *a], cwd=tmp_path, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    (tmp_path / "f").write_text("x")
    run("add", "f")
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "c")
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=tmp_path, capture_output=True,
                          text=True).stdout.strip()
    env = provenance.environment(repo_root=tmp_path)
    assert (env["git_commit"], env["git_dirty"]) == (head, False)
    (tmp_path / "f").write_text("y")
    assert provenance.environment(repo_root=tmp_path)["git_dirty"] is True


def test_missing_module_is_recorded_not_raised(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # makes `import cupy` fail
    env = provenance.environment()
    assert env["cupy"] is None and "cupy not importable" in env["missing"]["cupy"]


# ----------------------------------------------------------------------------- inventory


@pytest.fixture
def repo(tmp_path):
    root = tmp_path / "repo"
    (root / "data").mkdir(parents=True)
    (root / "data" / "contract.md").write_text("contract v1\n")
    (root / "data" / "timing.json").write_text('{"ms": 1.5}\n')
    return root


def add(repo, name, kind="contract", **kw):
    return inventory.inventory_add(f"data/{name}", kind, "written by hand",
                                    path=repo / "data" / "inventory.json", root=repo, **kw)


def rows(repo):
    return {r.path: r.status for r in inventory.verify_inventory(repo / "data" / "inventory.json", repo)}


def test_add_records_hash_size_kind_command_environment(repo):
    artifact = add(repo, "timing.json", kind="timing", environment={"gpus": ["NVIDIA H200"]})
    assert artifact.sha256 == hashlib.sha256(b'{"ms": 1.5}\n').hexdigest()
    assert artifact.size == len(b'{"ms": 1.5}\n')
    stored = json.loads((repo / "data" / "inventory.json").read_text())["artifacts"][0]
    assert stored["path"] == "data/timing.json" and stored["kind"] == "timing"
    assert stored["command"] == "written by hand" and stored["environment"] == {"gpus": ["NVIDIA H200"]}


def test_verify_finds_drift(repo):
    add(repo, "contract.md")
    add(repo, "timing.json", kind="timing")
    assert rows(repo) == {"data/contract.md": "ok", "data/timing.json": "ok"}
    (repo / "data" / "contract.md").write_text("contract v2\n")
    (repo / "data" / "timing.json").unlink()
    assert rows(repo) == {"data/contract.md": "changed", "data/timing.json": "missing"}
    changed = inventory.verify_inventory(repo / "data" / "inventory.json", repo)[0]
    assert changed.current_sha256 == hashlib.sha256(b"contract v2\n").hexdigest()


def test_add_refuses_outside_paths_unknown_kinds_and_silent_overwrites(repo, tmp_path):
    outside = tmp_path / "outside.md"
    outside.write_text("x")
    with pytest.raises(ValueError, match="outside the repository"):
        inventory.inventory_add(outside, "contract", "cmd", path=repo / "data" / "inventory.json", root=repo)
    with pytest.raises(ValueError, match="outside the repository"):
        inventory.inventory_add("../outside.md", "contract", "cmd", path=repo / "data" / "inventory.json",
                                 root=repo)
    with pytest.raises(ValueError, match="--kind 'vibes': unknown kind"):
        add(repo, "contract.md", kind="vibes")
    with pytest.raises(ValueError, match="no such file"):
        add(repo, "absent.md")
    add(repo, "contract.md")
    (repo / "data" / "contract.md").write_text("contract v2\n")
    with pytest.raises(ValueError, match="--replace"):
        add(repo, "contract.md")
    add(repo, "contract.md", replace=True)
    assert rows(repo) == {"data/contract.md": "ok"}


def test_blockers_are_listed_and_ids_unique(repo):
    path = repo / "data" / "inventory.json"
    inventory.add_blocker("inputs", "canonical tensors", "never kept", "generate them", path=path, root=repo)
    (blocker,) = inventory.blockers(path, repo)
    assert (blocker.id, blocker.reason) == ("inputs", "never kept")
    with pytest.raises(ValueError, match="already exists"):
        inventory.add_blocker("inputs", "x", "y", "z", path=path, root=repo)


def write_inventory(repo, artifacts, blockers=()):
    path = repo / "data" / "inventory.json"
    path.write_text(json.dumps({"schema": 1, "artifacts": artifacts, "blockers": list(blockers)}, indent=2))
    return path


GOOD = {"path": "data/contract.md", "sha256": "0" * 64, "size": 1, "kind": "contract",
        "command": "c", "environment": None, "added_utc": "2026-11-29T00:00:00+00:00"}


@pytest.mark.parametrize("entry, message", [
    ({**GOOD, "kind": "vibes"}, "unknown kind 'vibes'"),
    ({k: v for k, v in GOOD.items() if k != "command"}, "missing field 'command'"),
    ({**GOOD, "size": "big"}, "field 'size': expected int"),
    ({**GOOD, "path": "../../etc/passwd"}, "outside the repository"),
    ({**GOOD, "path": "data/../data/contract.md"}, "repository-relative form"),
])
def test_malformed_inventory_entries_name_file_line_and_fix(repo, entry, message):
    path = write_inventory(repo, [entry])
    with pytest.raises(DataFileError) as caught:
        inventory.load_inventory(path, repo)
    text = str(caught.value)
    assert message in text and str(path) in text and "Fix:" in text
    assert caught.value.line == 5  # the line of the entry's "path"


def test_invalid_json_names_the_line(repo):
    path = repo / "data" / "inventory.json"
    path.write_text('{\n  "schema": 1,\n  "artifacts": [,]\n}\n')
    with pytest.raises(DataFileError) as caught:
        inventory.load_inventory(path, repo)
    assert caught.value.line == 3


def test_committed_inventory_is_intact_and_lists_the_research_blockers():
    checked = inventory.verify_inventory()
    drifted = [f"{r.path}: {r.status}" for r in checked if r.status != "ok"]
    assert checked and not drifted, (
        f"recorded artifacts drifted: {drifted}. If the change is intended, re-record each with "
        "`sagelib inventory add PATH --kind KIND --command CMD --replace` (see docs/design/records.md)")
    ids = {b.id for b in inventory.blockers()}
    assert {"production-binaries", "canonical-input-tensors", "p0-variant-patches"} <= ids


def test_copied_tree_without_git_records_the_declared_commit(tmp_path, monkeypatch):
    monkeypatch.setenv(provenance.SOURCE_COMMIT_VARIABLE, "abc123")
    env = provenance.environment(repo_root=tmp_path)  # tmp_path is no git checkout
    assert env["git_commit"] == "abc123" and env["git_dirty"] is None
    assert "declared by SAGELIB_SOURCE_COMMIT" in env["missing"]["git_commit"]
    assert "copied" in env["missing"]["git_dirty"]


def test_a_declared_commit_wins_over_a_stale_git_head(tmp_path, monkeypatch):
    """A copied tree whose .git names another HEAD records the declared commit and says why."""
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "x"], check=True)
    monkeypatch.setenv(provenance.SOURCE_COMMIT_VARIABLE, "abc123")
    env = provenance.environment(tmp_path)
    assert env["git_commit"] == "abc123" and env["git_dirty"] is None
    assert "names HEAD" in env["missing"]["git_commit"]
    head = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True, text=True).stdout
    monkeypatch.setenv(provenance.SOURCE_COMMIT_VARIABLE, head[:7])
    env = provenance.environment(tmp_path)
    assert env["git_commit"] == head.strip() and "git_commit" not in env["missing"]


def test_a_dirty_tree_without_a_declared_commit_gets_a_hint(tmp_path, monkeypatch, capsys):
    """A stale .git on a GPU host makes recordings name the wrong commit as dirty: the hint says what to set."""
    import subprocess

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q",
                    "--allow-empty", "-m", "x"], check=True)
    monkeypatch.delenv(provenance.SOURCE_COMMIT_VARIABLE, raising=False)
    clean = provenance.environment(tmp_path)
    assert clean["git_dirty"] is False and provenance.dirty_tree_hint(clean) is None
    (tmp_path / "changed.txt").write_text("x")
    dirty = provenance.environment(tmp_path)
    hint = provenance.dirty_tree_hint(dirty)
    assert dirty["git_dirty"] is True and hint is not None
    assert dirty["git_commit"][:12] in hint and provenance.SOURCE_COMMIT_VARIABLE in hint
    monkeypatch.setattr(provenance, "_hinted", False)
    provenance.print_dirty_tree_hint(dirty)
    provenance.print_dirty_tree_hint(dirty)
    assert capsys.readouterr().err.count(provenance.SOURCE_COMMIT_VARIABLE) == 1  # once per process
    monkeypatch.setenv(provenance.SOURCE_COMMIT_VARIABLE, "abc123")
    assert provenance.dirty_tree_hint(dirty) is None  # declared: the recording names it
