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
Ceilings (int8 / fp8 / bf16 GEMM, device copy) live in :mod:`sagelib.measure.ceilings`.
"""

from __future__ import annotations

import dataclasses
import math
import re
import sys
import time
from dataclasses import astuple, dataclass, field
from typing import Any, Callable, Sequence

import torch

from sagelib.errors import InputError
from sagelib.records.datafile import utc_stamp

SCHEMA = "sagelib.bench/1"

#: Backends that are someone else's work: every other backend's speed is shown as a ratio to these.
PEERS = ("sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sage")

MODES = ("end_to_end", "kernel_only")

_DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}

#: Relative L1 error against exact attention above which a backend's output is called wrong.
CHECK_REL_L1_LIMIT = 0.1


# --------------------------------------------------------------------------- shapes and counting


@dataclass(frozen=True)
class Shape:
    """One attention problem: batch, heads, query and key lengths, head_dim."""

    batch: int
    heads: int
    seq_q: int
    seq_kv: int
    head_dim: int

    @property
    def label(self) -> str:
        n = f"N{self.seq_q}" if self.seq_q == self.seq_kv else f"Nq{self.seq_q} Nkv{self.seq_kv}"
        return f"B{self.batch} H{self.heads} {n} D{self.head_dim}"

    @property
    def spec(self) -> str:
        """The ``B:H:N:D`` (or ``B:H:NQ:NKV:D``) spelling :func:`parse_shape` reads back."""
        if self.seq_q == self.seq_kv:
            return f"{self.batch}:{self.heads}:{self.seq_q}:{self.head_dim}"
        return f"{self.batch}:{self.heads}:{self.seq_q}:{self.seq_kv}:{self.head_dim}"


_SHAPE_HELP = "B:H:N:D or B:H:NQ:NKV:D with positive integers, e.g. 2:32:16384:128"


def parse_shape(text: str) -> Shape:
    """Read ``B:H:N:D`` or ``B:H:NQ:NKV:D``; a ValueError naming the expected syntax otherwise."""
    parts = str(text).strip().split(":")
    if len(parts) not in (4, 5) or not all(re.fullmatch(r"[0-9]+", p) for p in parts):
        raise InputError(f"shape: expected {_SHAPE_HELP}, got {text!r}")
    values = [int(p) for p in parts]
    if min(values) <= 0:
        raise InputError(f"shape: every field must be positive ({_SHAPE_HELP}), got {text!r}")
    if len(values) == 4:
        b, h, n, d = values
        return Shape(b, h, n, n, d)
    b, h, nq, nkv, d = values
    return Shape(b, h, nq, nkv, d)


def parse_shapes(text: str) -> list[Shape]:
    """A comma-separated list of shapes (see :func:`parse_shape`)."""
    items = [t for t in str(text).split(",") if t.strip()]
    if not items:
        raise InputError(f"shapes: expected a comma-separated list of {_SHAPE_HELP}, got {text!r}")
    return [parse_shape(t) for t in items]


def attention_ops(shape: Shape, causal: bool) -> int:
    """Operations of one attention forward: 4*B*H*N_q*N_kv*D (two GEMMs), half when causal.

    The halving is the convention the peers publish with (FlashAttention, SageAttention); it is
    exact only in the limit of long sequences, and is used as a convention, not a count of MACs.
    """
    ops = 4 * shape.batch * shape.heads * shape.seq_q * shape.seq_kv * shape.head_dim
    return ops // 2 if causal else ops


def tops(ops: int, ms: float) -> float:
    """Tera-operations per second for ``ops`` done in ``ms`` milliseconds."""
    if not ms > 0:
        raise InputError(f"tops: ms must be positive, got {ms!r}")
    return ops / (ms * 1e-3) / 1e12


def parse_dtype(text: str) -> torch.dtype:
    if text not in _DTYPES:
        raise InputError(f"dtype: expected one of {', '.join(_DTYPES)}, got {text!r}")
    return _DTYPES[text]


def parse_causal(text: str) -> list[bool]:
    """``no``, ``yes`` or ``no,yes``."""
    words = {"no": False, "yes": True, "false": False, "true": True}
    items = [t.strip().lower() for t in str(text).split(",") if t.strip()]
    if not items or any(t not in words for t in items):
        raise InputError(f"causal: expected no, yes or no,yes, got {text!r}")
    return list(dict.fromkeys(words[t] for t in items))


# --------------------------------------------------------------------------- statistics


@dataclass(frozen=True)
class TimingStats:
    """Per-repetition times in milliseconds, summarised."""

    median_ms: float
    q1_ms: float
    q3_ms: float
    iqr_ms: float
    min_ms: float
    max_ms: float
    mean_ms: float
    reps: int


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile (numpy's default) of an already sorted sequence."""
    position = (len(sorted_values) - 1) * q
    lo = math.floor(position)
    hi = math.ceil(position)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (position - lo)


