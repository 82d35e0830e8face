"""Timing attention backends so that kernel engineers can trust the numbers.

A measurement here follows a fixed discipline:

* **Device events, after warm-up.** Each repetition is bracketed by two CUDA events on the
  current stream; the first calls (module load, autotuning, handle creation) are run and thrown
  away. On a CPU the host clock is used and the result is labelled ``cpu-wall-clock``: it proves
  the pipeline works, it says nothing about a kernel.
* **Many repetitions, robust statistics.** The median and the interquartile range of the
  per-repetition times, never a mean of a handful.
* **No cache flattery.** Inputs are rotated across several independent buffers whose total size
  is at least twice the card's L2, so a repetition never finds its inputs left in L2 by the
  previous one.
* **Fresh random data.** Every buffer is drawn anew from a seeded normal distribution; zeros can
  hide unwritten outputs and run faster than real data.
* **Outputs checked.** Before timing, every buffer is run once on poisoned memory (the output's
  allocation is first filled with NaN and handed back to the caching allocator, which returns the
  same block to the backend) and the result must be finite everywhere; a sample of query rows is
  compared with exact fp32 attention.
* **Operations counted the same for everyone:** ``4*B*H*N_q*N_kv*D``, half when causal.

:func:`bench_case` times one (backend, shape, causal) point end to end and, for quantized
backends that offer :meth:`~sagelib.backends.Backend.kernel_only`, with the inputs quantized
ahead of time. :func:`run_sweep` runs a grid with a progress bar and returns a JSON-able
document (:data:`SCHEMA`) that :func:`validate_document` checks and :func:`format_table` prints.
:func:`time_ms` is the short form for scripts: the median GPU time of one ready closure.
Ceilings (int8 / fp8 / bf16 GEMM, device copy) live in :mod:`sagelib.measure.ceilings`."""

from __future__ import annotations

import dataclasses
import math
import sys
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch

from sagelib.errors import InputError
from sagelib.inputs import TIMED_DTYPES, Shape, parse_dtype, random_qkv
from sagelib.measure.checks import check_output, poison_allocator
from sagelib.measure.timing import (
    TimingConfig,
    attention_ops,
    buffer_count,
    l2_bytes,
    summarize,
    time_calls,
    timer_name,
    tops,
)
from sagelib.records import documents
from sagelib.records.datafile import utc_stamp
from sagelib.records.provenance import environment_or_reason

SCHEMA = documents.BENCH.id


#: Backends that are someone else's work: every other backend's speed is shown as a ratio to these.
PEERS = ("sage2-sm90", "sage2-sm89", "sage2-sm89-per-warp-fp16", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sage",
         "cudnn-fp8")


#: end_to_end: back to back (CUDA events); kernel_only: inputs quantized ahead; synced: end to end with a sync after
#: each call (the GPU waits for the host); host: the host time to enqueue one call (stats in ms, no TOPS)
MODES = ("end_to_end", "kernel_only", "synced", "host")
#: modes that time the calls the case's end_to_end record already checked: no output check of their own
UNCHECKED_MODES = ("synced", "host")


def failed_records(document: dict) -> list[dict]:
    """The records that raised, or whose output check did not pass (modes with no check of their own aside)."""
    return [r for r in document["records"] if r.get("error")
            or (r["mode"] not in UNCHECKED_MODES and not (r.get("check") or {}).get("ok"))]


def parse_causal(text: str) -> list[bool]:
    """``no``, ``yes`` or ``no,yes``."""
    words = {"no": False, "yes": True, "false": False, "true": True}
    items = [t.strip().lower() for t in str(text).split(",") if t.strip()]
    if not items or any(t not in words for t in items):
        raise InputError(f"causal: expected no, yes or no,yes, got {text!r}")
    return list(dict.fromkeys(words[t] for t in items))


@dataclass
class Record:
    """One measured (backend, mode, shape, causal) point, as it goes into the JSON."""

    backend: str
    mode: str
    shape: dict
    causal: bool
    dtype: str
    layout: str
    ops: int
    timer: str
    buffers: int = 0
    bytes_per_buffer: int = 0
    stats: dict | None = None
    tops: float | None = None
    check: dict | None = None
    error: str | None = None


def _is_oom(exc: BaseException) -> bool:
    return isinstance(exc, getattr(torch, "OutOfMemoryError", ())) or "out of memory" in str(exc).lower()


