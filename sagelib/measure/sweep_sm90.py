"""Schedules and ring depths of the Hopper kernel, timed kernel-only on one sm_90 GPU (``sagelib sweep``).

Each variant is one build of ``kernels/attn_sm90.cu`` (ring depth = the ``stages`` template argument;
schedule = the -D macros listed in :mod:`sagelib.measure.sm90_schedules`) run on the same prepared
(already quantized) inputs, median of CUDA-event timings, checked bit for bit or within the parity
tolerance against the default build. Rounds run the variants in rotated order (the first build timed in
a shape can read ~1-3% slow). With ``sustain_s`` each variant instead runs back to back for that long
from idle while nvidia-smi samples clock and power (:mod:`sagelib.measure.power`).

The document written (schema :data:`sagelib.studies.sweep_records.SCHEMA`) is the one recorded sweeps in
``data/results/`` hold; :mod:`sagelib.studies.sweep_records` reads them.
"""

from __future__ import annotations

import shlex
import statistics
from dataclasses import asdict, dataclass

from sagelib.errors import InputError
from sagelib.measure.sm90_schedules import ABLATIONS, SCHEDULES, STAGES, STAGES_K64

#: A variant whose output differs from the default build's by less than this relative L1 prints "ok".
CHECK_REL_L1 = 2e-3


def parse_schedule(text: str) -> tuple[str, tuple[str, ...]]:
    """``NAME=-DMACRO[=V] -UMACRO ...`` (a --schedule argument) as (name, build options)."""
    from sagelib.cuda.build import macro_options

    name, sep, rest = text.partition("=")
    if not sep or not name.strip() or not rest.strip():
        raise InputError(f"--schedule: expected NAME=-DMACRO[=VALUE] [-UMACRO ...], got {text!r}")
    return name.strip(), macro_options(shlex.split(rest), "--schedule", f"--schedule {name.strip()}=\"-DSM90_X=1\"")


def schedule_table(extra: list[str] = ()) -> dict[str, tuple[str, ...]]:
    """:data:`SCHEDULES` with the ``--schedule`` arguments ``extra`` added (a name already there is refused)."""
    schedules = dict(SCHEDULES)
    for text in extra:
        name, options = parse_schedule(text)
        if name in schedules:
            raise InputError(f"--schedule: {name!r} is already a schedule ({list(schedules)}); pick another name")
        schedules[name] = options
    return schedules


def parse_shapes(text: str) -> list[tuple[int, int, int, int, bool]]:
    """``B:H:N:D[:causal],...`` as (B, H, N, D, causal) tuples."""
    shapes = []
    for item in (s.strip() for s in text.split(",")):
        parts = item.split(":")
        causal = parts[-1] == "causal"
        numbers = parts[:-1] if causal else parts
        if len(numbers) != 4 or not all(p.isdigit() and int(p) > 0 for p in numbers):
            raise InputError(f"--shapes: expected B:H:N:D or B:H:N:D:causal (positive whole numbers), got {item!r}; "
                             "e.g. --shapes 2:32:16384:128,2:32:16384:128:causal")
        if int(numbers[3]) not in STAGES:
            raise InputError(f"--shapes: head_dim {numbers[3]} in {item!r} is not built; expected one of {list(STAGES)}")
        shapes.append((*(int(p) for p in numbers), causal))
    return shapes


def variants(d: int, ablate: bool = False, only: tuple[str, ...] = (), cta_k: int | None = None,
             schedules: dict[str, tuple[str, ...]] = SCHEDULES):
    """(name, stages, build options) of every build to time; ``only`` keeps the named schedules."""
    if ablate:
        yield "default", None, ()
        for name, options in ABLATIONS.items():
            yield name, None, options
        return
    for name, options in schedules.items():
        if name.startswith("d64") and d != 64 or only and name not in only:
            continue
        for stages in (STAGES_K64 if cta_k else STAGES)[d] if name == "default" and not only else (None,):
            yield name, stages, options


def build_all(only: tuple[str, ...] = (), cta_k: int | None = None,
              schedules: dict[str, tuple[str, ...]] = SCHEDULES):
    """Compile every variant (the ablations too unless ``only`` names schedules) into the kernel cache, no GPU
    needed; yields one line per build."""
    from sagelib.backends.kernels.sm90 import ARCH, check_stages, geometry_for
    from sagelib.cuda import instances
    from sagelib.cuda.build import BuildRequest, compile_cubin

    for d in (64, 128):
        g = geometry_for(cta_k, d)
        for name, stages, options in [*variants(d, only=only, cta_k=cta_k, schedules=schedules),
                                      *(() if only else variants(d, ablate=True, cta_k=cta_k))]:
            # the causal-only instance too where the geometry has one: causal shapes run it (sm90.kernel_instance)
            for instance in instances.attn_sm90_built(d, check_stages(d, stages, g), g.consumers, g.block_keys):
                built = compile_cubin(BuildRequest("attn_sm90.cu", (instance,), ARCH, tuple(options)))
                yield f"d{d} {name} stages={stages} {instance}: {'cached' if built.from_cache else 'compiled'}"


@dataclass(frozen=True)
class SweepSettings:
    ablate: bool = False
    only: tuple[str, ...] = ()
    cta_k: int | None = None
    rounds: int = 1
    sustain_s: float | None = None
    idle_s: float = 3.0


def header(settings: SweepSettings) -> str:
    from sagelib.measure import power

    return (f"{'shape':<34} {'variant':<22} {'stages':>6} {'ms':>8} {'TOPS':>7} {'vs default':>10} check"
            + ("  (rounds: min-max ms)" if settings.rounds > 1 else "")
            + (f"  sustained: {power.HEADER}" if settings.sustain_s else ""))


