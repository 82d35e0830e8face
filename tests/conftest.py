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


@pytest.fixture
def sagelib_cli(capsys):
    """Run ``sagelib ARGS...`` in this process: returns (exit code, stdout, stderr)."""
    from sagelib import cli

    def run(*argv):
        code = cli.main(list(argv))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory):
    """Every real notebook run once with the ``tiny`` profile (CPU), shared by the tests that judge such a run.

    Two notebooks at a time, each its own ``sagelib run --only NAME`` process (the machine has two cores and a
    notebook spends much of its time in one of them). Returns ``{name: (run folder, run.json summary)}``.
    The run has the Hopper paths switched off (SAGELIB_HOPPER=off): on a CPU nothing else changes (no GPU path
    runs either way), and one run then also serves the test that every notebook copes with the setting.
    """
    import json
    import os
    import subprocess
    import sys
    from concurrent.futures import ThreadPoolExecutor

    from sagelib import paths
    from sagelib.run import notebooks

    base = tmp_path_factory.mktemp("tiny")
    names = [p.stem for p in notebooks.discover_notebooks(paths.NOTEBOOKS_DIR)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(paths.REPO_ROOT), os.environ.get("PYTHONPATH", "")]),
           "SAGELIB_HOPPER": "off"}

    def one(name):
        folder = base / name
        done = subprocess.run([sys.executable, "-m", "sagelib", "run", "--profile", "tiny", "--only", name,
                               "--out", str(folder), "--no-progress"], cwd=paths.REPO_ROOT, env=env,
                              capture_output=True, text=True, timeout=1800)
        summary = json.loads((folder / "run.json").read_text()) if (folder / "run.json").is_file() else None
        return name, (folder, summary, done.returncode, done.stderr[-2000:])

    with ThreadPoolExecutor(max_workers=2) as pool:
        return dict(pool.map(one, names))
