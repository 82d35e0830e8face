"""The Hopper kernel's softmax step beside another warpgroup's work (Phase 1 diagnosis, notebook 02).

``kernels/microbench_softmax_beside.cu`` (sm_90a) times one warpgroup's softmax step, one 64 x 128
score tile per step as the attention kernel runs it, while a second warpgroup runs back to back one
of :data:`KINDS`: nothing, tensor-core batches as the kernel issues them (head_dim 128, and 64),
those batches with the fold, the fold alone, or two variations that tell what in a batch slows the
softmax (fresh accumulators: no accumulator read-back; P from shared memory: no register operand).
Each row gives the step's cycles, their ratio to the step with nothing beside it, and how many
batches the other warpgroup completed per 1,000 cycles, beside the softmax and with the softmax
warpgroup asleep.
"""

from __future__ import annotations

import statistics

from sagelib.errors import InputError
from sagelib.records import documents

#: What the second warpgroup runs, by the kernel's `beside` argument.
KINDS = ("nothing", "Q.K^T batches", "P.V batches", "P.V + Q.K^T batches", "P.V + Q.K^T batches, then the fold",
         "the fold alone", "D64 P.V + Q.K^T batches", "Q.K^T batches, fresh accumulators",
         "P.V batches, P from shared")
#: The kinds the two-softmax kernel builds (its batch warpgroup has 168 registers: no fold kinds).
TWO_SOFTMAX_KINDS = ("nothing", "P.V + Q.K^T batches", "D64 P.V + Q.K^T batches")
_N128_STEP = 2 * 64 * 128 * 32  # 8-bit operations of one m64n128k32
#: Each tensor-core kind's 8-bit operations per batch.
TENSOR_OPS = {"Q.K^T batches": 4 * _N128_STEP, "P.V batches": 4 * _N128_STEP, "P.V + Q.K^T batches": 8 * _N128_STEP,
              "P.V + Q.K^T batches, then the fold": 8 * _N128_STEP, "D64 P.V + Q.K^T batches": 4 * _N128_STEP,
              "Q.K^T batches, fresh accumulators": 4 * _N128_STEP, "P.V batches, P from shared": 4 * _N128_STEP}
SCHEMA = documents.SOFTMAX_BESIDE.id  #: /1 had neither the D64 kind nor the rates alone, /2 not the last two kinds
READS = (*documents.SOFTMAX_BESIDE_OLDER, SCHEMA)
STEM = "softmax-beside"
TWO_SOFTMAX_STEM = "two-softmaxes-beside"  #: recordings of measure(softmax_warpgroups=2)


def measure(iters: int = 2000, softmax_warpgroups: int = 1, options: tuple[str, ...] = ()) -> list[dict]:
    """One row per kind (sm_90 GPU): the step's median cycles over the SMs, their ratio to the step
    with nothing beside it, the other warpgroup's completed batches per 1,000 cycles, and the same
    rate with the softmax warpgroup asleep instead (``batches_per_kcycle_alone``). With
    ``softmax_warpgroups`` 2, two softmax warpgroups run side by side (two warps per scheduler; a
    step is then both warpgroups' steps, together) beside the kinds of :data:`TWO_SOFTMAX_KINDS`."""
    if not isinstance(iters, int) or iters < 1:
        raise InputError(f"iters: expected an int of at least 1 softmax step, got {iters!r}")
    if softmax_warpgroups not in (1, 2):
        raise InputError(f"softmax_warpgroups: expected 1 or 2, got {softmax_warpgroups!r}")
    import torch

    from sagelib.cuda.build import load_function
    from sagelib.cuda.launch import I32, launch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    name = "bench_sm90_softmax_beside" if softmax_warpgroups == 1 else "bench_sm90_two_softmaxes_beside"
    fn = load_function("microbench_softmax_beside.cu", name, arch="sm_90a", options=tuple(options))
    threads = 128 * (softmax_warpgroups + 1)

    def run(beside: int, softmax_off: bool) -> tuple[float, float]:  # (cycles of warpgroup 0, batches per kcycle)
        cycles = torch.zeros(sms, dtype=torch.int64, device="cuda")
        batches = torch.zeros(sms, dtype=torch.int32, device="cuda")
        sink = torch.empty(sms * threads, dtype=torch.float32, device="cuda")
        for n in (10, iters):  # the first launch warms up (and builds)
            launch(fn, (sms, 1, 1), (threads, 1, 1), (I32(n), I32(beside), I32(softmax_off), cycles, batches, sink),
                   name=name)
        torch.cuda.synchronize()
        total = statistics.median(cycles.tolist())
        return total, 1000 * statistics.median(batches.tolist()) / total

    rows = []
    for beside, kind in enumerate(KINDS):
        if softmax_warpgroups == 2 and kind not in TWO_SOFTMAX_KINDS:
            continue
        total, rate = run(beside, False)
        rows.append(dict(beside=beside, kind=kind, cycles_per_step=total / iters, batches_per_kcycle=rate,
                         batches_per_kcycle_alone=run(beside, True)[1] if beside else 0.0))
    for row in rows:
        row["over_alone"] = row["cycles_per_step"] / rows[0]["cycles_per_step"]
    return rows


