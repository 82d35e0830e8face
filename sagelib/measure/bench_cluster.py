"""``sagelib bench --gpus N|all`` / ``--scheduler ADDRESS``: the bench grid with each case on its own GPU.

Each (backend, shape, causal) case of :func:`sagelib.measure.bench.sweep_cases` is one task
(:func:`sagelib.measure.distribute.map_cases`) that runs :func:`sagelib.measure.bench.bench_case` exactly as
the one-GPU sweep does, on a worker that sees its GPU alone. One more task, scheduled ahead of the cases, takes
what the document's header holds from a worker: the device, the environment, and where asked the card's ceilings
and the quantizers (on an idle GPU, as the one-GPU run measures them before its cases). The records come back in
the grid's order, so the document holds what a one-GPU run writes; only ``placement`` is added, naming the
cluster.
"""

from __future__ import annotations

import dataclasses

from sagelib.measure import distribute
from sagelib.measure.bench import (
    SweepPlan,
    bench_case,
    sweep_cases,
    sweep_document,
)
from sagelib.records.provenance import environment_or_reason


def _device(device_type: str):
    import torch

    return torch.device(device_type)


def run_case(task: tuple) -> list[dict]:
    """One case on a worker: (plan, device type, backend name, shape, causal) -> its records as dicts."""
    from sagelib import backends as registry
    from sagelib.inputs import parse_dtype

    plan, device_type, name, shape, causal = task
    records = bench_case(registry.get(name), shape, causal=causal, dtype=parse_dtype(plan.dtype),
                         device=_device(device_type), layout=plan.layout, timing=plan.timing,
                         kernel_only=plan.kernel_only, seed=plan.seed, user_view=plan.user_view)
    return [dataclasses.asdict(r) for r in records]


def header(device_type: str, ceilings: bool, quantizer_shapes: tuple | None, command: str | None) -> dict:
    """On a worker: its device summary and environment, its ceilings when asked, the quantizers' document when
    ``quantizer_shapes`` is not None (an empty tuple: the copy bandwidth alone, as --no-quant)."""
    from sagelib.measure.bench import device_summary

    device = _device(device_type)
    out = {"device": device_summary(device), "environment": environment_or_reason(), "ceilings": {},
           "quantizers": None}
    if ceilings and device.type == "cuda":
        from sagelib.measure.ceilings import measure_ceilings

        out["ceilings"] = measure_ceilings(device)
    if quantizer_shapes is not None:
        from sagelib.measure import quant_bench

        out["quantizers"] = quant_bench.measure(quantizer_shapes, command=command)
    return out


def case_cost(task: tuple) -> float:
    """Operations of a case: the heaviest start first."""
    _, _, _, shape, causal = task
    return shape.batch * shape.heads * shape.seq_q * shape.seq_kv * shape.head_dim / (2 if causal else 1)


def run_sweep(client, plan: SweepPlan, device_type: str, *, ceilings: bool = False,
              quantizer_shapes: tuple | None = None, command: str | None = None, progress: bool = True,
              placement: dict | None = None) -> tuple[dict, dict | None]:
    """The bench document of ``plan`` with every case a task on ``client``'s GPU workers, and the quantizers'
    document (None unless ``quantizer_shapes`` is given)."""
    head = distribute.submit_first(client, header, device_type, ceilings, quantizer_shapes, command)
    tasks = [(plan, device_type, name, shape, causal) for name, shape, causal in sweep_cases(plan)]
    per_case = distribute.map_cases(client, run_case, tasks, name="bench", cost=case_cost, progress=progress)
    top = head.result()
    document = sweep_document(plan, [r for records in per_case for r in records], device=top["device"],
                              environment=top["environment"], ceilings=top["ceilings"], command=command)
    if placement is not None:
        document["placement"] = placement
    return document, top["quantizers"]


def placement_record(client, where: distribute.Placement) -> dict:
    """What the document says about the cluster: how it was asked for, its GPU workers, its dashboard."""
    return {"asked": where.describe(), "gpu_workers": len(distribute.gpu_workers(client)),
            "dashboard": client.dashboard_link}