def bench_case(
    backend,
    shape: Shape,
    *,
    causal: bool,
    dtype: torch.dtype,
    device: torch.device,
    layout: str = "HND",
    timing: TimingConfig = TimingConfig(),
    kernel_only: bool = True,
    seed: int = 0,
    user_view: bool = False,
) -> list[Record]:
    """Time one backend on one shape: end to end, and kernel-only where the backend offers it.

    A failure (out of memory, an input the backend refuses) becomes a record with ``error`` set,
    so a sweep goes on; the error names the backend and shape. ``user_view`` (CUDA only) adds what a caller sees:
    a ``synced`` record (a sync after each call) and a ``host`` record (host time per call, no TOPS), both from
    :mod:`sagelib.measure.host_time`.
    """
    dtype_name = next(k for k, v in TIMED_DTYPES.items() if v == dtype)
    base = dict(backend=backend.name, shape=shape.record(), causal=causal, dtype=dtype_name,
                layout=layout, ops=attention_ops(shape, causal), timer=timer_name(device))
    records = [Record(mode="end_to_end", **base)]
    buffers: list[tuple] = []
    closures: dict[str, list] = {}
    try:
        per_set = 2 * (shape.batch * shape.heads * shape.head_dim) * (shape.seq_q + 2 * shape.seq_kv)
        n_buffers = buffer_count(per_set, device, timing)
        buffers = [random_qkv(shape, dtype, device, layout, seed + i) for i in range(n_buffers)]
        out_shape = buffers[0][0].shape

        def end_to_end(q, k, v):
            return lambda: backend.attention(q, k, v, causal=causal, layout=layout)

        closures["end_to_end"] = [end_to_end(*b) for b in buffers]
        if kernel_only and getattr(backend, "quantized", False):
            made = [backend.kernel_only(*b, causal=causal, layout=layout) for b in buffers]
            if all(c is not None for c in made):
                closures["kernel_only"] = made
                records.append(Record(mode="kernel_only", **base))
        for record in records:
            record.buffers, record.bytes_per_buffer = n_buffers, per_set
            calls = closures[record.mode]
            checks = []
            for call, (q, k, v) in zip(calls, buffers):
                poison_allocator(out_shape, dtype, device)
                checks.append(check_output(call(), q, k, v, shape=shape, causal=causal, layout=layout))
            worst = max(checks, key=lambda c: (not c["ok"], c["rel_l1"] or 0.0))
            record.check = worst
            stats = summarize(time_calls(calls, device, timing))
            record.stats = dataclasses.asdict(stats)
            record.tops = tops(record.ops, stats.median_ms)
        if user_view and device.type == "cuda":
            records += user_view_records(closures["end_to_end"], base, timing, n_buffers, per_set)
    except Exception as exc:  # one failed case must not end a sweep
        reason = "out of memory" if _is_oom(exc) else f"{type(exc).__name__}: {exc}"
        for record in records:
            if record.stats is None:
                record.error = f"{backend.name} on {shape.label}: {reason}"
    finally:
        buffers.clear()
        closures.clear()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    return records


def user_view_records(calls, base: dict, timing: TimingConfig, n_buffers: int, per_set: int) -> list[Record]:
    """The ``synced`` and ``host`` records of one end-to-end case (:mod:`sagelib.measure.host_time`)."""
    from sagelib.measure.host_time import host_us_per_call, synced_times

    synced = Record(mode="synced", buffers=n_buffers, bytes_per_buffer=per_set, **base)
    stats = summarize(synced_times(calls, timing))
    synced.stats, synced.tops = dataclasses.asdict(stats), tops(synced.ops, stats.median_ms)
    host = Record(mode="host", buffers=1, bytes_per_buffer=per_set, **base)
    figures = host_us_per_call(calls[0])
    host.stats = dataclasses.asdict(summarize([us / 1e3 for us in figures["batches_us"]]))
    return [synced, host]


@dataclass
class SweepPlan:
    """The grid of a sweep: every backend x shape x causal."""

    backends: list[str]
    shapes: list[Shape]
    causal: list[bool] = field(default_factory=lambda: [False])
    dtype: str = "fp16"
    layout: str = "HND"
    kernel_only: bool = True
    timing: TimingConfig = field(default_factory=TimingConfig)
    seed: int = 0
    #: on CUDA, also the synced and host records of each end-to-end case (bench_case's user_view)
    user_view: bool = False

    def __post_init__(self):
        if any(self.causal) and any(s.seq_q != s.seq_kv for s in self.shapes):
            ragged = next(s.spec for s in self.shapes if s.seq_q != s.seq_kv)
            raise InputError(
                f"shapes: causal with N_q != N_kv ({ragged}) is aligned differently by different backends "
                "(SDPA top-left, the contract bottom-right), so it is not compared; use equal lengths "
                "for causal runs, or --causal no")