def latest_recording(directory=None, stem: str = STEM):
    """(runs, document, path) of the newest ``*-{stem}.json`` in ``directory`` (default data/results),
    or (None, None, None): runs is a list of row lists as :func:`measure` returns them; ``stem``
    :data:`TWO_SOFTMAX_STEM` for the two-softmax recordings."""
    import json


    path = documents.newest_file(stem, ".json", directory or documents.RESULTS_DIR)
    if path is None:
        return None, None, None
    document = json.loads(path.read_text())
    if document.get("schema") not in READS:
        raise InputError(f"{path}: expected schema {' or '.join(map(repr, READS))}, got {document.get('schema')!r}")
    return document["runs"], document, path


#: The kind whose softmax step is what a ping-pong consumer's softmax runs beside: the other
#: consumer's batch (P.V with the next Q.K^T), then its fold.
PINGPONG_KIND = "P.V + Q.K^T batches, then the fold"


def _steps(rows: list[dict], kind: str, kinds_named: str) -> dict[str, float]:
    """Cycles per step by kind, with 'nothing' and ``kind`` among them (else a ValueError naming ``kinds_named``)."""
    step = {r["kind"]: r["cycles_per_step"] for r in rows}
    if kind not in step or "nothing" not in step:
        raise InputError(f"rows: expected {kinds_named} 'nothing' and {kind!r}, got {sorted(step)}")
    return step


def _two_block_tops(period: float, head_dim: int, hw) -> float:
    """Kernel-only TOPS of two warpgroups' 64 x 128 blocks (Q.K^T and P.V, 2 ops per multiply-add) per
    ``period`` SM cycles on every SM of ``hw``."""
    return 2 * 64 * 128 * head_dim * 4 / period * hw.per_second(1.0) / 1e12


def pingpong_projection(rows: list[dict], hw, head_dim: int = 128, target_tops: float = 1000.0) -> dict:
    """The head_dim-128 ping-pong kernel's period read off the microbenchmark, as a projection: two
    consumers' softmax steps one after the other, each beside the other's batch and fold, so the
    period of two 64 x 128 blocks is twice the :data:`PINGPONG_KIND` step. ``hw`` gives the SM count
    and clock (:class:`sagelib.measure.hardware.Hardware`). Also the step time a kernel-only ``target_tops``
    would need at that period, and its ratio to the step alone."""
    step = _steps(rows, PINGPONG_KIND, "the kinds")
    period = 2 * step[PINGPONG_KIND]
    needed_step = period * _two_block_tops(period, head_dim, hw) / target_tops / 2  # half the period of target_tops
    return {"softmax step alone": step["nothing"], "softmax step beside batch and fold": step[PINGPONG_KIND],
            "period (2 steps)": period, "projected kernel-only TOPS": _two_block_tops(period, head_dim, hw),
            f"step for {target_tops:.0f} TOPS": needed_step,
            f"step for {target_tops:.0f} TOPS / alone": needed_step / step["nothing"]}


