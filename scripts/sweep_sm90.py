"""Schedules and ring depths of the Hopper kernel, timed kernel-only on one GPU (sm_90).

Usage (repository root):
    python3 scripts/sweep_sm90.py [--build-only] [--out FILE.json]

Each variant is one build of kernels/attn_sm90.cu (ring depth = the `stages` template
argument; schedule = the -D macros of kernels/include/attn_sm90/mainloop.cuh) run on
the same prepared (already quantized) inputs, median of CUDA-event timings, checked
bit-for-bit or within the parity tolerance against the default build. --build-only
compiles every variant into the kernel cache (no GPU needed), so a GPU host with a
carried cache spends its time measuring. --cta-k 64 sweeps the three-consumer geometry
(ops_sm90.geometry_for), with its own ring depths. --schedule NAME="-DMACRO=V ..." adds a
build variant for this run without editing SCHEDULES, e.g.
    python3 scripts/sweep_sm90.py --schedule "no pack=-DSM90_ABLATE_PACK=1" --variants "default,no pack" --rounds 5
--sustain S runs each variant back to back for S seconds from idle instead, while nvidia-smi samples
the SM clock and power (sagelib.power): the time per call under the card's power cap, with the
clock and power it ran at, e.g. what each leave-one-out build saves in energy:
    python3 scripts/sweep_sm90.py --ablate --sustain 4 --shapes 2:32:16384:128
"""

from __future__ import annotations

import argparse
import shlex
import statistics
import sys
from dataclasses import asdict

SHAPES = [(2, 32, 16384, 128, False), (2, 32, 16384, 128, True), (2, 32, 16384, 64, False), (32, 32, 1024, 128, False)]
#: The kernel's one schedule (the alternatives that measured slower were removed; the experiment log names the
#: trees that have them); --schedule adds a build of an experiment for one run. A name starting "d64" is built
#: for head_dim 64 only.
SCHEDULES = {
    "default": (),
}
#: Leave-one-out builds (wrong outputs, timing only; kernels/include/attn_sm90/ablation.cuh).
ABLATIONS = {
    "ablate: no exp2": ("-DSM90_ABLATE_EXP2=1",),
    "ablate: no P.V": ("-DSM90_ABLATE_PV=1",),
    "ablate: no Q.K^T": ("-DSM90_ABLATE_QK=1",),
    "ablate: no P.V, no Q.K^T": ("-DSM90_ABLATE_PV=1", "-DSM90_ABLATE_QK=1"),
    "ablate: no score cvt": ("-DSM90_ABLATE_CVT=1",),
    "ablate: no e4m3 pack": ("-DSM90_ABLATE_PACK=1",),
    "ablate: no K/V loads": ("-DSM90_ABLATE_KV_LOADS=1",),
}
STAGES = {128: (2, 4), 64: (4, 6)}
#: ring depths timed for the default schedule of the three-consumer geometry (64-key stages)
STAGES_K64 = {128: (4, 6), 64: (4, 8)}