def device_summary(device: torch.device) -> dict:
    if device.type != "cuda":
        return {"type": "cpu", "name": "cpu"}
    props = torch.cuda.get_device_properties(device)
    return {
        "type": "cuda", "name": props.name, "capability": f"{props.major}.{props.minor}",
        "sm_count": props.multi_processor_count, "l2_bytes": l2_bytes(device),
        "memory_bytes": props.total_memory,
    }


def sweep_cases(plan: SweepPlan) -> list[tuple[str, Shape, bool]]:
    """The grid of ``plan`` as (backend name, shape, causal), in the order a sweep runs and records it."""
    return [(b, s, c) for s in plan.shapes for c in plan.causal for b in plan.backends]


def run_sweep(
    plan: SweepPlan,
    device: torch.device,
    *,
    ceilings: dict | None = None,
    command: str | None = None,
    progress: bool = True,
) -> dict:
    """Run the grid of ``plan`` on ``device`` and return the JSON document (see :data:`SCHEMA`)."""
    from tqdm import tqdm

    from sagelib import backends as registry

    dtype = parse_dtype(plan.dtype)
    instances = {name: registry.get(name) for name in plan.backends}
    records: list[Record] = []
    bar = tqdm(sweep_cases(plan), desc="bench", unit="case", disable=not progress, file=sys.stderr)
    for name, shape, causal in bar:
        bar.set_postfix_str(f"{name} {shape.spec} {'causal' if causal else 'full'}")
        records += bench_case(instances[name], shape, causal=causal, dtype=dtype, device=device, layout=plan.layout,
                              timing=plan.timing, kernel_only=plan.kernel_only, seed=plan.seed,
                              user_view=plan.user_view)
    return sweep_document(plan, [dataclasses.asdict(r) for r in records], device=device_summary(device),
                          environment=environment_or_reason(), ceilings=ceilings, command=command)


def sweep_document(plan: SweepPlan, records: list[dict], *, device: dict, environment: dict,
                   ceilings: dict | None = None, command: str | None = None) -> dict:
    """The :data:`SCHEMA` document of ``plan``'s ``records`` (dicts), measured on ``device`` (a device_summary)."""
    document = {
        "schema": SCHEMA,
        "created_utc": utc_stamp(),
        "command": command,
        "device": device,
        "environment": environment,
        "plan": {
            "backends": plan.backends, "shapes": [s.spec for s in plan.shapes], "causal": plan.causal,
            "dtype": plan.dtype, "layout": plan.layout, "kernel_only": plan.kernel_only,
            "timing": dataclasses.asdict(plan.timing), "seed": plan.seed, "user_view": plan.user_view,
        },
        "ceilings": ceilings or {},
        "records": records,
    }
    add_ceiling_fractions(document)
    return document


def add_ceiling_fractions(document: dict) -> None:
    """Give each timed record ``fraction_of``: its TOPS over each measured ceiling in TOPS."""
    rates = {name: c["value"] for name, c in document.get("ceilings", {}).items()
             if isinstance(c, dict) and c.get("unit") == "TOPS" and c.get("value")}
    for record in document["records"]:
        if record.get("tops"):
            record["fraction_of"] = {name: record["tops"] / rate for name, rate in rates.items()}


_RECORD_KEYS = {"backend": str, "mode": str, "shape": dict, "causal": bool, "dtype": str, "layout": str,
                "ops": int, "timer": str}


def validate_document(document: Any) -> None:
    """Raise ValueError naming the first thing in ``document`` that breaks :data:`SCHEMA`."""
    if not isinstance(document, dict):
        raise InputError(f"bench document: expected a JSON object, got {type(document).__name__}")
    if document.get("schema") != SCHEMA:
        raise InputError(f"bench document: schema is {document.get('schema')!r}, expected {SCHEMA!r}")
    for key in ("created_utc", "device", "environment", "plan", "ceilings", "records"):
        if key not in document:
            raise InputError(f"bench document: missing key {key!r}")
    if not isinstance(document["records"], list):
        raise InputError("bench document: records must be a list")
    for i, record in enumerate(document["records"]):
        for key, kind in _RECORD_KEYS.items():
            if not isinstance(record.get(key), kind):
                raise InputError(f"bench document: records[{i}].{key} must be {kind.__name__}, got {record.get(key)!r}")
        if record["mode"] not in MODES:
            raise InputError(f"bench document: records[{i}].mode {record['mode']!r} not in {MODES}")
        if record.get("error") is None and record["mode"] == "host":
            if not isinstance((record.get("stats") or {}).get("median_ms"), (int, float)):
                raise InputError(f"bench document: records[{i}] (host) has no stats.median_ms")
        elif record.get("error") is None:
            stats = record.get("stats") or {}
            if not isinstance(stats.get("median_ms"), (int, float)) or not isinstance(record.get("tops"), (int, float)):
                raise InputError(f"bench document: records[{i}] has no error but no stats.median_ms/tops")
            expected = record["ops"] / (stats["median_ms"] * 1e-3) / 1e12
            if not math.isclose(record["tops"], expected, rel_tol=1e-6):
                raise InputError(f"bench document: records[{i}].tops {record['tops']} "
                                 f"disagrees with ops/median ({expected})")


