"""``sagelib bench``: time attention backends on a GPU and write the numbers with their provenance.

    sagelib bench --backends sdpa-flash,sdpa-cudnn,cuda --shapes 2:32:16384:128,8:32:4096:128 \\
                  --causal no,yes --dtype fp16 --out bench.json
    sagelib bench --list                # backends and whether each can run here

Prints a table (median, IQR, TOPS, ratio to every peer in the run, output check) and, with
--out, writes the JSON document of :mod:`sagelib.measure.bench` (environment, ceilings, every record).
Exit status: 0 when every case ran and passed its output check, 1 when one failed, 2 for bad
input (unknown backend or shape syntax, a backend that cannot run here, no GPU).
"""

from __future__ import annotations

import shlex
import sys

from sagelib.commands.args import output_file
from sagelib.errors import KernelUnavailable, UsageError

#: Idle seconds before each timed case on a GPU (sagelib.measure.bench.TimingConfig.cooldown_s; scripts/bench_cuda.py
#: too). On the H200 a D64 case timed right after a D128 one read 3-5% slow end to end, with a 5-6% IQR, at 0 s;
#: after 2, 5 or 10 s it read the same within 0.5% (EXPERIMENT_LOG seq 182).
CUDA_COOLDOWN_S = 2.0


def cooldown_for(device: str, given: float | None) -> float:
    """The idle seconds before each case: ``given`` (--cooldown-s) when set, else CUDA_COOLDOWN_S on cuda and none
    on the CPU (a functional smoke run, where the power cap does not come in)."""
    return given if given is not None else CUDA_COOLDOWN_S if device == "cuda" else 0.0


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "bench",
        help="time attention backends (CUDA events, rotated inputs) and compare with the peers",
        description=__doc__.split("\n\n")[0],
    )
    parser.add_argument("--backends", metavar="A,B", default="sdpa-flash,sdpa-cudnn",
                        help="comma-separated backend names (see --list); default sdpa-flash,sdpa-cudnn")
    parser.add_argument("--shapes", metavar="B:H:N:D[,..]", default="2:32:16384:128",
                        help="comma-separated shapes B:H:N:D or B:H:NQ:NKV:D (default 2:32:16384:128)")
    parser.add_argument("--causal", metavar="no|yes|no,yes", default="no", help="default no")
    parser.add_argument("--dtype", default="fp16", metavar="fp16|bf16", help="default fp16")
    parser.add_argument("--layout", default="HND", metavar="HND|NHD", help="default HND")
    parser.add_argument("--reps", type=int, default=30, help="timed repetitions per case (default 30)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls first (default 5)")
    parser.add_argument("--budget-s", type=float, default=2.0,
                        help="fewer repetitions (not under 5) when a case would take longer (default 2 s)")
    parser.add_argument("--cooldown-s", type=float, default=None,
                        help="idle seconds before each timed case, so none starts under the power cap a heavy case "
                             f"before it left (default {CUDA_COOLDOWN_S:g} on cuda, 0 on cpu)")
    parser.add_argument("--no-kernel-only", action="store_true",
                        help="skip the kernel-only timing of quantized backends")
    parser.add_argument("--ceilings", choices=("measure", "skip"), default="measure",
                        help="measure the card's int8/fp8/bf16 GEMM and copy ceilings first (default)")
    parser.add_argument("--device", default="cuda", metavar="cuda|cpu",
                        help="cuda (default); cpu only for a functional smoke run, timed by the host clock")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", metavar="FILE.json", help="write the JSON document here")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--list", action="store_true", help="list backends and whether each can run here")
    parser.set_defaults(func=main)


