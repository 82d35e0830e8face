"""Independent cases spread over the GPUs of a host or of a Dask cluster (``--gpus N|all``, ``--scheduler ADDRESS``).

A sweep whose cases do not depend on each other (the bench grid, the parity grid, the Hopper kernel's shapes)
can run each case as one Dask task holding one GPU: ``--gpus N|all`` starts a dask-cuda ``LocalCUDACluster``
on this host (one worker process per GPU, each seeing its GPU alone as ``cuda:0``); ``--scheduler ADDRESS``
joins an existing cluster whose workers offer the resource ``GPU=1`` (``dask cuda worker ADDRESS --resources
GPU=1`` on each host; ``dask-jobqueue`` starts the same on Slurm). :func:`map_cases` submits every case with
that resource, so no two cases share a GPU, gathers each result once under its case's own key, and returns
them in the cases' order: a document merged from them holds what a one-GPU run holds.

A worker that dies mid-case (its process killed, its host gone) loses nothing: the scheduler runs the case again
on another worker (up to ``distributed.scheduler.allowed-failures`` times, 3 by default), and results the lost
worker held but had not yet handed back are recomputed. The client keeps one result per key, so a case run
twice is still counted once.

Dask is optional: it is imported here, lazily, and its absence is a clear error naming the pip command.
"""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Sequence

from sagelib.errors import KernelUnavailable, SagelibError, UsageError

#: How to get Dask: the ``dask`` extra (distributed, dask-cuda); offline hosts take the wheelhouse's.
PIP_HINT = ("pip install -e '.[dask]' (distributed and dask-cuda); for a host without an index, "
            "scripts/build_wheelhouse.sh --dask builds their wheels")
#: The worker resource every case holds: one GPU.
GPU = {"GPU": 1}


@dataclass(frozen=True)
class Placement:
    """Where the cases run: ``gpus`` (a whole number, or "all") on this host, or the cluster at ``scheduler``."""

    gpus: int | str | None = None
    scheduler: str | None = None

    def describe(self) -> str:
        return f"--scheduler {self.scheduler}" if self.scheduler else f"--gpus {self.gpus}"


def parse_gpus(text: str) -> int | str:
    """``all`` or a whole number of 1 or more (``--gpus``)."""
    text = str(text).strip().lower()
    if text == "all":
        return "all"
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise UsageError(f"--gpus: expected a whole number of 1 or more, or all, got {text!r}; e.g. --gpus 2")


def placement(gpus: str | None, scheduler: str | None) -> Placement | None:
    """The placement ``--gpus``/``--scheduler`` ask for, or None for the in-process run (neither given)."""
    if gpus is not None and scheduler is not None:
        raise UsageError(f"--gpus {gpus} and --scheduler {scheduler}: give one; --gpus starts a cluster on this host, "
                         "--scheduler joins one that runs already")
    if scheduler is not None:
        if not scheduler.strip():
            raise UsageError("--scheduler: expected an address such as tcp://host:8786, got an empty string")
        return Placement(scheduler=scheduler.strip())
    return Placement(gpus=parse_gpus(gpus)) if gpus is not None else None


def add_arguments(parser, what: str = "case") -> None:
    """``--gpus`` and ``--scheduler`` on a subcommand's ``parser``; each ``what`` becomes one task on one GPU."""
    parser.add_argument("--gpus", metavar="N|all",
                        help=f"run each {what} as a task on one of N GPUs of this host (a dask-cuda cluster, one "
                             f"worker per GPU), results merged into one document; needs {PIP_HINT.split(' (')[0]}")
    parser.add_argument("--scheduler", metavar="ADDRESS",
                        help=f"run each {what} on an existing Dask cluster (tcp://host:8786) whose workers offer "
                             "GPU=1 (`dask cuda worker ADDRESS --resources GPU=1`)")


def require_dask():
    """The ``distributed`` module, or KernelUnavailable naming the pip command."""
    try:
        import distributed
    except ImportError as exc:
        raise KernelUnavailable(f"--gpus/--scheduler run the cases on Dask, which this environment lacks ({exc}); "
                                f"install it with {PIP_HINT}") from None
    return distributed


def visible_gpus(gpus: int | str, environ: dict | None = None) -> list[str]:
    """The device ids ``--gpus`` picks: the first ``gpus`` (or all) of CUDA_VISIBLE_DEVICES, else of the GPUs
    torch counts."""
    environ = os.environ if environ is None else environ
    if environ.get("CUDA_VISIBLE_DEVICES") is not None:
        ids = [d.strip() for d in environ["CUDA_VISIBLE_DEVICES"].split(",") if d.strip()]
    else:
        import torch

        ids = [str(i) for i in range(torch.cuda.device_count())]
    if not ids:
        raise KernelUnavailable("--gpus: no CUDA GPU is visible here (CUDA_VISIBLE_DEVICES and torch see none); "
                                "leave out --gpus to run in this process")
    if gpus == "all":
        return ids
    if gpus > len(ids):
        raise UsageError(f"--gpus {gpus}: only {len(ids)} GPU(s) visible ({','.join(ids)}); give at most "
                         f"{len(ids)}, or --gpus all")
    return ids[:gpus]


