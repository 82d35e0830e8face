"""Shared test setup: GPU tests skip, with the reason shown, where there is no GPU.

Mark a test ``@pytest.mark.gpu``; without a CUDA device torch can see it is
reported as skipped (``-ra`` lists the reason) instead of failing.
"""

import pytest


def _no_gpu_reason():
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - torch is a dependency
        return f"needs a CUDA GPU: torch is not importable ({exc})"
    if not torch.cuda.is_available():
        return "needs a CUDA GPU: torch.cuda.is_available() is False on this machine"
    return None


def pytest_collection_modifyitems(config, items):
    gpu_items = [item for item in items if "gpu" in item.keywords]
    reason = _no_gpu_reason() if gpu_items else None
    if reason:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=reason))
    # The tests that judge the shared notebook runs go last: the runs start with the session (_shared_runs_started)
    # and advance while every other test runs, so those tests wait the least.
    judging = [item for item in items if any(g in item.fixturenames for g in RUN_GROUPS)]
    if judging:
        items[:] = [item for item in items if item not in judging] + judging


@pytest.fixture
def sagelib_cli(capsys):
    """Run ``sagelib ARGS...`` in this process: returns (exit code, stdout, stderr)."""
    from sagelib import cli

    def run(*argv):
        code = cli.main(list(argv))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


#: the fixtures served by the shared notebook runs (tests/shared_runs.py), one group each
RUN_GROUPS = ("tiny_run", "fallback_runs")


class _Runs:
    """The session's shared notebook runs (tests/shared_runs.py) and the worker processes executing them."""

    def __init__(self, plan, base, workers):
        self.plan, self.base, self.workers = plan, base, workers

    def start_worker(self):
        import os
        import subprocess
        import sys
        from pathlib import Path

        from sagelib import paths

        env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(paths.REPO_ROOT), os.environ.get("PYTHONPATH", "")])}
        log = open(self.base / f"worker-{len(self.workers)}.log", "w")
        self.workers.append(subprocess.Popen(
            [sys.executable, str(Path(__file__).with_name("notebook_worker.py")), str(self.base / "plan.json")],
            cwd=paths.REPO_ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True))

    def stop(self):
        """Ends the workers still running and what they started (a notebook's kernel, nvcc): each worker leads a
        process group of its own."""
        import os
        import signal

        for worker in self.workers:
            if worker.poll() is None:
                os.killpg(worker.pid, signal.SIGKILL)
                worker.wait()


@pytest.fixture(scope="session", autouse=True)
def _shared_runs_started(request, tmp_path_factory):
    """Starts the session's shared notebook runs (tests/shared_runs.py) in one worker process as the session
    begins, when any collected test judges them: the runs then advance on the second core while this process runs
    the tests that need no notebook. The first test that needs them adds a second worker (notebook_runs), so at
    most two processes are busy at any time. Only the groups the collected tests use are run."""
    import json

    import shared_runs

    from sagelib import paths
    from sagelib.run import notebooks

    items = request.session.items
    groups = {g for g in RUN_GROUPS if any(g in item.fixturenames for item in items)}
    if not groups:
        yield None
        return
    base = tmp_path_factory.mktemp("runs")
    names = [p.stem for p in notebooks.discover_notebooks(paths.NOTEBOOKS_DIR)]
    plan = shared_runs.plan(groups, names, base)
    (base / "plan.json").write_text(json.dumps(plan))
    runs = _Runs(plan, base, [])
    runs.start_worker()
    yield runs
    runs.stop()  # a session ended early (-x, ^C) leaves no notebook running


@pytest.fixture(scope="session")
def notebook_runs(_shared_runs_started):
    """Every notebook run this session's tests judge, each executed once: ``{key: (run folder, run.json summary,
    exit status, standard error)}``.

    The runs started with the session (_shared_runs_started); this adds a second worker (tests/notebook_worker.py:
    each takes the next unclaimed run, longest first, as its own ``sagelib run`` through the command line's
    ``main``, paying the imports once) and waits for both.
    """
    import json
    from pathlib import Path

    runs = _shared_runs_started
    assert runs is not None, "notebook_runs is used by a test the session did not collect as using it"
    if len(runs.plan) > 1:
        runs.start_worker()
    for worker in runs.workers:
        worker.wait(timeout=3600)
    logs = " / ".join(p.read_text(errors="replace")[-1500:] for p in sorted(runs.base.glob("worker-*.log")))
    found = {}
    for spec in runs.plan:
        folder = Path(spec["out"])
        result = runs.base / "claims" / spec["key"] / "result.json"
        if result.is_file():
            outcome = json.loads(result.read_text())
            code, stderr = outcome["code"], outcome["stderr"]
        else:  # the worker died mid-run: its log says how
            code, stderr = -1, logs
        summary = json.loads((folder / "run.json").read_text()) if (folder / "run.json").is_file() else None
        found[spec["key"]] = (folder, summary, code, stderr)
    return found


@pytest.fixture(scope="session")
def tiny_run(notebook_runs):
    """Every real notebook run once with the ``tiny`` profile (CPU) and the Hopper paths switched off
    (SAGELIB_HOPPER=off: on a CPU nothing else changes, and one run then also serves the test that every notebook
    copes with the setting), shared by the tests that judge such a run. ``{name: (run folder, run.json summary,
    exit status of its ``sagelib run --only NAME``, standard error)}`` in the workbook's order."""
    from sagelib import paths
    from sagelib.run import notebooks

    return {p.stem: notebook_runs[p.stem] for p in notebooks.discover_notebooks(paths.NOTEBOOKS_DIR)}


@pytest.fixture(scope="session")
def fallback_runs(notebook_runs):
    """Notebooks 04 and 05 without a GPU, pointed at recordings tests/shared_runs.py writes: ``{key: (run folder,
    run.json summary, exit status, standard error)}`` for each key of ``shared_runs.FALLBACK``."""
    import shared_runs

    return {key: notebook_runs[key] for key in shared_runs.FALLBACK}