def summarize(times_ms: Sequence[float]) -> TimingStats:
    """Median, quartiles and IQR of repetition times; a ValueError for none or non-positive ones."""
    values = sorted(float(t) for t in times_ms)
    if not values:
        raise InputError("summarize: times_ms is empty; time at least one repetition")
    if not all(math.isfinite(t) and t >= 0 for t in values):
        raise InputError(f"summarize: times must be finite and non-negative, got {values[:5]}...")
    q1, median, q3 = (_quantile(values, q) for q in (0.25, 0.5, 0.75))
    return TimingStats(
        median_ms=median, q1_ms=q1, q3_ms=q3, iqr_ms=q3 - q1, min_ms=values[0],
        max_ms=values[-1], mean_ms=sum(values) / len(values), reps=len(values),
    )


# --------------------------------------------------------------------------- timing


@dataclass(frozen=True)
class TimingConfig:
    """How hard to time one case. ``budget_s`` caps repetitions for slow cases."""

    warmup: int = 5
    reps: int = 30
    min_reps: int = 5
    budget_s: float = 2.0
    #: The rotated input sets together hold at least this many times the L2 size.
    l2_multiple: float = 2.0
    max_buffers: int = 8
    #: Idle seconds before each timed set of calls. Under sustained load the H200 holds its power cap by lowering
    #: the SM clock (1,500-1,600 MHz after 20 s, against 1,980), and a case timed right after heavy ones inherits
    #: that: the N=1024 call measured 18% slower after 20 s of cuDNN at N=16384 than cold (EXPERIMENT_LOG seq 104).
    cooldown_s: float = 0.0

    def __post_init__(self):
        for name in ("warmup", "reps", "min_reps", "max_buffers"):
            if getattr(self, name) < (0 if name == "warmup" else 1):
                raise InputError(f"TimingConfig: {name} must be positive, got {getattr(self, name)}")
        if not self.cooldown_s >= 0:
            raise InputError(f"TimingConfig: cooldown_s must be 0 or more seconds, got {self.cooldown_s!r}")
        if self.min_reps > self.reps:
            raise InputError(f"TimingConfig: min_reps ({self.min_reps}) exceeds reps ({self.reps})")


def timer_name(device: torch.device) -> str:
    return "cuda-events" if device.type == "cuda" else "cpu-wall-clock"


def replay_of(fn: Callable[[], Any]) -> Callable[[], Any]:
    """``fn`` captured once in a CUDA graph: the graph's replay, which runs the same launches without the host
    (time it for a short call's GPU time alone). ``fn`` runs once first, outside the capture.

    The replay holds ``fn``, and so the tensors it closes over: the graph reads their memory by
    address, and a replay after they were freed read whatever took their place (seq 133's first
    driver kept only ``graph.replay`` and its K/V replays faulted).
    """
    fn()
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()

    def replay(graph=graph, fn=fn):  # fn: held for its inputs, never called again
        graph.replay()
    return replay


