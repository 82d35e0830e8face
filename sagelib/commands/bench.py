"""``sagelib bench``: time attention backends on a GPU and write the numbers with their provenance.

    sagelib bench --backends sdpa-flash,sdpa-cudnn,cuda --shapes 2:32:16384:128,8:32:4096:128 \\
                  --causal no,yes --dtype fp16 --out bench.json
    sagelib bench --list                # backends and whether each can run here
    sagelib bench --suite default --out bench.json   # the full bench `sagelib targets` reads (quantizers first)
    sagelib bench --suite quick | --suite quant      # fewer shapes and reps | the quantizers alone
    sagelib bench --host-overhead --out host.json   # host us per call, TOPS back to back vs synced (issue 33)

Prints a table (median, IQR, TOPS, ratio to every peer in the run, output check) and, with
--out, writes the JSON document of :mod:`sagelib.measure.bench` (environment, ceilings, every record).
A suite (sagelib.measure.bench_suites) sets the backends, shapes, causal modes and repetitions
(flags given override them), skips the backends that cannot run here, and measures the quantizers
first; its document is the one recorded as data/results/*-bench-<tree>.json.
Exit status: 0 when every case ran and passed its output check, 1 when one failed, 2 for bad
input (unknown backend or shape syntax, a backend that cannot run here, no GPU), 3 for a suite
without a GPU.
"""

from __future__ import annotations

import shlex
import sys

from sagelib.commands.args import describe, output_file
from sagelib.errors import InputError, KernelUnavailable, UsageError
from sagelib.measure import distribute
from sagelib.measure.bench_suites import SUITES

#: Idle seconds before each timed case on a GPU (sagelib.measure.bench.TimingConfig.cooldown_s; the suites
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
        description=describe(__doc__),
    )
    parser.add_argument("--suite", metavar="NAME",
                        help="a named bench: " + "; ".join(f"{n}: {s.help}" for n, s in SUITES.items()))
    parser.add_argument("--no-quant", action="store_true",
                        help="with --suite default or quick: measure the copy bandwidth but no quantizer")
    parser.add_argument("--backends", metavar="A,B",
                        help="comma-separated backend names (see --list); default sdpa-flash,sdpa-cudnn, "
                             "or the suite's")
    parser.add_argument("--shapes", metavar="B:H:N:D[,..]",
                        help="comma-separated shapes B:H:N:D or B:H:NQ:NKV:D (default 2:32:16384:128, or the suite's)")
    parser.add_argument("--causal", metavar="no|yes|no,yes", help="default no (a suite's: no,yes)")
    parser.add_argument("--dtype", default="fp16", metavar="fp16|bf16", help="default fp16")
    parser.add_argument("--layout", default="HND", metavar="HND|NHD", help="default HND")
    parser.add_argument("--reps", type=int, help="timed repetitions per case (default 30, a suite's 20 or 10)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed calls first (default 5)")
    parser.add_argument("--budget-s", type=float,
                        help="fewer repetitions (not under 5) when a case would take longer (default 2 s, a suite's "
                             "1.5 s)")
    parser.add_argument("--cooldown-s", type=float, default=None,
                        help="idle seconds before each timed case, so none starts under the power cap a heavy case "
                             f"before it left (default {CUDA_COOLDOWN_S:g} on cuda, 0 on cpu)")
    parser.add_argument("--no-kernel-only", action="store_true",
                        help="skip the kernel-only timing of quantized backends")
    parser.add_argument("--no-user-view", action="store_true",
                        help="skip what a caller sees besides back-to-back GPU time: the 'synced' rows (a sync after "
                             "each call) and the 'host' rows (host time per call, no sync)")
    parser.add_argument("--ceilings", choices=("measure", "skip"),
                        help="measure the card's int8/fp8/bf16 GEMM and copy ceilings first (default measure; "
                             "skip with --suite)")
    parser.add_argument("--device", default="cuda", metavar="cuda|cpu",
                        help="cuda (default); cpu only for a functional smoke run, timed by the host clock")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", metavar="FILE.json", help="write the JSON document here")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--list", action="store_true", help="list backends and whether each can run here")
    parser.add_argument("--host-overhead", action="store_true",
                        help="host microseconds per call (no sync, median of 5 x 50 calls) of our backends, the "
                             "sagelib.attention op and SDPA at B1 H8 N256 D128 and B32 H32 N1024 D128, and TOPS back "
                             "to back vs a sync after each call at B2 H32 N16384 D128 and B32 H32 N1024 D128 "
                             "(--backends overrides the backends)")
    distribute.add_arguments(parser, "(backend, shape, causal) case")
    parser.set_defaults(func=main)


