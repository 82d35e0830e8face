"""``sagelib profile``: profiler counters, sanitizers and ptxas figures for attention kernels.

    sagelib profile tools                                  # which of ncu, compute-sanitizer, nvcc are here
    sagelib profile ncu --backend sdpa-cudnn --shape 1:32:4096:128 --out ncu.json
    sagelib profile ncu --backend cuda --mode kernel_only --kernel attn --shape 1:32:4096:128
    sagelib profile sanitize --tool memcheck --backend cuda --shape 1:2:1000:128
    sagelib profile sanitize --cases                       # memcheck and racecheck over every kernel, small cases
    sagelib profile ptxas                                  # registers/spills/smem per kernel and arch
    sagelib profile stalls --backend cuda-sm90 --mode kernel_only --kernel attn_sm90 --shape 2:32:8192:128
    sagelib profile stalls --from-csv source.csv           # summarise a source page ncu wrote elsewhere
    sagelib profile sm90 --trace --shape 32:32:1024:128    # the Hopper kernel's phase timeline and tile walk
    ncu --clock-control none -k regex:attn_sm90 --launch-skip 1 --launch-count 1 \
        sagelib profile sm90 --shape 2:32:8192:128         # one prepared Hopper problem for ncu (any build)

ncu always runs with --clock-control none, on one call of the backend made after warm-up.
Exit status: 0 on success, 1 when the tool ran and found a problem (or could not profile),
2 for bad input or a tool that is not installed.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path

from sagelib.commands.args import describe, output_file
from sagelib.errors import KernelUnavailable, UsageError


def _target_arguments(parser, required: bool = True) -> None:
    parser.add_argument("--backend", required=required, help="backend name (sagelib bench --list)")
    parser.add_argument("--shape", default="1:32:4096:128", metavar="B:H:N:D", help="default 1:32:4096:128")
    parser.add_argument("--causal", default="no", metavar="no|yes")
    parser.add_argument("--dtype", default="fp16", metavar="fp16|bf16")
    parser.add_argument("--layout", default="HND", metavar="HND|NHD")
    parser.add_argument("--mode", default="end_to_end", choices=("end_to_end", "kernel_only"),
                        help="the backend's whole call, or only its attention kernel on pre-quantized inputs")


def register(subparsers) -> None:
    parser = subparsers.add_parser("profile", help="ncu counters and stall samples, compute-sanitizer, ptxas figures",
                                   description=describe(__doc__))
    verbs = parser.add_subparsers(dest="verb", metavar="VERB")

    verbs.add_parser("tools", help="which profiling tools are installed").set_defaults(func=cmd_tools)

    ncu = verbs.add_parser("ncu", help="Nsight Compute on one call of a backend, parsed into JSON")
    _target_arguments(ncu)
    ncu.add_argument("--kernel", metavar="REGEX", help="profile only kernels whose name matches")
    ncu.add_argument("--launch-count", type=int, default=8, help="most launches profiled (default 8)")
    ncu.add_argument("--log", metavar="FILE.csv", help="where ncu's CSV goes (default beside --out, or a temp file)")
    ncu.add_argument("--out", metavar="FILE.json")
    ncu.set_defaults(func=cmd_ncu)

    san = verbs.add_parser("sanitize", help="compute-sanitizer on one call of a backend, or on small cases of every "
                                            "kernel (--cases)")
    _target_arguments(san, required=False)
    san.add_argument("--cases", action="store_true",
                     help="every CUDA kernel on small ragged, GQA, causal and NHD cases (sagelib.measure.sanitize_cases)"
                          " instead of one backend call; tools memcheck and racecheck unless --tool is given")
    san.add_argument("--tool", action="append", metavar="TOOL",
                     help="memcheck (default), racecheck, initcheck or synccheck; repeatable")
    san.add_argument("--out", metavar="FILE.json")
    san.set_defaults(func=cmd_sanitize)

    ptx = verbs.add_parser("ptxas", help="ptxas resource figures from the kernels check")
    ptx.add_argument("--out", metavar="FILE.json")
    ptx.set_defaults(func=cmd_ptxas)

    stalls = verbs.add_parser("stalls", help="warp stall sampling per SASS instruction (ncu's source page)")
    _target_arguments(stalls, required=False)
    stalls.add_argument("--kernel", metavar="REGEX", help="profile only kernels whose name matches")
    stalls.add_argument("--from-csv", metavar="FILE", help="summarise this source-page CSV instead of running ncu")
    stalls.add_argument("--csv", metavar="FILE", help="keep the CSV ncu writes here")
    stalls.add_argument("--top", type=int, default=25, help="most-sampled instructions listed (default 25)")
    stalls.add_argument("--out", metavar="FILE.json")
    stalls.set_defaults(func=cmd_stalls)

    sm90 = verbs.add_parser("sm90", help="the Hopper kernel on one prepared problem: launched for ncu or a steady "
                                         "load, or traced (--trace: each phase's cycles, CTA 0's tile walk)")
    sm90.add_argument("--shape", default="2:32:8192:128", metavar="B:H:N:D", help="default 2:32:8192:128")
    sm90.add_argument("--causal", default="no", metavar="no|yes")
    sm90.add_argument("--launches", type=int, default=2, help="launches (default 2)")
    sm90.add_argument("--seconds", type=float, default=0.0, help="then keep launching this long, and print the rate")
    sm90.add_argument("--define", action="append", default=[], metavar="MACRO=V",
                      help="a -D option for the kernel build (repeatable)")
    sm90.add_argument("--trace", action="store_true", help="print the phase timeline of CTA 0 (an SM90_TRACE build)")
    sm90.add_argument("--cta-k", type=int, default=None, help="64: the three-consumer geometry (sm90.geometry_for)")
    sm90.add_argument("--consumers", type=int, default=None,
                      help="build Sm90Geometry<consumers, cta_k> instead of the preset's (experiments)")
    sm90.add_argument("--stages", type=int, default=None, help="the K/V ring depth (default: the built one)")
    sm90.set_defaults(func=cmd_sm90)

    # The programs the profilers run (not listed: a parser added without help= stays out of the verb list)
    verbs.add_parser("launch-cases", description="Internal: the program `profile sanitize --cases` runs under "
                     "compute-sanitizer (every kernel's small cases).").set_defaults(func=cmd_launch_cases)
    launch = verbs.add_parser("launch", description="Internal: the program `profile ncu`, `stalls` and `sanitize` "
                              "run under the profiler (one call of a backend after a warm-up).")
    _target_arguments(launch)
    launch.add_argument("--warmup", type=int, default=3)
    launch.set_defaults(func=cmd_launch)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def _validated_target(args):
    """Check the target's arguments here, so a mistake is one line, not a traceback from ncu's child."""
    from sagelib import backends
    from sagelib.inputs import parse_dtype, parse_shape
    from sagelib.measure.bench import parse_causal

    if args.backend not in backends.names():
        raise UsageError(f"--backend: unknown backend {args.backend!r}; expected one of {', '.join(backends.names())}")
    try:
        parse_shape(args.shape)
        causal = parse_causal(args.causal)
        parse_dtype(args.dtype)
    except ValueError as exc:
        raise UsageError(f"--{str(exc).split(':')[0]}: {str(exc).split(': ', 1)[-1]}") from None
    if len(causal) != 1:
        raise UsageError(f"--causal: one call is profiled, so give no or yes, not {args.causal!r}")
    reason = backends.get(args.backend, require_available=False).unavailable_reason()
    if reason is not None:
        raise KernelUnavailable(f"--backend: {args.backend!r} cannot run on this machine: {reason}")
    return causal[0]


def _check_outputs(args, *flags) -> None:
    """Check the files named by ``flags`` before the tool runs, so a bad path loses no profile at the end."""
    for flag in flags:
        name = getattr(args, flag[2:].replace("-", "_"))
        if name:
            output_file(flag, name)


def _write(out, payload) -> None:
    if out:
        Path(out).parent.mkdir(parents=True, exist_ok=True)
        Path(out).write_text(json.dumps(payload, indent=1, default=str) + "\n")
        print(f"sagelib profile: wrote {out}")


def cmd_tools(args) -> int:
    from sagelib.measure import profiling

    for name, status in profiling.tools().items():
        print(f"{name:18s} "
              f"{status.path + '  ' + (status.version or '') if status.available else 'absent: ' + status.reason}")
    reason = profiling.ptxas_unavailable_reason()
    print(f"{'ptxas table':18s} {'available (sagelib profile ptxas)' if reason is None else 'absent: ' + reason}")
    return 0


def _program(args, causal):
    from sagelib.measure.profiling import launch_command

    return launch_command(args.backend, args.shape, causal=causal, dtype=args.dtype, mode=args.mode, layout=args.layout)


def cmd_ncu(args) -> int:
    import tempfile

    from sagelib.measure import ncu, profiling

    causal = _validated_target(args)
    _check_outputs(args, "--out", "--log")
    status = profiling.tool_status("ncu")
    if not status.available:
        raise KernelUnavailable(f"ncu: {status.reason}")
    log = args.log or (str(Path(args.out).with_suffix(".csv")) if args.out else tempfile.mktemp(suffix=".csv"))
    report = ncu.ncu_profile(_program(args, causal), log_file=log, kernel_regex=args.kernel,
                                   launch_count=args.launch_count)
    payload = {"tool": "ncu", "version": status.version, "backend": args.backend, "shape": args.shape,
               "causal": causal, "dtype": args.dtype, "mode": args.mode, "csv": log, **dataclasses.asdict(report)}
    print(format_ncu(report.kernels))
    if report.reason:
        print(f"sagelib profile ncu: {report.reason}", file=sys.stderr)
    _write(args.out, payload)
    return 0 if report.ok else 1


def format_ncu(kernels) -> str:
    keys = ("registers_per_thread", "achieved_occupancy_pct", "tensor_pipe_pct_max", "dram_throughput_pct",
            "local_memory_bytes", "smem_bank_conflicts", "smem_wavefronts")
    lines = []
    for kernel in kernels:
        s = kernel["summary"]
        duration = s["duration"]
        lines.append(f"{(kernel['name'] or '?')[:90]}")
        if duration:
            lines.append(f"  duration {duration['value']} {duration['unit']}")
        lines.append("  " + ", ".join(f"{k} {s[k]:.4g}" if isinstance(s[k], float) else f"{k} {s[k]}" for k in keys))
        stalls = list(s["issue_stalls"].items())[:4]
        if stalls:
            lines.append("  top stalls: " + ", ".join(f"{r} {v:.3g}" for r, v in stalls))
    return "\n".join(lines) if lines else "(no kernels)"


def cmd_sanitize(args) -> int:
    from sagelib.measure import profiling, sanitize_cases, sanitizer

    if args.cases and args.backend:
        raise UsageError("--cases: runs every kernel on its own small cases; leave out --backend (or --cases)")
    if not args.cases and not args.backend:
        raise UsageError("--backend: give the backend whose call to sanitize, or --cases for every kernel")
    causal = None if args.cases else _validated_target(args)
    tools = args.tool or (sanitize_cases.DEFAULT_TOOLS if args.cases else ("memcheck",))
    for tool in tools:
        if tool not in sanitizer.SANITIZER_TOOLS:
            raise UsageError(f"--tool: expected one of {', '.join(sanitizer.SANITIZER_TOOLS)}, got {tool!r}")
    _check_outputs(args, "--out")
    status = profiling.tool_status("compute-sanitizer")
    if args.cases:
        from sagelib import backends

        reason = backends.get("cuda", require_available=False).unavailable_reason()
        if reason or not status.available:
            raise KernelUnavailable(f"--cases runs our CUDA kernels under compute-sanitizer: {reason or status.reason}")
        built, reports = sanitize_cases.sanitize_all(tools)
        if not built:
            print("sagelib profile sanitize: the cases failed outside the sanitizer (above); nothing sanitized",
                  file=sys.stderr)
            return 1
        target = "every kernel's small cases"
    else:
        if not status.available:
            raise KernelUnavailable(f"compute-sanitizer: {status.reason}")
        reports = [sanitizer.sanitize(_program(args, causal), tool) for tool in tools]
        target = f"{args.backend} {args.shape}"
    for report in reports:
        verdict = "clean" if report.clean else f"NOT clean: {report.reason}"
        print(f"compute-sanitizer {report.tool} on {target}: {verdict}")
    documents = [dataclasses.asdict(report) for report in reports]
    _write(args.out, documents[0] if len(documents) == 1 else documents)
    return 0 if all(report.clean for report in reports) else 1


def cmd_sm90(args) -> int:
    from sagelib.backends.kernels import sm90
    from sagelib.cuda.build import define_options
    from sagelib.inputs import parse_shape
    from sagelib.measure import sm90_trace
    from sagelib.measure.bench import parse_causal

    try:
        options = define_options(args.define)
        shape, causal = parse_shape(args.shape), parse_causal(args.causal)
    except ValueError as exc:
        raise UsageError(str(exc) if str(exc).startswith("--") else f"--{exc}") from None
    if shape.seq_q != shape.seq_kv or len(causal) != 1:
        raise UsageError(f"--shape/--causal: one B:H:N:D problem and no or yes, got {args.shape!r} and {args.causal!r}")
    if args.launches < 0 or args.seconds < 0:
        raise UsageError(f"--launches/--seconds: expected 0 or more, got {args.launches} and {args.seconds}")
    if args.cta_k not in (None, 64, 128):
        raise UsageError(f"--cta-k: expected 64 (the three-consumer geometry) or 128 (the preset's), got {args.cta_k}")
    if args.trace and args.seconds:
        raise UsageError("--trace records one warm launch; leave out --seconds (a steady load) or --trace")
    reason = sm90.unavailable_reason()
    if reason:
        raise KernelUnavailable(f"the Hopper kernel: {reason}")
    problem = sm90_trace.Problem(shape.batch, shape.heads, shape.seq_q, shape.head_dim, causal[0], options,
                                 args.cta_k, args.consumers, args.stages)
    if args.trace:
        print(sm90_trace.format_trace(sm90_trace.record_trace(problem)))
        return 0
    rate = sm90_trace.launch(problem, args.launches, args.seconds)
    if rate:
        print(rate)
    return 0


def cmd_launch_cases(args) -> int:
    from sagelib.measure import sanitize_cases

    return 1 if sanitize_cases.run_cases() else 0


def cmd_ptxas(args) -> int:
    from sagelib.measure import profiling

    _check_outputs(args, "--out")
    table = profiling.ptxas_table()
    if table["reason"] is not None:
        print(f"sagelib profile ptxas: not available: {table['reason']}", file=sys.stderr)
        _write(args.out, table)
        return 1
    for row in table["rows"]:
        print("  ".join(f"{k}={v}" for k, v in row.items()))
    _write(args.out, table)
    return 0


def cmd_stalls(args) -> int:
    import subprocess

    from sagelib.measure import ncu_source, profiling

    if args.top < 0:
        raise UsageError(f"--top: expected how many instructions to list (0 or more), got {args.top}")
    _check_outputs(args, "--out", "--csv")
    if args.from_csv:
        if args.backend:
            raise UsageError("--from-csv: summarises a CSV already written; leave out --backend (or --from-csv)")
        try:
            text = Path(args.from_csv).read_text(errors="replace")
        except OSError as exc:
            raise UsageError(f"--from-csv: cannot read {args.from_csv!r}: {exc.strerror}") from None
    else:
        if not args.backend:
            raise UsageError("--backend: give the backend to profile, or --from-csv FILE to summarise a CSV")
        causal = _validated_target(args)
        status = profiling.tool_status("ncu")
        if not status.available:
            raise KernelUnavailable(f"ncu: {status.reason}")
        argv = ncu_source.source_argv(status.path, _program(args, causal), kernel_regex=args.kernel)
        try:
            done = subprocess.run(argv, capture_output=True, text=True, cwd=profiling.REPO_ROOT,
                                  env=profiling.program_environment(), timeout=profiling.TIMEOUT_S)
        except subprocess.TimeoutExpired:
            print(f"sagelib profile stalls: ncu did not finish in {profiling.TIMEOUT_S} s; "
                  "profile a smaller --shape", file=sys.stderr)
            return 1
        text = done.stdout
        if args.csv:
            Path(args.csv).parent.mkdir(parents=True, exist_ok=True)
            Path(args.csv).write_text(text)
        if done.returncode != 0:
            print(f"sagelib profile stalls: ncu exited {done.returncode}: {(done.stderr or text)[-600:]}",
                  file=sys.stderr)
            return 1
    try:
        kernels = ncu_source.parse_source_csv(text)
    except ValueError as exc:
        print(f"sagelib profile stalls: {exc}", file=sys.stderr)
        return 1
    summaries = [ncu_source.summarize(name, lines, args.top) for name, lines in kernels.items()]
    print("\n\n".join(ncu_source.format_summary(s) for s in summaries))
    _write(args.out, [dataclasses.asdict(s) for s in summaries])
    return 0


def cmd_launch(args) -> int:
    from sagelib.measure.profiling import launch_once

    causal = _validated_target(args)
    print(launch_once(args.backend, args.shape, causal=causal, dtype=args.dtype, mode=args.mode,
                      layout=args.layout, warmup=args.warmup))
    return 0