def time_calls(calls: Sequence[Callable[[], Any]], device: torch.device, config: TimingConfig) -> list[float]:
    """Time ``calls[i % len(calls)]`` for i in range(reps) after ``config.cooldown_s`` idle and a warm-up;
    milliseconds each.

    The number of repetitions is ``config.reps``, reduced (not below ``min_reps``) when the
    warm-up shows they would take longer than ``config.budget_s``.
    """
    if not calls:
        raise InputError("time_calls: calls is empty; pass one closure per input buffer")
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    if config.cooldown_s > 0:
        sync()
        time.sleep(config.cooldown_s)
    start = time.perf_counter()
    for i in range(max(config.warmup, 1)):
        calls[i % len(calls)]()
    sync()
    per_call_s = (time.perf_counter() - start) / max(config.warmup, 1)
    reps = config.reps
    if per_call_s > 0:
        reps = max(config.min_reps, min(config.reps, int(config.budget_s / per_call_s)))

    if device.type == "cuda":
        starts = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        ends = [torch.cuda.Event(enable_timing=True) for _ in range(reps)]
        for i in range(reps):
            starts[i].record()
            calls[i % len(calls)]()
            ends[i].record()
        torch.cuda.synchronize()
        return [s.elapsed_time(e) for s, e in zip(starts, ends)]

    times = []
    for i in range(reps):
        t0 = time.perf_counter()
        calls[i % len(calls)]()
        times.append((time.perf_counter() - t0) * 1e3)
    return times


def time_ms(fn: Callable[[], Any], reps: int = 20, warmup: int = 3) -> float:
    """GPU time of one call of ``fn`` in milliseconds: the median of exactly ``reps`` CUDA-event timings after
    ``warmup`` calls, through :func:`time_calls` (``min_reps = reps``, so the budget never cuts them).

    For quick A/B scripts that time one ready closure on the current CUDA device: no L2 rotation, no
    cooldown, no output check (:func:`bench_case` does those). The median is :func:`summarize`'s, the mean of
    the two middle timings when ``reps`` is even. Time ``replay_of(fn)`` for GPU time without host overhead.
    """
    config = TimingConfig(warmup=warmup, reps=reps, min_reps=reps)
    return summarize(time_calls([fn], torch.device("cuda"), config)).median_ms


def l2_bytes(device: torch.device) -> int:
    """The L2 size of a CUDA device (0 on CPU, where rotation still uses two buffers)."""
    if device.type != "cuda":
        return 0
    return int(getattr(torch.cuda.get_device_properties(device), "L2_cache_size", 0))


def buffer_count(bytes_per_set: int, device: torch.device, config: TimingConfig) -> int:
    """How many input sets to rotate: at least 2, enough to exceed ``l2_multiple`` x L2."""
    target = config.l2_multiple * l2_bytes(device)
    needed = math.ceil(target / max(bytes_per_set, 1)) if target else 2
    return max(2, min(config.max_buffers, needed))


# --------------------------------------------------------------------------- inputs and checks


def _layout_shape(batch, heads, tokens, head_dim, layout):
    return (batch, heads, tokens, head_dim) if layout == "HND" else (batch, tokens, heads, head_dim)


def random_inputs(shape: Shape, dtype: torch.dtype, device: torch.device, layout: str, seed: int):
    """Fresh q, k, v drawn from N(0, 1) with a seeded generator on ``device``."""
    if layout not in ("HND", "NHD"):
        raise InputError(f"layout: expected 'HND' or 'NHD', got {layout!r}")
    generator = torch.Generator(device=device)
    generator.manual_seed(seed)
    q_shape = _layout_shape(shape.batch, shape.heads, shape.seq_q, shape.head_dim, layout)
    kv_shape = _layout_shape(shape.batch, shape.heads, shape.seq_kv, shape.head_dim, layout)
    return tuple(
        torch.randn(s, generator=generator, device=device, dtype=torch.float32).to(dtype)
        for s in (q_shape, kv_shape, kv_shape)
    )