def side_by_side_projection(rows: list[dict], hw, head_dim: int = 128) -> dict:
    """An upper bound for a structure in which both consumers' softmaxes run side by side while the
    tensor cores run their batches, from the two-softmax rows (``measure(softmax_warpgroups=2)``):
    the period of two 64 x 128 blocks is the step of two softmaxes beside a batch stream of that head
    dim, with every batch hidden and nothing else (no fold, no waits) on the chain."""
    kind = "P.V + Q.K^T batches" if head_dim == 128 else "D64 P.V + Q.K^T batches"
    step = _steps(rows, kind, "the two-softmax kinds")
    return {"two softmax steps alone": step["nothing"], "two softmax steps beside the batches": step[kind],
            "period (upper-bound structure)": step[kind],
            "projected kernel-only TOPS (upper bound)": _two_block_tops(step[kind], head_dim, hw)}


#: Warps per scheduler the softmax step is timed at alone (kernels/microbench_softmax.cu: 128 threads each).
ALONE_WARPS_PER_SCHEDULER = (1, 2, 3, 4)


def measure_alone(iters: int = 2000, options: tuple[str, ...] = ()) -> list[dict]:
    """The softmax step alone (``kernels/microbench_softmax.cu``, any CUDA GPU sm_89+) at 1 to 4 warps per scheduler,
    one CTA per SM: per row the SM cycles per step (the W warps of a scheduler each taking one tile step, together)
    and per warp-step (that divided by W: the throughput when W warps share a scheduler). A configuration that does
    not launch (e.g. an experiment's build needing more registers than 512 threads get) has ``error`` instead."""
    if not isinstance(iters, int) or iters < 1:
        raise InputError(f"iters: expected an int of at least 1 softmax step, got {iters!r}")
    import torch

    from sagelib.cuda.build import load_function
    from sagelib.cuda.launch import I32, KernelLaunchError, launch

    sms = torch.cuda.get_device_properties(0).multi_processor_count
    fn = load_function("microbench_softmax.cu", "bench_sm90_softmax", options=tuple(options))
    rows = []
    for warps_per_scheduler in ALONE_WARPS_PER_SCHEDULER:
        threads = 128 * warps_per_scheduler
        cycles = torch.zeros(sms, dtype=torch.int64, device="cuda")
        sink = torch.empty(sms * threads, dtype=torch.float32, device="cuda")
        row = {"warps_per_scheduler": warps_per_scheduler, "threads": threads}
        try:
            for n in (10, iters):  # the first launch warms up (and builds)
                launch(fn, (sms, 1, 1), (threads, 1, 1), (I32(n), cycles, sink), name="bench_sm90_softmax")
        except KernelLaunchError as exc:
            rows.append({**row, "error": str(exc.__cause__ or exc)})
            continue
        torch.cuda.synchronize()
        per_step = statistics.median(cycles.tolist()) / iters
        rows.append({**row, "cycles_per_step": per_step, "cycles_per_warp_step": per_step / warps_per_scheduler})
    return rows


def format_alone(rows: list[dict]) -> str:
    """The table of :func:`measure_alone`'s rows."""
    lines = [f"{'warps/scheduler':>15} {'threads':>8} {'cycles/step':>12} {'cycles/warp-step':>17}"]
    for r in rows:
        if "error" in r:
            lines.append(f"{r['warps_per_scheduler']:>15} {r['threads']:>8} did not launch: {r['error']}")
        else:
            lines.append(f"{r['warps_per_scheduler']:>15} {r['threads']:>8} {r['cycles_per_step']:>12.0f} "
                         f"{r['cycles_per_warp_step']:>17.0f}")
    return "\n".join(lines)


def format_beside(rows: list[dict]) -> str:
    """The table of :func:`measure`'s rows."""
    lines = [f"{'beside the softmax warpgroup':<38} {'cycles/step':>11} {'x alone':>8} {'batches/kcycle':>15} "
             f"{'(softmax asleep)':>16}"]
    for r in rows:
        lines.append(f"{r['kind']:<38} {r['cycles_per_step']:>11.0f} {r['over_alone']:>8.3f} "
                     f"{r['batches_per_kcycle']:>15.2f} {r['batches_per_kcycle_alone']:>16.2f}")
    return "\n".join(lines)


def beside_document(rows: list[dict], *, iters: int, softmax_warpgroups: int, options: tuple[str, ...],
                    command: str, gpu: str) -> dict:
    """The recorded document (:data:`SCHEMA`) of one :func:`measure` run, as ``latest_recording`` reads it back."""
    return {"schema": SCHEMA, "command": command, "options": list(options), "softmax_warpgroups": softmax_warpgroups,
            "gpu": gpu, "runs": [rows]}
