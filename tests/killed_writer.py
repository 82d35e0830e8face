"""A log writer killed in the middle of an append, for the ledger's crash tests (test_ledger, test_faults_log)."""

import os
import signal
import subprocess
import sys
import time

from sagelib.records import ledger


def kill_mid_append(code: str, args: list[str], log, *, cwd, wait_s: float) -> None:
    """Run ``python -c code *args`` with the ledger paused in the middle of its append, wait (up to ``wait_s``)
    until it has written part of a line to ``log``, then kill it with SIGKILL."""
    size = log.stat().st_size
    env = {**os.environ, ledger.PAUSE_MID_APPEND_ENV: "60"}
    writer = subprocess.Popen([sys.executable, "-c", code, *args], env=env, cwd=cwd)
    try:
        deadline = time.monotonic() + wait_s
        while log.stat().st_size == size and time.monotonic() < deadline and writer.poll() is None:
            time.sleep(0.02)
        assert log.stat().st_size > size, "the writer never wrote its partial line"
    finally:
        writer.send_signal(signal.SIGKILL)
        writer.wait()