def _poison_allocator(like_shape, dtype, device, blocks: int = 4) -> None:
    """Fill ``blocks`` blocks of the output's size with NaN and hand them back to the allocator.

    Torch's caching allocator serves the next allocations of that size on this stream from those
    blocks, so an output element that the backend fails to write stays NaN instead of holding a
    stale, plausible value. Several blocks, because a backend may allocate same-sized temporaries
    (a smoothed K, say) before its output.
    """
    if device.type != "cuda":
        return
    poison = [torch.full(like_shape, float("nan"), dtype=dtype, device=device) for _ in range(blocks)]
    del poison


def _first_output(result):
    return result[0] if isinstance(result, (tuple, list)) else result


def exact_rows(q, k, v, rows: torch.Tensor, *, causal: bool, layout: str, batch: int, head: int):
    """Exact fp32 attention for query ``rows`` of one (batch, head); causal is top-left aligned."""
    if layout == "NHD":
        qb, kb, vb = (t[batch, :, head] for t in (q, k, v))
    else:
        qb, kb, vb = (t[batch, head] for t in (q, k, v))
    scores = (qb[rows].float() @ kb.float().T) / math.sqrt(q.shape[-1])
    if causal:
        keys = torch.arange(kb.shape[0], device=q.device)
        scores = scores.masked_fill(keys[None, :] > rows[:, None], float("-inf"))
    return torch.softmax(scores, dim=-1) @ vb.float()