def local_gpu_cluster(gpus: int | str, log: Callable[[str], None] = None):
    """One single-threaded worker process per GPU (the first ``gpus``, or all), each seeing its GPU alone and
    offering GPU=1: dask-cuda's LocalCUDACluster, or where dask_cuda does not import, :func:`per_gpu_cluster`."""
    require_dask()
    devices = visible_gpus(gpus)
    try:  # dask-cuda imports cuda.core, which must match the host's cuda-bindings: anything can go wrong here
        from dask_cuda import LocalCUDACluster

        return LocalCUDACluster(CUDA_VISIBLE_DEVICES=",".join(devices), threads_per_worker=1, resources=dict(GPU))
    except Exception as exc:
        (log or _stderr)(f"dask: no dask-cuda cluster ({type(exc).__name__}: {exc}); one plain Dask worker per GPU "
                         "instead")
        return per_gpu_cluster(devices)


def per_gpu_cluster(devices: Sequence[str], dashboard_address: str = ":8787"):
    """A local Dask cluster of one single-threaded worker process per device id, its CUDA_VISIBLE_DEVICES that id
    alone, offering GPU=1: what LocalCUDACluster starts, without dask-cuda."""
    from distributed import Nanny, Scheduler, SpecCluster

    workers = {f"gpu-{device}": {"cls": Nanny, "options": {"nthreads": 1, "resources": dict(GPU),
                                                           "env": {"CUDA_VISIBLE_DEVICES": str(device)}}}
               for device in devices}
    return SpecCluster(scheduler={"cls": Scheduler, "options": {"dashboard_address": dashboard_address}},
                       workers=workers)


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def gpu_workers(client) -> list[str]:
    """The addresses of the workers that offer at least one GPU resource."""
    workers = client.scheduler_info(n_workers=-1)["workers"]
    return sorted(a for a, w in workers.items() if (w.get("resources") or {}).get("GPU", 0) >= 1)


@contextlib.contextmanager
def open_client(where: Placement, *, log: Callable[[str], None] = None,
                cluster_factory: Callable[[int | str], Any] = None) -> Iterator[Any]:
    """A Dask client for ``where``, its dashboard link logged; the local cluster, if one was started, closed after.

    ``cluster_factory`` (default :func:`local_gpu_cluster`) makes the cluster for ``--gpus``: the tests pass one that
    starts CPU workers offering GPU=1.
    """
    log = log or _stderr
    distributed = require_dask()
    cluster = None
    if where.scheduler:
        try:
            client = distributed.Client(where.scheduler, timeout="30s")
        except (OSError, TimeoutError) as exc:
            raise UsageError(f"--scheduler {where.scheduler!r}: no Dask scheduler answered ({exc}); give the address "
                             "`dask scheduler` printed, e.g. tcp://host:8786") from None
    else:
        cluster = (cluster_factory or local_gpu_cluster)(where.gpus)
        client = distributed.Client(cluster)
    try:
        workers = gpu_workers(client)
        if not workers:
            raise UsageError(f"{where.describe()}: none of the cluster's workers offers the resource GPU; start one "
                             "worker per GPU with `dask cuda worker ADDRESS --resources GPU=1`")
        log(f"dask: {len(workers)} GPU worker(s), dashboard {client.dashboard_link}")
        yield client
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


class CasesFailed(SagelibError):
    """Cases whose task failed on every worker it was given (the function raised, or its workers kept dying)."""


def map_cases(client, fn: Callable[[Any], Any], cases: Sequence[Any], *, name: str = "case",
              cost: Callable[[Any], float] | None = None, progress: bool = True,
              on_result: Callable[[int, Any], None] | None = None) -> list[Any]:
    """``[fn(case) for case in cases]`` with each call a task holding one GPU; results in the cases' order.

    ``cost`` gives each case a priority (the costliest start first, so the last GPU to finish is not left with the
    longest case). ``on_result(i, result)`` is called as each case comes back, in the order they finish. Raises
    :class:`CasesFailed` naming every case whose task failed, after all the others came back.
    """
    distributed = require_dask()
    from tqdm import tqdm

    run = uuid.uuid4().hex[:8]
    futures = {}
    for i, case in enumerate(cases):
        future = client.submit(fn, case, key=f"{name}-{run}-{i}", resources=dict(GPU), pure=False,
                               priority=cost(case) if cost else 0)
        futures[future] = i
    results: dict[int, Any] = {}
    failed: dict[int, str] = {}
    bar = tqdm(total=len(cases), desc=name, unit="case", disable=not progress, file=sys.stderr)
    try:
        for future in distributed.as_completed(list(futures)):
            i = futures[future]
            if i in results or i in failed:
                continue  # as_completed hands each future back once; this holds even if it did not
            if future.status == "error":
                exc = future.exception()
                failed[i] = f"{type(exc).__name__}: {exc}"
            else:
                results[i] = future.result()
                if on_result is not None:
                    on_result(i, results[i])
            bar.update()
    finally:
        bar.close()
        client.cancel(list(futures))
    if failed:
        lines = "; ".join(f"case {i} ({cases[i]!r}): {why}" for i, why in sorted(failed.items()))
        raise CasesFailed(f"{len(failed)} of {len(cases)} {name} task(s) failed on the cluster: {lines}")
    return [results[i] for i in range(len(cases))]


def submit_first(client, fn: Callable[..., Any], *args):
    """The future of ``fn(*args)`` as one task holding one GPU, ahead of every case (what a document's header
    needs: the device, the environment, the card's ceilings, measured on an idle GPU as a one-GPU run does)."""
    return client.submit(fn, *args, resources=dict(GPU), pure=False, priority=1e30)
