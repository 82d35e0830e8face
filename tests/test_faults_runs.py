"""Faults around `sagelib run`: runs started together never share a folder, a bad --out is refused up front.

The full property (20 pairs of real runs started together write 40 distinct, complete folders) takes tens of
minutes of CPU, so it runs only when asked: SAGELIB_CONCURRENT_RUN_PAIRS=20 pytest -m slow tests/test_faults_runs.py
"""

import json
import os
import subprocess
import sys
import textwrap
from datetime import datetime, timezone
from pathlib import Path

import pytest

from sagelib import cli, paths
from sagelib.run import runner

NOTEBOOK = "# %% tags=['parameters']\noutput_dir = 'x'\n\n# %%\nprint('body')\n"
SAME_SECOND = datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)


@pytest.fixture
def workbook(tmp_path):
    folder = tmp_path / "notebooks"
    folder.mkdir()
    (folder / "00_one.py").write_text(NOTEBOOK)
    (folder / "profiles.yaml").write_text("tiny:\n  cell_timeout_s: 60\n")
    return folder


def test_processes_claiming_in_the_same_second_get_distinct_folders(tmp_path):
    """Twelve processes ask for a folder with one timestamp at once: twelve folders, none shared."""
    runs = tmp_path / "runs"
    code = textwrap.dedent(f"""
        import sys, time
        from datetime import datetime, timezone
        from pathlib import Path
        from sagelib.run import runner
        go = Path(sys.argv[1])
        while not go.exists():
            time.sleep(0.005)
        print(runner.run_folder(Path({str(runs)!r}), "tiny", datetime(2026, 1, 2, 3, 4, 5, tzinfo=timezone.utc)))
    """)
    go = tmp_path / "go"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(paths.REPO_ROOT), os.environ.get("PYTHONPATH")])))
    children = [subprocess.Popen([sys.executable, "-c", code, str(go)], stdout=subprocess.PIPE, text=True, env=env)
                for _ in range(12)]
    go.touch()  # all start claiming together
    claimed = [child.communicate(timeout=120)[0].strip() for child in children]
    assert all(child.returncode == 0 for child in children)
    assert len(set(claimed)) == 12
    assert sorted(p.name for p in runs.iterdir()) == sorted(Path(c).name for c in claimed)
    assert "20260102T030405Z-tiny" in {Path(c).name for c in claimed}


