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