def shape_case(shape: Shape, causal: bool) -> tuple:
    """The case of ``shape`` run causal or not, as :func:`case_key` identifies a record's."""
    return (shape.batch, shape.heads, shape.seq_q, shape.seq_kv, shape.head_dim, causal)


def case_key(record: dict) -> tuple:
    """What identifies a record's case across backends and modes: (batch, heads, seq_q, seq_kv, head_dim, causal)."""
    return shape_case(Shape.from_record(record["shape"]), record["causal"])


def peer_ratios(records: Sequence[dict], peers: Sequence[str] = PEERS) -> list[dict]:
    """Each timed record with ``ratio``: its TOPS over each peer's end-to-end TOPS on the same case (a ``synced``
    record: over the peer's synced TOPS)."""
    peer_tops = {(case_key(r), r["backend"], r["mode"]): r["tops"] for r in records
                 if r["backend"] in peers and r["mode"] in ("end_to_end", "synced") and r.get("tops")}
    present = [p for p in peers if any(key[1] == p for key in peer_tops)]
    out = []
    for record in records:
        ratio = {}
        mode = "synced" if record["mode"] == "synced" else "end_to_end"
        for peer in present:
            theirs = peer_tops.get((case_key(record), peer, mode))
            if record.get("tops") and theirs:
                ratio[peer] = record["tops"] / theirs
        out.append({**record, "ratio": ratio})
    return out


def format_table(document: dict, peers: Sequence[str] = PEERS) -> str:
    """A plain-text table: one row per record, TOPS and the ratio to every peer in the run."""
    rows = peer_ratios(document["records"], peers)
    present = [p for p in peers if any(p in r["ratio"] for r in rows)]
    header = (["shape", "causal", "backend", "mode", "median ms", "IQR ms", "TOPS"] + [f"x {p}" for p in present]
              + ["check"])
    lines = []
    for r in rows:
        shape = Shape.from_record(r["shape"]).label
        if r.get("error"):
            lines.append([shape, "yes" if r["causal"] else "no", r["backend"], r["mode"], "-", "-", "-"]
                         + ["-"] * len(present) + [r["error"]])
            continue
        if r["mode"] == "host":
            ms = r["stats"]["median_ms"]
            lines.append([shape, "yes" if r["causal"] else "no", r["backend"], r["mode"], f"{ms:.3f}",
                          f"{r['stats']['iqr_ms']:.3f}", "-"] + ["-"] * len(present)
                         + [f"host {1e3 * ms:.0f} us per call, no sync"])
            continue
        check = r.get("check") or {}
        verdict = "ok" if check.get("ok") else check.get("problem", "unchecked")
        if check.get("rel_l1") is not None:
            verdict += f" (rel_l1 {check['rel_l1']:.2g})"
        lines.append([
            shape, "yes" if r["causal"] else "no", r["backend"], r["mode"],
            f"{r['stats']['median_ms']:.3f}", f"{r['stats']['iqr_ms']:.3f}",
            f"{r['tops']:.1f}" if r["tops"] >= 10 else f"{r['tops']:.3g}",
        ] + [f"{r['ratio'][p]:.2f}" if p in r["ratio"] else "-" for p in present] + [verdict])
    widths = [max(len(str(x)) for x in column) for column in zip(header, *lines)]
    render = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()
    out = [render(header), render(["-" * w for w in widths])] + [render(line) for line in lines]
    timer = {r["timer"] for r in rows}
    if "cpu-wall-clock" in timer:
        out.append("note: timed with the CPU wall clock (no GPU): a functional run, not a kernel benchmark")
    return "\n".join(out)