def parse_schedule(text: str) -> tuple[str, tuple[str, ...]]:
    """``NAME=-DMACRO[=V] -UMACRO ...`` (a --schedule argument) as (name, build options)."""
    from sagelib.cuda.build import macro_options
    name, sep, rest = text.partition("=")
    if not sep or not name.strip() or not rest.strip():
        raise ValueError(f"--schedule: expected NAME=-DMACRO[=VALUE] [-UMACRO ...], got {text!r}")
    return name.strip(), macro_options(shlex.split(rest), "--schedule", f"--schedule {name.strip()}=\"-DSM90_X=1\"")


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
              schedules: dict[str, tuple[str, ...]] = SCHEDULES) -> None:
    from sagelib.cuda import instances
    from sagelib.cuda.build import BuildRequest, compile_cubin
    from sagelib.cuda.ops_sm90 import ARCH, check_stages, geometry_for

    for d in (64, 128):
        g = geometry_for(cta_k, d)
        for name, stages, options in [*variants(d, only=only, cta_k=cta_k, schedules=schedules),
                                      *(() if only else variants(d, ablate=True, cta_k=cta_k))]:
            # the causal-only instance too where the geometry has one: causal shapes run it (ops_sm90.kernel_instance)
            for instance in instances.attn_sm90_built(d, check_stages(d, stages, g), g.consumers, g.block_keys):
                built = compile_cubin(BuildRequest("attn_sm90.cu", (instance,), ARCH, tuple(options)))
                print(f"d{d} {name} stages={stages} {instance}: {'cached' if built.from_cache else 'compiled'}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("--out", default=None)
    parser.add_argument("--ablate", action="store_true", help="time the leave-one-out builds instead")
    parser.add_argument("--shapes", default=None, help="B:H:N:D[:causal],... (default: the issue's shapes)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="time every variant this many times, in rotated order, and report the median "
                             "(the first build timed in a shape can read ~1-3%% slow)")
    parser.add_argument("--variants", default="",
                        help=f"comma-separated schedules to build or time (default: all of {', '.join(SCHEDULES)})")
    parser.add_argument("--cta-k", type=int, default=None,
                        help="64: sweep the three-consumer geometry (the sm90 preset with cta_k 64)")
    parser.add_argument("--schedule", action="append", default=[], metavar='NAME="-DMACRO=V ..."',
                        help="an extra build variant for this run (repeatable)")
    parser.add_argument("--sustain", type=float, default=None, metavar="SECONDS",
                        help="run each variant back to back this long from idle, sampling clock and power")
    parser.add_argument("--idle-s", type=float, default=3.0, help="with --sustain: idle seconds before each variant")
    args = parser.parse_args(argv)
    if args.sustain is not None and (args.sustain <= 1.5 or args.idle_s < 0):
        parser.error(f"--sustain/--idle-s: expected more than 1.5 s of load (the first second is the clock's ramp) "
                     f"and idle >= 0, got {args.sustain} and {args.idle_s}")
    schedules = dict(SCHEDULES)
    for text in args.schedule:
        try:
            name, options = parse_schedule(text)
        except ValueError as exc:
            parser.error(str(exc))
        if name in schedules:
            parser.error(f"--schedule: {name!r} is already a schedule ({list(schedules)}); pick another name")
        schedules[name] = options
    if args.rounds < 1:
        parser.error(f"--rounds: expected a whole number of 1 or more, got {args.rounds}")
    if args.cta_k not in (None, 64, 128):
        parser.error(f"--cta-k: expected 64 (the three-consumer geometry) or 128 (the preset's), got {args.cta_k}")
    only = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    unknown = [v for v in only if v not in schedules]
    if unknown:
        parser.error(f"--variants: unknown schedule(s) {unknown}; expected names from {list(schedules)}")
    if args.build_only:
        build_all(only, args.cta_k, schedules)
        return 0
    import torch

    from sagelib.cuda import ops_sm90

    reason = ops_sm90.unavailable_reason()
    if reason:
        print(reason, file=sys.stderr)
        return 2
    from sagelib import power
    from sagelib.bench import time_ms

    rows = []
    print(f"{'shape':<34} {'variant':<22} {'stages':>6} {'ms':>8} {'TOPS':>7} {'vs default':>10} check"
          + ("  (rounds: min-max ms)" if args.rounds > 1 else "")
          + (f"  sustained: {power.HEADER}" if args.sustain else ""))
    shapes = SHAPES if not args.shapes else [
        tuple(int(x) for x in s.split(":")[:4]) + (s.endswith(":causal"),) for s in args.shapes.split(",")]
    for b, h, n, d, causal in shapes:
        q, k, v = (torch.randn(b, h, n, d, device="cuda", dtype=torch.float16) for _ in range(3))
        p = ops_sm90.prepare(q, k, v, causal=causal, check_finite=False)
        ops = 4 * b * h * n * n * d / (2 if causal else 1)
        cta_k = args.cta_k
        geometry = ops_sm90.geometry_for(cta_k, d)
        reference = ops_sm90.run_attention(p, cta_k=cta_k)
        builds = list(variants(d, args.ablate, only, cta_k, schedules))
        checks, times, sustained = [], {name: [] for name, _, _ in builds}, {name: [] for name, _, _ in builds}
        for name, stages, options in builds:
            out = ops_sm90.run_attention(p, stages=stages, build_options=options, cta_k=cta_k)
            diff = float((out.double() - reference.double()).abs().sum() / reference.double().abs().sum())
            checks.append((diff, bool(torch.equal(out, reference))))
        for r in range(args.rounds):  # each round starts one variant later: no build always runs first
            for i in range(len(builds)):
                name, stages, options = builds[(i + r) % len(builds)]

                def call(stages=stages, options=options):
                    return ops_sm90.run_attention(p, stages=stages, build_options=options, cta_k=cta_k)

                if args.sustain:
                    summary, _ = power.sustain(call, args.sustain, idle_s=args.idle_s)
                    sustained[name].append(summary)
                    times[name].append(summary.ms_per_call)
                else:
                    times[name].append(time_ms(call, reps=20 if args.rounds == 1 else 10))
        base = None
        for (name, stages, _), (diff, identical) in zip(builds, checks):
            ms = statistics.median(times[name])
            base = base or ms
            row = {"shape": f"B{b} H{h} N{n} D{d}{' causal' if causal else ''}{f' cta_k {cta_k}' if cta_k else ''}",
                   "variant": name, "stages": stages or ops_sm90.check_stages(d, None, geometry), "ms": ms,
                   "tops": ops / ms / 1e9,
                   "rel_l1_to_default": diff, "bit_identical_to_default": identical, "round_ms": times[name]}
            if sustained[name]:
                row["sustained"] = [asdict(summary) for summary in sustained[name]]
            rows.append(row)
            spread = f"  {min(times[name]):.3f}-{max(times[name]):.3f}" if args.rounds > 1 else ""
            if sustained[name]:
                spread += "  " + power.median_run(sustained[name]).row(ops)
            check = "same bits" if identical else "ok" if diff < 2e-3 else f"differs {diff:.1e}"
            print(f"{row['shape']:<34} {name:<22} {row['stages']:>6} {ms:8.3f} {row['tops']:7.1f} "
                  f"{base / ms:10.3f} {check}{spread}", flush=True)
    if args.out:
        from sagelib import bench, bench_records, sweep_records
        from sagelib.datafile import utc_stamp

        created = utc_stamp()
        document, nonfinite = bench_records.finite_only(
            {"schema": sweep_records.SCHEMA, "date": created[:10], "created_utc": created,
             "device": bench.device_summary(torch.device("cuda")),
             "command": "python3 scripts/sweep_sm90.py " + " ".join(argv if argv is not None else sys.argv[1:]),
             "rows": rows})
        if nonfinite:
            print(f"--out: {nonfinite} NaN or infinite figure(s) written as null", file=sys.stderr)
        bench_records.write_json(document, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