#: The flags a suite sets, with their values without one.
PLAIN_DEFAULTS = {"backends": "sdpa-flash,sdpa-cudnn", "shapes": "2:32:16384:128", "causal": "no", "reps": 30,
                  "budget_s": 2.0, "ceilings": "measure"}


def apply_suite(args):
    """Fill the flags left out from ``--suite``'s values, or the plain defaults; the Suite, or None without one."""
    from sagelib.measure import bench_suites

    chosen = None
    if args.suite is not None:
        try:
            chosen = bench_suites.suite(args.suite)
        except InputError as exc:
            raise UsageError(f"{exc}; `sagelib bench --help` describes each") from None
        if args.device != "cuda":
            raise UsageError(f"--suite {args.suite}: times our kernels on a GPU; leave out --device {args.device}")
        if args.no_quant and not chosen.attention:
            raise UsageError("--no-quant: --suite quant measures only the quantizers; leave out one of them")
    elif args.no_quant:
        raise UsageError("--no-quant: skips the quantizers of a suite; add --suite default or --suite quick")
    values = PLAIN_DEFAULTS if chosen is None else {
        "backends": ",".join(chosen.backends), "shapes": chosen.shapes, "causal": chosen.causal, "reps": chosen.reps,
        "budget_s": chosen.budget_s, "ceilings": "skip"}
    for name, value in values.items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    return chosen


def _suite_backends(names: list[str]) -> list[str]:
    """A suite's backends that can run here; each one skipped is named with its reason."""
    from sagelib.measure import recordings

    usable, skipped = recordings.usable_backends(names)
    for name, reason in skipped.items():
        print(f"sagelib bench: backend {name}: skipped ({reason})", file=sys.stderr)
    return usable


def _plan(args, suite=None):
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
    if suite is not None:
        names = _suite_backends(names)
        if not names:
            raise KernelUnavailable(f"--suite {args.suite}: none of its backends can run here (above)")
    for name in names:
        reason = registry.get(name, require_available=False).unavailable_reason()
        if reason is not None:
            raise KernelUnavailable(f"--backends: {name!r} cannot run on this machine: {reason}")
        if args.device == "cpu" and name != "reference":
            raise UsageError(f"--backends: {name!r} needs --device cuda; on the CPU only 'reference' runs")
    return SweepPlan(backends=list(dict.fromkeys(names)), shapes=shapes, causal=causal, dtype=args.dtype,
                     layout=args.layout, kernel_only=not args.no_kernel_only, timing=timing, seed=args.seed,
                     user_view=args.device == "cuda" and not args.no_user_view)


def list_backends() -> int:
    from sagelib import backends as registry

    for name, reason in registry.availability().items():
        print(f"{name:16s} {'available' if reason is None else 'unavailable: ' + reason}")
    return 0


def main(args) -> int:
    if args.list:
        return list_backends()
    if args.host_overhead:
        return host_overhead(args)
    where = distribute.placement(args.gpus, args.scheduler)
    suite = apply_suite(args)
    if where is not None and suite is not None and not suite.attention:
        raise UsageError(f"{where.describe()}: --suite {args.suite} is one measurement, nothing to spread over GPUs; "
                         "leave out --gpus/--scheduler")
    if suite is not None:
        import torch

        if not torch.cuda.is_available():
            raise KernelUnavailable(f"--suite {args.suite}: no CUDA GPU is visible to torch {torch.__version__}; "
                                    "run it on a GPU host")
        if not suite.attention:
            return run_quant_suite(args)
    plan = _plan(args, suite)

    import torch

    from sagelib.measure.bench import run_sweep
    from sagelib.measure.ceilings import format_ceilings, measure_ceilings

    out = output_file("--out", args.out) if args.out else None
    if where is not None:
        return _report(args, _on_cluster(args, plan, suite, where), out)
    device = torch.device(args.device)
    ceilings = {}
    if args.ceilings == "measure" and device.type == "cuda":
        print("sagelib bench: measuring the card's ceilings", file=sys.stderr)
        ceilings = measure_ceilings(device)
        print(format_ceilings(ceilings))
    command = _command(args)
    quantizers = _quantizers(args, command) if suite is not None else None
    document = run_sweep(plan, device, ceilings=ceilings, command=command, progress=not args.no_progress)
    if quantizers is not None:
        from sagelib.measure.bench_suites import with_quantizers

        document = with_quantizers(document, quantizers)
    return _report(args, document, out)


