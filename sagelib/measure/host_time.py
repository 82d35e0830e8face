"""What a caller sees beyond the GPU time: host time per call, and end to end with a sync after each call.

* :func:`host_us_per_call`: the host time to enqueue one call, no synchronization: ``batches`` batches of
  ``calls`` calls back to back, each batch timed by the host clock and divided by ``calls``; the median batch.
  At the shapes it is used on the GPU never holds the host back (the launch queue has room for every batch), so
  this is the Python, dispatch and driver time of one call.
* :func:`synced_times`: each call bracketed by CUDA events and followed by a synchronization, so the GPU starts
  every call idle and waits for the host to enqueue it: the time a caller that synchronizes sees, host included.
  Back to back (:func:`sagelib.measure.timing.time_calls`) the host enqueues the next call while the GPU runs.
* :func:`host_overhead`: issue 33's protocol in one run: host microseconds per call for each backend (and the
  ``sagelib.attention`` op, and our backends with plans off for the before figure) at the host shapes, and
  end-to-end TOPS back to back and synchronized at the sync shapes. ``sagelib bench --host-overhead`` runs it.
"""

from __future__ import annotations

import os
import statistics
import time
from contextlib import contextmanager
from typing import Any, Callable, Sequence

import torch

from sagelib.inputs import random_qkv
from sagelib.measure.timing import (
    TimingConfig,
    attention_ops,
    summarize,
    time_calls,
    tops,
)
from sagelib.records import documents, provenance
from sagelib.records.datafile import utc_stamp

SCHEMA = documents.HOST_OVERHEAD.id

HOST_SHAPES = ("1:8:256:128", "32:32:1024:128")
SYNC_SHAPES = ("2:32:16384:128", "32:32:1024:128")
HOST_BACKENDS = ("cuda-sm90", "cuda", "sdpa-cudnn", "sdpa-flash")
#: rows besides the backends: the op (through the PyTorch dispatcher) and our backends without plans
OP_ROW = "sagelib.attention"
NO_PLANS = " [no plans]"


def host_us_per_call(call: Callable[[], Any], *, batches: int = 5, calls: int = 50, warmup: int = 5,
                     sync: Callable[[], None] | None = None) -> dict:
    """Host microseconds to enqueue one ``call`` (no sync): the median of ``batches`` batches of ``calls``."""
    sync = sync or (torch.cuda.synchronize if torch.cuda.is_available() else (lambda: None))
    for _ in range(warmup):
        call()
    sync()
    per_call = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        per_call.append((time.perf_counter() - start) / calls * 1e6)
        sync()
    return {"median_us": statistics.median(per_call), "batches_us": per_call, "calls": calls}


def synced_times(calls: Sequence[Callable[[], Any]], config: TimingConfig) -> list[float]:
    """Milliseconds of each call bracketed by CUDA events with a synchronization after it (the GPU starts idle)."""
    for i in range(max(config.warmup, 1)):
        calls[i % len(calls)]()
    torch.cuda.synchronize()
    times = []
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for i in range(config.reps):
        start.record()
        calls[i % len(calls)]()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


@contextmanager
def plans_off():
    """Our backends take the general host path inside the block (SAGELIB_LAUNCH_PLANS=0)."""
    before = os.environ.get("SAGELIB_LAUNCH_PLANS")
    os.environ["SAGELIB_LAUNCH_PLANS"] = "0"
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("SAGELIB_LAUNCH_PLANS", None)
        else:
            os.environ["SAGELIB_LAUNCH_PLANS"] = before


def _call_of(row: str, registry, q, k, v) -> Callable[[], Any]:
    if row == OP_ROW:
        from sagelib.ops import attention

        return lambda: attention(q, k, v)
    backend = registry.get(row.removesuffix(NO_PLANS))
    return lambda: backend.attention(q, k, v)


