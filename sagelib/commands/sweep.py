"""``sagelib sweep``: which schedule or ring depth of the Hopper kernel is fastest, kernel-only on one sm_90 GPU.

    sagelib sweep                                   # every schedule and ring depth on the bench shapes
    sagelib sweep --build-only                      # compile every variant into the kernel cache (no GPU)
    sagelib sweep --variants default,no-pingpong --rounds 5 --out sweep.json
    sagelib sweep --schedule "no pack=-DSM90_ABLATE_PACK=1" --variants "default,no pack" --rounds 5
    sagelib sweep --ablate --sustain 4 --shapes 2:32:16384:128   # leave-one-out builds under the power cap
    sagelib sweep --cta-k 64                        # the three-consumer geometry, with its own ring depths

Each variant is one build of kernels/attn_sm90.cu (the schedules are listed in
sagelib/measure/sm90_schedules.py) run on the same prepared inputs; its output is checked against the
default build's. --out writes the sagelib.sweep-sm90/1 document recorded sweeps in data/results hold.
Exit status: 0 when timed, 2 for bad input, 3 without an sm_90 GPU.
"""

from __future__ import annotations

import shlex
import sys

from sagelib.commands.args import describe
from sagelib.errors import InputError, KernelUnavailable, UsageError


def register(subparsers) -> None:
    from sagelib.measure.sm90_schedules import SCHEDULES

    parser = subparsers.add_parser(
        "sweep", help="time the Hopper kernel's schedule variants and ring depths against its default build",
        description=describe(__doc__))
    parser.add_argument("--build-only", action="store_true",
                        help="compile every variant into the kernel cache and time nothing (no GPU needed)")
    parser.add_argument("--out", metavar="FILE.json", help="write the rows as a sagelib.sweep-sm90/1 document")
    parser.add_argument("--ablate", action="store_true", help="time the leave-one-out builds instead")
    parser.add_argument("--shapes", metavar="B:H:N:D[:causal],..",
                        help="default: B2 N16384 D128 (causal and not), B2 N16384 D64 and B32 N1024 D128 "
                             "(sagelib.measure.sm90_schedules.SHAPES)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="time every variant this many times, in rotated order, and report the median "
                             "(the first build timed in a shape can read ~1-3%% slow)")
    parser.add_argument("--variants", default="", metavar="A,B",
                        help=f"comma-separated schedules to build or time (default: all of {', '.join(SCHEDULES)})")
    parser.add_argument("--cta-k", type=int, default=None,
                        help="64: sweep the three-consumer geometry (the sm90 preset with cta_k 64)")
    parser.add_argument("--schedule", action="append", default=[], metavar='NAME="-DMACRO=V ..."',
                        help="an extra build variant for this run (repeatable)")
    parser.add_argument("--sustain", type=float, default=None, metavar="SECONDS",
                        help="run each variant back to back this long from idle, sampling clock and power")
    parser.add_argument("--idle-s", type=float, default=3.0, help="with --sustain: idle seconds before each variant")
    from sagelib.measure import distribute

    distribute.add_arguments(parser, "shape (all its variants)")
    parser.set_defaults(func=main)


def main(args) -> int:
    from sagelib.commands.args import output_file
    from sagelib.measure import distribute, sweep_sm90
    from sagelib.measure.sm90_schedules import SHAPES

    where = distribute.placement(args.gpus, args.scheduler)
    if where is not None and args.build_only:
        raise UsageError(f"--build-only compiles here, on no GPU; leave out {where.describe()}")

    if args.sustain is not None and (args.sustain <= 1.5 or args.idle_s < 0):
        raise UsageError(f"--sustain/--idle-s: expected more than 1.5 s of load (the first second is the clock's "
                         f"ramp) and idle >= 0, got {args.sustain} and {args.idle_s}")
    if args.rounds < 1:
        raise UsageError(f"--rounds: expected a whole number of 1 or more, got {args.rounds}")
    if args.cta_k not in (None, 64, 128):
        raise UsageError(f"--cta-k: expected 64 (the three-consumer geometry) or 128 (the preset's), got {args.cta_k}")
    try:
        schedules = sweep_sm90.schedule_table(args.schedule)
        shapes = sweep_sm90.parse_shapes(args.shapes) if args.shapes else list(SHAPES)
    except InputError as exc:
        raise UsageError(str(exc)) from None
    only = tuple(v.strip() for v in args.variants.split(",") if v.strip())
    unknown = [v for v in only if v not in schedules]
    if unknown:
        raise UsageError(f"--variants: unknown schedule(s) {unknown}; expected names from {list(schedules)}")
    out = output_file("--out", args.out) if args.out else None
    if args.build_only:
        from sagelib.cuda.build import nvrtc_version

        if nvrtc_version() is None:  # a cached build still needs its version for the cache key
            raise KernelUnavailable("--build-only compiles with NVRTC, which CuPy brings and this environment lacks; "
                                    "install it with pip install -e '.[cuda13]' (or '.[cuda12]')")
        for line in sweep_sm90.build_all(only, args.cta_k, schedules):
            print(line)
        return 0

    from sagelib.backends.kernels import sm90

    reason = sm90.unavailable_reason() if where is None or where.gpus else None  # --scheduler: the workers check
    if reason:
        raise KernelUnavailable(f"the sweep times the Hopper kernel: {reason}; `sagelib sweep --build-only` "
                                "fills the kernel cache without a GPU")
    settings = sweep_sm90.SweepSettings(ablate=args.ablate, only=only, cta_k=args.cta_k, rounds=args.rounds,
                                        sustain_s=args.sustain, idle_s=args.idle_s)
    print(sweep_sm90.header(settings))
    rows, device = [], None
    if where is not None:  # each shape a task on one GPU; its lines printed as it comes back
        with distribute.open_client(where) as client:
            rows, device = sweep_sm90.sweep_on_cluster(client, shapes, settings, schedules,
                                                       on_line=lambda line: print(line, flush=True))
    else:
        for shape in shapes:
            for row, line in sweep_sm90.sweep_shape(shape, settings, schedules):
                rows.append(row)
                print(line, flush=True)
    if out:
        given = sys.argv[2:] if sys.argv[1:2] == ["sweep"] else []
        document, nonfinite = sweep_sm90.document(rows, " ".join(["sagelib sweep", *map(shlex.quote, given)]),
                                                  device)
        if nonfinite:
            print(f"--out: {nonfinite} NaN or infinite figure(s) written as null", file=sys.stderr)
        from sagelib.records import documents

        documents.write_json(document, out)
        print(f"sagelib sweep: wrote {out}")
    return 0