def _plan(args):
    import torch

    from sagelib import backends as registry
    from sagelib.inputs import parse_dtype, parse_shapes
    from sagelib.measure.bench import SweepPlan, parse_causal
    from sagelib.measure.timing import TimingConfig

    names = [n.strip() for n in args.backends.split(",") if n.strip()]
    if not names:
        raise UsageError(f"--backends: expected a comma-separated list of names, got {args.backends!r}")
    known = registry.names()
    for name in names:
        if name not in known:
            raise UsageError(f"--backends: unknown backend {name!r}; expected names from: {', '.join(known)} "
                             "(sagelib bench --list shows which can run here)")
    def parsed(flag, parse, text):
        try:
            return parse(text)
        except ValueError as exc:
            raise UsageError(f"{flag}: {str(exc).split(': ', 1)[-1]}") from None

    shapes = parsed("--shapes", parse_shapes, args.shapes)
    causal = parsed("--causal", parse_causal, args.causal)
    parsed("--dtype", parse_dtype, args.dtype)
    if args.reps < 1 or args.warmup < 0:
        raise UsageError(f"--reps/--warmup: expected reps >= 1 and warmup >= 0, got {args.reps} and {args.warmup}")
    if args.layout not in ("HND", "NHD"):
        raise UsageError(f"--layout: expected HND or NHD, got {args.layout!r}")
    if args.device not in ("cuda", "cpu"):
        raise UsageError(f"--device: expected cuda or cpu, got {args.device!r}")
    cooldown_s = cooldown_for(args.device, args.cooldown_s)
    if not cooldown_s >= 0:
        raise UsageError(f"--cooldown-s: expected 0 or more seconds, got {cooldown_s}")
    timing = TimingConfig(warmup=args.warmup, reps=args.reps, min_reps=min(5, args.reps), budget_s=args.budget_s,
                          cooldown_s=cooldown_s)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError(
            f"--device cuda: no CUDA GPU is visible to torch {torch.__version__}; run on a GPU host, "
            "or pass --device cpu --backends reference for a functional smoke run (not a benchmark)")
    names = [registry.resolve_auto() if n == "auto" else n for n in names]
    for name in names:
        reason = registry.get(name, require_available=False).unavailable_reason()
        if reason is not None:
            raise KernelUnavailable(f"--backends: {name!r} cannot run on this machine: {reason}")
        if args.device == "cpu" and name != "reference":
            raise UsageError(f"--backends: {name!r} needs --device cuda; on the CPU only 'reference' runs")
    return SweepPlan(backends=list(dict.fromkeys(names)), shapes=shapes, causal=causal, dtype=args.dtype,
                     layout=args.layout, kernel_only=not args.no_kernel_only, timing=timing, seed=args.seed)


def list_backends() -> int:
    from sagelib import backends as registry

    for name, reason in registry.availability().items():
        print(f"{name:16s} {'available' if reason is None else 'unavailable: ' + reason}")
    return 0


def main(args) -> int:
    if args.list:
        return list_backends()
    plan = _plan(args)

    import torch

    from sagelib.measure import recordings as bench_records
    from sagelib.measure.bench import format_table, run_sweep
    from sagelib.measure.ceilings import format_ceilings, measure_ceilings

    if args.out:
        out = output_file("--out", args.out)
    device = torch.device(args.device)
    ceilings = {}
    if args.ceilings == "measure" and device.type == "cuda":
        print("sagelib bench: measuring the card's ceilings", file=sys.stderr)
        ceilings = measure_ceilings(device)
        print(format_ceilings(ceilings))
    command = "sagelib bench " + " ".join(shlex.quote(a) for a in sys.argv[2:]) if sys.argv[1:2] == ["bench"] else None
    document = run_sweep(plan, device, ceilings=ceilings, command=command, progress=not args.no_progress)
    print(format_table(document))
    if args.out:
        bench_records.write_json(document, out)
        print(f"sagelib bench: wrote {out}")
    failed = [r for r in document["records"] if r.get("error") or not (r.get("check") or {}).get("ok")]
    for r in failed:
        print(f"sagelib bench: FAILED {r['backend']} {r['mode']}: "
              f"{r.get('error') or (r.get('check') or {}).get('problem')}", file=sys.stderr)
    return 1 if failed else 0