def sweep_shape(shape: tuple[int, int, int, int, bool], settings: SweepSettings,
                schedules: dict[str, tuple[str, ...]] = SCHEDULES):
    """Time every variant on ``shape`` (an sm_90 GPU); yields (row, printed line) per variant, the rows as the
    recorded document holds them."""
    import torch

    from sagelib.backends.kernels import sm90
    from sagelib.measure import power
    from sagelib.measure.timing import time_ms

    b, h, n, d, causal = shape
    q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
    p = sm90.prepare(q, k, v, causal=causal, check_finite=False)
    ops = 4 * b * h * n * n * d / (2 if causal else 1)
    cta_k = settings.cta_k
    geometry = sm90.geometry_for(cta_k, d)
    reference = sm90.run_attention(p, cta_k=cta_k)
    builds = list(variants(d, settings.ablate, settings.only, cta_k, schedules))
    checks, times, sustained = [], {name: [] for name, _, _ in builds}, {name: [] for name, _, _ in builds}
    for name, stages, options in builds:
        out = sm90.run_attention(p, stages=stages, build_options=options, cta_k=cta_k)
        diff = float((out.double() - reference.double()).abs().sum() / reference.double().abs().sum())
        checks.append((diff, bool(torch.equal(out, reference))))
    for r in range(settings.rounds):  # each round starts one variant later: no build always runs first
        for i in range(len(builds)):
            name, stages, options = builds[(i + r) % len(builds)]

            def call(stages=stages, options=options):
                return sm90.run_attention(p, stages=stages, build_options=options, cta_k=cta_k)

            if settings.sustain_s:
                summary, _ = power.sustain(call, settings.sustain_s, idle_s=settings.idle_s)
                sustained[name].append(summary)
                times[name].append(summary.ms_per_call)
            else:
                times[name].append(time_ms(call, reps=20 if settings.rounds == 1 else 10))
    base = None
    for (name, stages, _), (diff, identical) in zip(builds, checks):
        ms = statistics.median(times[name])
        base = base or ms
        row = {"shape": f"B{b} H{h} N{n} D{d}{' causal' if causal else ''}{f' cta_k {cta_k}' if cta_k else ''}",
               "variant": name, "stages": stages or sm90.check_stages(d, None, geometry), "ms": ms,
               "tops": ops / ms / 1e9,
               "rel_l1_to_default": diff, "bit_identical_to_default": identical, "round_ms": times[name]}
        if sustained[name]:
            row["sustained"] = [asdict(summary) for summary in sustained[name]]
        spread = f"  {min(times[name]):.3f}-{max(times[name]):.3f}" if settings.rounds > 1 else ""
        if sustained[name]:
            spread += "  " + power.median_run(sustained[name]).row(ops)
        yield row, format_row(row, base, spread)


def format_row(row: dict, base_ms: float, spread: str = "") -> str:
    """One printed line: shape, variant, ring depth, ms, TOPS, speed against the first variant, output check."""
    identical, diff, ms = row["bit_identical_to_default"], row["rel_l1_to_default"], row["ms"]
    check = "same bits" if identical else "ok" if diff < CHECK_REL_L1 else f"differs {diff:.1e}"
    return (f"{row['shape']:<34} {row['variant']:<22} {row['stages']:>6} {ms:8.3f} {row['tops']:7.1f} "
            f"{base_ms / ms:10.3f} {check}{spread}")


def document(rows: list[dict], command: str, device: dict | None = None) -> tuple[dict, int]:
    """The recorded sweep (schema sagelib.sweep-sm90/1) and how many NaN or infinite figures became null;
    ``device`` (a device summary) defaults to this process's GPU."""
    import torch

    from sagelib.measure import bench
    from sagelib.records import documents
    from sagelib.records.datafile import utc_stamp

    created = utc_stamp()
    return documents.finite_only(
        {"schema": documents.SWEEP_SM90.id, "date": created[:10], "created_utc": created,
         "device": device or bench.device_summary(torch.device("cuda")), "command": command, "rows": rows})


def shape_task(task: tuple) -> tuple[list[tuple[dict, str]], dict]:
    """One shape on a Dask worker (``sagelib sweep --gpus/--scheduler``): (shape, settings, schedules) -> its
    (row, line) pairs as :func:`sweep_shape` yields them, and the worker's device summary."""
    import torch

    from sagelib.backends.kernels import sm90
    from sagelib.errors import KernelUnavailable
    from sagelib.measure import bench

    shape, settings, schedules = task
    reason = sm90.unavailable_reason()
    if reason:
        raise KernelUnavailable(f"the sweep times the Hopper kernel: {reason}")
    return list(sweep_shape(shape, settings, schedules)), bench.device_summary(torch.device("cuda"))


def sweep_on_cluster(client, shapes, settings: SweepSettings, schedules, *, on_line=print):
    """Every shape of the sweep a task on one GPU of ``client``'s cluster; (rows in the shapes' order, the first
    worker's device summary). Each shape's lines go to ``on_line`` as the shape comes back."""
    from sagelib.measure import distribute

    def shown(i, result):
        for _, line in result[0]:
            on_line(line)

    per_shape = distribute.map_cases(client, shape_task, [(shape, settings, schedules) for shape in shapes],
                                     name="sweep", cost=lambda task: task[0][0] * task[0][2] ** 2 * task[0][3],
                                     progress=False, on_result=shown)
    return [row for pairs, _ in per_shape for row, _ in pairs], per_shape[0][1] if per_shape else None