def test_threads_claiming_in_the_same_second_get_distinct_folders(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(16) as pool:
        claimed = list(pool.map(lambda _: runner.run_folder(tmp_path, "cpu", SAME_SECOND), range(40)))
    assert len(set(claimed)) == 40 and all(p.is_dir() for p in claimed)


def test_a_folder_taken_by_hand_is_skipped_not_shared(tmp_path):
    (tmp_path / "20260102T030405Z-cpu").mkdir()
    (tmp_path / "20260102T030405Z-cpu-2").write_text("a file where a folder would go")
    assert runner.run_folder(tmp_path, "cpu", SAME_SECOND) == tmp_path / "20260102T030405Z-cpu-3"


def test_two_plans_without_out_never_share_a_folder(workbook, tmp_path):
    first = runner.plan_run("tiny", notebooks_dir=workbook, cwd=tmp_path)
    second = runner.plan_run("tiny", notebooks_dir=workbook, cwd=tmp_path)
    assert first.folder != second.folder and first.folder.is_dir() and second.folder.is_dir()
    assert first.folder.parent == second.folder.parent == tmp_path / "outputs" / "runs"


@pytest.mark.parametrize("make, message", [
    (lambda out: out.write_text("x"), "a file, not a folder"),
    (lambda out: (out.mkdir(), (out / "run.json").write_text("{}")), "already holds files"),
])
def test_out_is_checked_before_anything_runs(workbook, tmp_path, capsys, make, message):
    out = tmp_path / "out"
    make(out)
    before = sorted(p.name for p in out.iterdir()) if out.is_dir() else None
    code = cli.main(["run", "--notebooks", str(workbook), "--profile", "tiny", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and message in err and "Traceback" not in err, err
    assert (sorted(p.name for p in out.iterdir()) if out.is_dir() else None) == before  # nothing written


def test_an_absent_out_is_made_only_after_every_check(workbook, tmp_path):
    with pytest.raises(ValueError, match="no such profile"):
        runner.plan_run("huge", notebooks_dir=workbook, out=tmp_path / "out")
    assert not (tmp_path / "out").exists()
    assert runner.plan_run("tiny", notebooks_dir=workbook, out=tmp_path / "out").folder.is_dir()


def test_out_under_a_file_is_refused_with_one_line(workbook, tmp_path, capsys):
    (tmp_path / "file").write_text("x")
    code = cli.main(["run", "--notebooks", str(workbook), "--profile", "tiny", "--out", str(tmp_path / "file" / "run")])
    err = capsys.readouterr().err
    assert code == 2 and "is a file, so no folder can be made under it" in err and err.count("\n") == 1


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through file modes; the /proc case covers root")
def test_out_in_a_read_only_folder_is_refused(workbook, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        code = cli.main(["run", "--notebooks", str(workbook), "--profile", "tiny", "--out", str(locked / "run")])
    finally:
        locked.chmod(0o700)
    err = capsys.readouterr().err
    assert code == 2 and "cannot write in" in err and err.count("\n") == 1
    assert not (locked / "run").exists()


@pytest.mark.skipif(not Path("/proc/self").is_dir(), reason="needs Linux /proc, where nobody can create a folder")
def test_out_where_no_folder_can_be_made_is_refused(workbook, capsys):
    code = cli.main(["run", "--notebooks", str(workbook), "--profile", "tiny", "--out", "/proc/sagelib-run-test"])
    err = capsys.readouterr().err
    assert code == 2 and "--out '/proc/sagelib-run-test'" in err and err.count("\n") == 1, err


def test_an_unwritable_runs_folder_is_one_clear_line(workbook, tmp_path):
    (tmp_path / "outputs").write_text("a file where outputs/ should be")
    with pytest.raises(ValueError, match=r"cannot create the runs folder .*pass --out DIR"):
        runner.plan_run("tiny", notebooks_dir=workbook, cwd=tmp_path)


PAIRS = int(os.environ.get("SAGELIB_CONCURRENT_RUN_PAIRS", "0"))


@pytest.mark.slow
@pytest.mark.skipif(PAIRS < 1, reason="tens of CPU minutes: set SAGELIB_CONCURRENT_RUN_PAIRS=20 to run it")
def test_pairs_of_real_runs_started_together_write_distinct_complete_folders(tmp_path):
    """`sagelib run --profile tiny --only 00_contract` without --out, two at a time from one start signal."""
    runs = tmp_path / "runs"
    go = tmp_path / "go"
    code = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from sagelib.run import runner
        runner.RUNS_DIR = Path({str(runs)!r})  # absolute: the runs land here, not in the checkout's outputs/
        from sagelib import cli
        while not Path({str(go)!r}).exists():
            time.sleep(0.005)
        sys.exit(cli.main(["run", "--profile", "tiny", "--only", "00_contract", "--no-progress"]))
    """)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(paths.REPO_ROOT), os.environ.get("PYTHONPATH")])))
    for _ in range(PAIRS):
        go.unlink(missing_ok=True)
        pair = [subprocess.Popen([sys.executable, "-c", code], cwd=paths.REPO_ROOT, env=env,
                                 stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True) for _ in range(2)]
        go.touch()
        for child in pair:
            _, err = child.communicate(timeout=1800)
            assert child.returncode == 0, err[-2000:]
    folders = sorted(runs.iterdir())
    assert len(folders) == 2 * PAIRS
    for folder in folders:
        run = json.loads((folder / "run.json").read_text())
        assert [(nb["name"], nb["status"]) for nb in run["notebooks"]] == [("00_contract", "ok")], folder
        assert (folder / "index.html").is_file() and (folder / "00_contract" / "results.json").is_file()
