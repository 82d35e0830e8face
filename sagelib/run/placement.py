"""The notebooks of one run placed on the GPUs of a host (``sagelib run --gpus N|all``).

Without ``--gpus`` a run executes its notebooks one after another in this process, as it always has. With it,
up to N notebooks run at once, each in a child Python process whose ``CUDA_VISIBLE_DEVICES`` names one GPU
alone (papermill's kernel inherits it, so the notebook sees that GPU as ``cuda:0``); a notebook takes the next
GPU that comes free. The child runs :func:`sagelib.run.execute.execute_notebook` exactly as the serial run does
and hands its :class:`~sagelib.run.execute.Outcome` back through a file, so the run folder, its reports and its
index are the same. No Dask here: a run has a handful of notebooks on one host.
"""

from __future__ import annotations

import os
import pickle
import queue
import subprocess
import sys
import tempfile
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from sagelib.measure.distribute import visible_gpus  # noqa: F401  (the run's --gpus picks devices the same way)
from sagelib.run.execute import Outcome, execute_notebook


def start(jobs: list[tuple], devices: list[str], *, cwd: Path, cell_timeout_s: float,
          log=print) -> dict[str, Future]:
    """Start every (notebook, parameters, folder) of ``jobs``, at most one per device at a time; name -> Future of
    its Outcome. The notebooks start in the order given, each on the next free device."""
    free: queue.Queue = queue.Queue()
    for device in devices:
        free.put(device)
    pool = ThreadPoolExecutor(max_workers=len(devices), thread_name_prefix="sagelib-run-gpu")

    def one(notebook, parameters, folder) -> Outcome:
        device = free.get()
        try:
            log(f"{notebook.name}: started on GPU {device}")
            return execute_on(device, notebook, parameters, folder, cwd=cwd, cell_timeout_s=cell_timeout_s)
        finally:
            free.put(device)

    futures = {nb.name: pool.submit(one, nb, parameters, folder) for nb, parameters, folder in jobs}
    pool.shutdown(wait=False)
    return futures


def execute_on(device: str, notebook, parameters: dict, folder: Path, *, cwd: Path,
               cell_timeout_s: float) -> Outcome:
    """:func:`execute_notebook` in a child process that sees GPU ``device`` alone; its Outcome (a failed one naming
    the child's last words when the child itself died)."""
    with tempfile.TemporaryDirectory(prefix="sagelib-run-") as scratch:
        job, result = Path(scratch) / "job.pickle", Path(scratch) / "outcome.pickle"
        job.write_bytes(pickle.dumps((notebook, parameters, folder, cwd, cell_timeout_s)))
        env = {**os.environ, "CUDA_VISIBLE_DEVICES": device}
        done = subprocess.run([sys.executable, "-m", "sagelib.run.placement", str(job), str(result)], env=env,
                              cwd=cwd, capture_output=True, text=True)
        if result.is_file():
            return pickle.loads(result.read_bytes())
    last = " ".join((done.stderr or done.stdout or "").strip().splitlines()[-3:])[-300:]
    return Outcome(notebook.name, "failed", 0.0, parameters, str(folder),
                   error=f"the process running it on GPU {device} exited with status {done.returncode}: {last}")


def _child(job: str, result: str) -> int:
    notebook, parameters, folder, cwd, cell_timeout_s = pickle.loads(Path(job).read_bytes())
    outcome = execute_notebook(notebook, parameters, folder, cwd=cwd, cell_timeout_s=cell_timeout_s,
                               progress_bar=False)
    Path(result).write_bytes(pickle.dumps(outcome))
    return 0


if __name__ == "__main__":
    sys.exit(_child(*sys.argv[1:3]))