def _report(args, document, out) -> int:
    """Print the table, write ``out``, name every failed record; the exit status."""
    from sagelib.measure.bench import failed_records, format_table
    from sagelib.records import documents

    print(format_table(document))
    if out:
        documents.write_json(document, out)
        print(f"sagelib bench: wrote {out}")
    failed = failed_records(document)
    for r in failed:
        print(f"sagelib bench: FAILED {r['backend']} {r['mode']}: "
              f"{r.get('error') or (r.get('check') or {}).get('problem')}", file=sys.stderr)
    return 1 if failed else 0


def _on_cluster(args, plan, suite, where) -> dict:
    """The sweep with each case a Dask task on one GPU (sagelib.measure.bench_cluster); the same document."""
    from sagelib.measure import bench_cluster
    from sagelib.measure.ceilings import format_ceilings

    command = _command(args)
    quantizer_shapes = None
    if suite is not None:
        from sagelib.measure import quant_bench

        quantizer_shapes = () if args.no_quant else tuple(quant_bench.SHAPES)
    with distribute.open_client(where) as client:
        document, quantizers = bench_cluster.run_sweep(
            client, plan, args.device, ceilings=args.ceilings == "measure", quantizer_shapes=quantizer_shapes,
            command=command, progress=not args.no_progress, placement=bench_cluster.placement_record(client, where))
    if document["ceilings"]:
        print(format_ceilings(document["ceilings"]))
    if quantizers is not None:
        from sagelib.measure import quant_bench
        from sagelib.measure.bench_suites import with_quantizers

        print(quant_bench.format_rows(quantizers["rows"], quantizers["copy_tb_s"]))
        document = with_quantizers(document, quantizers)
    return document


def _command(args) -> str:
    given = sys.argv[2:] if sys.argv[1:2] == ["bench"] else ["--suite", args.suite] if args.suite else None
    return "sagelib bench " + " ".join(shlex.quote(a) for a in given) if given is not None else None


def _quantizers(args, command):
    """The copy bandwidth and (unless --no-quant) the quantizers' rows, printed; a sagelib.quantizers/1 document."""
    from sagelib.measure import quant_bench

    quantizers = quant_bench.measure(() if args.no_quant else quant_bench.SHAPES, command=command)
    print(quant_bench.format_rows(quantizers["rows"], quantizers["copy_tb_s"]))
    return quantizers


def run_quant_suite(args) -> int:
    """--suite quant: the quantizers alone, their document written with --out."""
    from sagelib.records import documents

    out = output_file("--out", args.out) if args.out else None
    quantizers = _quantizers(args, _command(args))
    if out:
        documents.write_json(quantizers, out)
        print(f"sagelib bench: wrote {out}")
    return 0


def host_overhead(args) -> int:
    """``--host-overhead``: sagelib.measure.host_time's protocol, printed and with --out written as JSON."""
    import json

    import torch

    from sagelib.measure import host_time, recordings

    out = output_file("--out", args.out) if args.out else None
    if not torch.cuda.is_available():
        raise KernelUnavailable(f"--host-overhead: no CUDA GPU is visible to torch {torch.__version__}; "
                                "run it on a GPU host")
    names = host_time.HOST_BACKENDS if args.backends is None else [n for n in args.backends.split(",") if n]
    usable, skipped = recordings.usable_backends(list(names))
    for name, reason in skipped.items():
        print(f"sagelib bench: backend {name}: skipped ({reason})", file=sys.stderr)
    document = host_time.host_overhead(torch.device("cuda"), usable)
    document["command"] = "sagelib " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    print(host_time.format_host_overhead(document))
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(document, indent=1))
    return 0