def host_overhead(device: torch.device, backends: Sequence[str] = HOST_BACKENDS, *,
                  host_shapes: Sequence[str] = HOST_SHAPES, sync_shapes: Sequence[str] = SYNC_SHAPES,
                  batches: int = 5, calls: int = 50, timing: TimingConfig = TimingConfig(reps=30, budget_s=30.0),
                  dtype: torch.dtype = torch.float16) -> dict:
    """Issue 33's measurements as one JSON-able document (:data:`SCHEMA`): ``host`` rows (row, shape, median_us,
    batches_us, calls) and ``synced`` rows (row, shape, back to back and synced ms and TOPS, the loss)."""
    from sagelib import backends as registry
    from sagelib.inputs import parse_shape

    ours = [b for b in backends if b.startswith("cuda")]
    rows = [*backends, OP_ROW, *(b + NO_PLANS for b in ours)]
    host, synced = [], []
    for text in host_shapes:
        shape = parse_shape(text)
        q, k, v = random_qkv(shape, dtype, device, "HND", 0)
        for row in rows:
            with plans_off() if row.endswith(NO_PLANS) else _nothing():
                figures = host_us_per_call(_call_of(row, registry, q, k, v), batches=batches, calls=calls)
            host.append({"row": row, "shape": text, **figures})
    for text in sync_shapes:
        shape = parse_shape(text)
        buffers = [random_qkv(shape, dtype, device, "HND", seed) for seed in range(2)]
        ops = attention_ops(shape, False)
        for row in [*backends, *(b + NO_PLANS for b in ours)]:
            with plans_off() if row.endswith(NO_PLANS) else _nothing():
                call_list = [_call_of(row, registry, *b) for b in buffers]
                back = summarize(time_calls(call_list, device, timing)).median_ms
                sync = summarize(synced_times(call_list, timing)).median_ms
            synced.append({"row": row, "shape": text, "back_to_back_ms": back, "synced_ms": sync,
                           "back_to_back_tops": tops(ops, back), "synced_tops": tops(ops, sync),
                           "synced_loss": 1 - back / sync})
    return {"schema": SCHEMA,
            "created_utc": utc_stamp(), "device": torch.cuda.get_device_name(device),
            "environment": provenance.environment_or_reason(),  # the source commit, the GPU, driver and packages
            "protocol": {"batches": batches, "calls": calls, "dtype": str(dtype), "layout": "HND",
                         "timing": {"warmup": timing.warmup, "reps": timing.reps}},
            "host": host, "synced": synced}


@contextmanager
def _nothing():
    yield


def format_host_overhead(document: dict) -> str:
    """Two tables: host us per call (rows x host shapes), TOPS back to back and synced (rows x sync shapes)."""
    lines = ["host time per call, us (no sync; median of "
             f"{len(document['host'][0]['batches_us']) if document['host'] else 0} x "
             f"{document['protocol']['calls']} calls)"]
    shapes = list(dict.fromkeys(r["shape"] for r in document["host"]))
    lines.append("  " + "row".ljust(28) + "".join(shape_label(s).rjust(22) for s in shapes))
    for row in dict.fromkeys(r["row"] for r in document["host"]):
        cells = {r["shape"]: r["median_us"] for r in document["host"] if r["row"] == row}
        lines.append("  " + row.ljust(28) + "".join(f"{cells[s]:.1f}".rjust(22) if s in cells else "-".rjust(22)
                                                    for s in shapes))
    lines.append("end to end TOPS: back to back / sync after each call (loss)")
    for r in document["synced"]:
        lines.append(f"  {r['row'].ljust(28)}{shape_label(r['shape']).ljust(22)}{r['back_to_back_tops']:8.1f} /"
                     f"{r['synced_tops']:8.1f}  ({100 * r['synced_loss']:.1f}%)")
    return "\n".join(lines)


def shape_label(text: str) -> str:
    from sagelib.inputs import parse_shape

    return parse_shape(text).label
