"""``sagelib ab`` (sagelib.measure.ab_sources): versions of source files timed in rotated order, the tree put back."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sagelib import cli
from sagelib.errors import InputError
from sagelib.measure import ab_sources as ab

# The command each run executes: it records which version of the file it saw.
SEE = [sys.executable, "-c", "import sys; open(sys.argv[2] + '/seen.txt', 'w').write(open(sys.argv[1]).read())",
       "kernels/k.cu", "{out}"]


def _tree(tmp_path):
    root = tmp_path / "repo"
    (root / "kernels").mkdir(parents=True)
    (root / "kernels" / "k.cu").write_text("tree")
    versions = {}
    for name in ("a", "b", "c"):
        (tmp_path / name / "kernels").mkdir(parents=True)
        (tmp_path / name / "kernels" / "k.cu").write_text(name)
        versions[name] = tmp_path / name
    return root, versions


def test_rounds_rotate_and_each_run_sees_its_version(tmp_path):
    root, versions = _tree(tmp_path)
    records = ab.run(versions, SEE, rounds=2, out=tmp_path / "out", root=root)
    assert [r["version"] for r in records] == ["a", "b", "c", "b", "c", "a"]
    assert all(r["exit"] == 0 for r in records)
    assert [Path(r["folder"], "seen.txt").read_text() for r in records] == ["a", "b", "c", "b", "c", "a"]
    assert (root / "kernels" / "k.cu").read_text() == "tree"
    assert json.loads((tmp_path / "out" / "runs.json").read_text())["files"] == ["kernels/k.cu"]


def test_the_tree_is_put_back_when_a_run_raises(tmp_path, monkeypatch):
    root, versions = _tree(tmp_path)
    real = subprocess.run
    calls = []

    def flaky(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(ab.subprocess, "run", flaky)
    with pytest.raises(KeyboardInterrupt):
        ab.run(versions, SEE, rounds=1, out=tmp_path / "out", root=root)
    assert (root / "kernels" / "k.cu").read_text() == "tree"


def test_a_failing_command_is_recorded_not_hidden(tmp_path):
    root, versions = _tree(tmp_path)
    records = ab.run(versions, [sys.executable, "-c", "raise SystemExit(3)"], rounds=1, out=tmp_path / "o", root=root)
    assert [r["exit"] for r in records] == [3, 3, 3]


def test_versions_must_hold_the_same_files(tmp_path):
    root, versions = _tree(tmp_path)
    (versions["b"] / "extra.h").write_text("x")
    with pytest.raises(InputError, match="has no extra.h"):
        ab.run(versions, SEE, rounds=1, out=tmp_path / "out", root=root)
    assert (root / "kernels" / "k.cu").read_text() == "tree"


def test_snapshot_copies_the_tree_and_refuses_paths_outside_it(tmp_path):
    root, _ = _tree(tmp_path)
    assert ab.snapshot(tmp_path / "snap", ["kernels/k.cu"], None, root=root) == ["kernels/k.cu"]
    assert (tmp_path / "snap" / "kernels" / "k.cu").read_text() == "tree"
    with pytest.raises(InputError, match="inside the repository"):
        ab.snapshot(tmp_path / "snap", ["../escape.cu"], None, root=root)
    with pytest.raises(InputError, match="not a file of the working tree"):
        ab.snapshot(tmp_path / "snap", ["kernels/missing.cu"], None, root=root)


def test_snapshot_from_a_git_revision(tmp_path):
    root, _ = _tree(tmp_path)
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q"], cwd=root, check=True)
    subprocess.run(git + ["add", "."], cwd=root, check=True)
    subprocess.run(git + ["commit", "-q", "-m", "x"], cwd=root, check=True)
    (root / "kernels" / "k.cu").write_text("edited")
    ab.snapshot(tmp_path / "old", ["kernels/k.cu"], "HEAD", root=root)
    assert (tmp_path / "old" / "kernels" / "k.cu").read_text() == "tree"


def _ab(capsys, *argv):
    code = cli.main(["ab", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_command_line_refuses_bad_input_with_the_fix(tmp_path, capsys):
    code, _, err = _ab(capsys, "run", "--version", "nofolder", "--out", str(tmp_path), "--", "true")
    assert code == 2 and "--version 'nofolder': expected NAME=FOLDER" in err
    (tmp_path / "v").mkdir()
    code, _, err = _ab(capsys, "run", "--version", f"v={tmp_path / 'v'}", "--out", str(tmp_path))
    assert code == 2 and "the command is missing" in err
    code, _, err = _ab(capsys, "run", "--version", f"v={tmp_path / 'v'}", "--rounds", "0", "--out", str(tmp_path),
                       "--", "true")
    assert code == 2 and "--rounds: expected at least 1" in err
    code, _, err = _ab(capsys, "run", "--version", f"v={tmp_path / 'v'}", "--version", f"v={tmp_path / 'v'}",
                       "--out", str(tmp_path), "--", "true")
    assert code == 2 and "given twice" in err
    code, _, err = _ab(capsys, "snapshot", str(tmp_path / "s"), "../outside.cu")
    assert code == 2 and "inside the repository" in err
    (tmp_path / "w").mkdir()
    (tmp_path / "w" / "only_here.cu").write_text("x")
    code, _, err = _ab(capsys, "run", "--version", f"v={tmp_path / 'v'}", "--version", f"w={tmp_path / 'w'}",
                       "--out", str(tmp_path / "o"), "--", "true")
    assert code == 2 and "--version v=" in err and "has no only_here.cu" in err


def test_the_command_runs_each_version_and_exits_1_when_a_run_fails(tmp_path, capsys, monkeypatch):
    root, versions = _tree(tmp_path)
    monkeypatch.setattr(ab, "ROOT", root)
    code, out, _ = _ab(capsys, "run", "--version", f"a={versions['a']}", "--version", f"b={versions['b']}",
                       "--rounds", "1", "--out", str(tmp_path / "out"), "--", *SEE)
    assert code == 0 and [line.split()[1] for line in out.splitlines()] == ["a", "b"]
    code, _, _ = _ab(capsys, "run", "--version", f"a={versions['a']}", "--out", str(tmp_path / "out2"), "--",
                     sys.executable, "-c", "raise SystemExit(4)")
    assert code == 1
    assert (root / "kernels" / "k.cu").read_text() == "tree"