def check_output(out, q, k, v, *, shape: Shape, causal: bool, layout: str, sample_rows: int = 64) -> dict:
    """Every element finite (written), and sampled rows of two heads close to exact attention."""
    out = _first_output(out)
    expected = _layout_shape(shape.batch, shape.heads, shape.seq_q, shape.head_dim, layout)
    if tuple(out.shape) != expected:
        return {"written": False, "rel_l1": None, "ok": False,
                "problem": f"output shape {tuple(out.shape)}, expected {expected}"}
    written = bool(torch.isfinite(out).all())
    n = shape.seq_q
    rows = torch.unique(torch.cat([
        torch.arange(min(n, sample_rows // 2), device=q.device),
        torch.arange(max(0, n - sample_rows // 2), n, device=q.device),
    ]))
    num = den = 0.0
    for b, h in ((0, 0), (shape.batch - 1, shape.heads - 1)):
        ref = exact_rows(q, k, v, rows, causal=causal, layout=layout, batch=b, head=h)
        got = (out[b, :, h] if layout == "NHD" else out[b, h])[rows].float()
        num += float((got - ref).abs().sum())
        den += float(ref.abs().sum())
    rel_l1 = num / den if den > 0 and math.isfinite(num) else None
    ok = written and rel_l1 is not None and rel_l1 <= CHECK_REL_L1_LIMIT
    result = {"written": written, "rel_l1": rel_l1, "rows_checked": int(rows.numel()) * 2, "ok": ok}
    if not written:
        result["problem"] = "output holds NaN/Inf where the inputs are finite: elements left unwritten"
    elif not ok:
        result["problem"] = f"rel_l1 {rel_l1} exceeds {CHECK_REL_L1_LIMIT}: wrong output"
    return result


# --------------------------------------------------------------------------- one case


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
) -> list[Record]:
    """Time one backend on one shape: end to end, and kernel-only where the backend offers it.

    A failure (out of memory, an input the backend refuses) becomes a record with ``error`` set,
    so a sweep goes on; the error names the backend and shape.
    """
    dtype_name = next(k for k, v in _DTYPES.items() if v == dtype)
    base = dict(backend=backend.name, shape=dataclasses.asdict(shape), causal=causal, dtype=dtype_name,
                layout=layout, ops=attention_ops(shape, causal), timer=timer_name(device))
    records = [Record(mode="end_to_end", **base)]
    buffers: list[tuple] = []
    closures: dict[str, list] = {}
    try:
        per_set = 2 * (shape.batch * shape.heads * shape.head_dim) * (shape.seq_q + 2 * shape.seq_kv)
        n_buffers = buffer_count(per_set, device, timing)
        buffers = [random_inputs(shape, dtype, device, layout, seed + i) for i in range(n_buffers)]
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
                _poison_allocator(out_shape, dtype, device)
                checks.append(check_output(call(), q, k, v, shape=shape, causal=causal, layout=layout))
            worst = max(checks, key=lambda c: (not c["ok"], c["rel_l1"] or 0.0))
            record.check = worst
            stats = summarize(time_calls(calls, device, timing))
            record.stats = dataclasses.asdict(stats)
            record.tops = tops(record.ops, stats.median_ms)
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


# --------------------------------------------------------------------------- sweeps and documents


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


def environment_or_reason() -> dict:
    """:func:`sagelib.records.provenance.environment`, or a note of why it could not be taken."""
    try:
        from sagelib.records.provenance import environment, print_dirty_tree_hint
    except ImportError as exc:
        return {"missing": {"environment": f"sagelib.records.provenance not importable: {exc}"}}
    try:
        env = environment()
        print_dirty_tree_hint(env)
        return env
    except Exception as exc:  # provenance must never sink a benchmark
        return {"missing": {"environment": f"provenance.environment() failed: {type(exc).__name__}: {exc}"}}


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
    instances = [registry.get(name) for name in plan.backends]
    grid = [(b, s, c) for s in plan.shapes for c in plan.causal for b in instances]
    records: list[Record] = []
    bar = tqdm(grid, desc="bench", unit="case", disable=not progress, file=sys.stderr)
    for backend, shape, causal in bar:
        bar.set_postfix_str(f"{backend.name} {shape.spec} {'causal' if causal else 'full'}")
        records += bench_case(backend, shape, causal=causal, dtype=dtype, device=device, layout=plan.layout,
                              timing=plan.timing, kernel_only=plan.kernel_only, seed=plan.seed)
    document = {
        "schema": SCHEMA,
        "created_utc": utc_stamp(),
        "command": command,
        "device": device_summary(device),
        "environment": environment_or_reason(),
        "plan": {
            "backends": plan.backends, "shapes": [s.spec for s in plan.shapes], "causal": plan.causal,
            "dtype": plan.dtype, "layout": plan.layout, "kernel_only": plan.kernel_only,
            "timing": dataclasses.asdict(plan.timing), "seed": plan.seed,
        },
        "ceilings": ceilings or {},
        "records": [dataclasses.asdict(r) for r in records],
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
        if record.get("error") is None:
            stats = record.get("stats") or {}
            if not isinstance(stats.get("median_ms"), (int, float)) or not isinstance(record.get("tops"), (int, float)):
                raise InputError(f"bench document: records[{i}] has no error but no stats.median_ms/tops")
            expected = record["ops"] / (stats["median_ms"] * 1e-3) / 1e12
            if not math.isclose(record["tops"], expected, rel_tol=1e-6):
                raise InputError(f"bench document: records[{i}].tops {record['tops']} "
                                 f"disagrees with ops/median ({expected})")


# --------------------------------------------------------------------------- tables


def shape_case(shape: Shape, causal: bool) -> tuple:
    """The case of ``shape`` run causal or not, as :func:`case_key` identifies a record's."""
    return (*astuple(shape), causal)


def case_key(record: dict) -> tuple:
    """What identifies a record's case across backends and modes: (batch, heads, seq_q, seq_kv, head_dim, causal)."""
    return shape_case(Shape(**record["shape"]), record["causal"])


def peer_ratios(records: Sequence[dict], peers: Sequence[str] = PEERS) -> list[dict]:
    """Each timed record with ``ratio``: its TOPS over each peer's end-to-end TOPS on the same case."""
    peer_tops = {(case_key(r), r["backend"]): r["tops"] for r in records
                 if r["backend"] in peers and r["mode"] == "end_to_end" and r.get("tops")}
    present = [p for p in peers if any(key[1] == p for key in peer_tops)]
    out = []
    for record in records:
        ratio = {}
        for peer in present:
            theirs = peer_tops.get((case_key(record), peer))
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
        shape = Shape(**r["shape"]).label
        if r.get("error"):
            lines.append([shape, "yes" if r["causal"] else "no", r["backend"], r["mode"], "-", "-", "-"]
                         + ["-"] * len(present) + [r["error"]])
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
