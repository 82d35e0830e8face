"""``sagelib kernels``: look after the CUDA sources in ``kernels/`` without a GPU: compile them for every
architecture, fill the kernel cache, read and hash their machine code.

``sagelib kernels build`` fills the NVRTC kernel cache ahead of a run.
``sagelib kernels sass`` counts the instructions per exp2 of each attention kernel's exp pass
(nvcc and cuobjdump, no GPU needed).
``sagelib kernels fingerprint`` hashes the SASS of every instance the launcher builds, per architecture, and with
``--against FILE`` says which changed since a recorded set (a refactoring must leave them all identical).
``sagelib kernels check`` compiles every kernel for every target architecture
with nvcc (no GPU needed) and prints registers, spills, stack and shared memory
per kernel and architecture; it exits 1 when a target fails or a kernel spills
more than ``kernels/check_baseline.json`` allows.
"""

from __future__ import annotations

import json

from sagelib.commands.args import describe
from sagelib.errors import KernelUnavailable, UsageError


def register(subparsers) -> None:
    parser = subparsers.add_parser("kernels", help="the CUDA kernels without a GPU: check (ptxas report), "
                                   "build (NVRTC cache), sass (the exp pass), fingerprint (SASS hashes)",
                                   description=describe(__doc__))
    sub = parser.add_subparsers(dest="kernels_command", metavar="ACTION")
    check = sub.add_parser("check", help="compile every kernel for every architecture; fail on spills or errors")
    check.add_argument("--kernel", action="append", metavar="FILE.cu", help="only this kernel file (repeatable)")
    check.add_argument("--arch", action="append", metavar="sm_XX", help="only this architecture (repeatable)")
    check.add_argument("--jobs", type=int, default=2, help="parallel nvcc processes (default 2)")
    check.add_argument("--json", metavar="FILE", help="also write the full report as JSON")
    check.add_argument("--write-baseline", action="store_true",
                       help="record the current spills as accepted (kernels/check_baseline.json)")
    check.set_defaults(func=run_check_command)
    build = sub.add_parser("build", help="compile every kernel with NVRTC into the kernel cache (no GPU needed)")
    build.add_argument("--arch", action="append", metavar="sm_XX",
                       help="architecture preset (repeatable; default sm_90)")
    build.set_defaults(func=run_build_command)
    sass = sub.add_parser("sass", help="instructions per exp2 in each attention kernel's exp pass (nvcc, cuobjdump)")
    sass.add_argument("--kernel", action="append", metavar="FILE.cu",
                      help="only this kernel file (repeatable; attn_sm90.cu, attn_mma.cu)")
    sass.add_argument("--arch", action="append", metavar="sm_XX",
                      help="only this architecture (repeatable; default: sm_90a for attn_sm90.cu, sm_90 and sm_120a "
                           "for attn_mma.cu)")
    sass.add_argument("--option", action="append", metavar="-DNAME[=VALUE]",
                      help="an extra nvcc macro option, e.g. an experiment's switch (repeatable)")
    sass.add_argument("--compare", action="store_true",
                      help="with --option: also build without the options and print what they changed, per family")
    sass.add_argument("--jobs", type=int, default=2, help="parallel nvcc processes (default 2)")
    sass.add_argument("--json", metavar="FILE", help="also write the counts as JSON")
    sass.set_defaults(func=run_sass_command)
    fp = sub.add_parser("fingerprint", help="one sha256 of the SASS of each built instance per architecture "
                        "(nvcc, cuobjdump); --against a recorded set says which changed")
    fp.add_argument("--kernel", action="append", metavar="FILE.cu", help="only this kernel file (repeatable)")
    fp.add_argument("--arch", action="append", metavar="sm_XX", help="only this architecture (repeatable)")
    fp.add_argument("--jobs", type=int, default=2, help="parallel nvcc processes (default 2)")
    fp.add_argument("--json", metavar="FILE", help="write the fingerprints as JSON (to compare against later)")
    fp.add_argument("--against", metavar="FILE",
                    help="a --json file written before: print instance x arch identical or DIFFERENT; exit 1 unless "
                         "every one is identical")
    fp.set_defaults(func=run_fingerprint_command)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def _known(flag: str, given: list[str] | None, known, fix: str) -> None:
    """UsageError naming ``flag`` for the first value in ``given`` that is not in ``known``, before any work.

    The library says ``arch: expected one of ...`` (its keyword); on the command line the flag is named."""
    for value in given or ():
        if value not in known:
            raise UsageError(f"{flag}: expected one of {list(known)}, got {value!r}; {fix}")


def run_build_command(args) -> int:
    from sagelib.cuda.build import ARCH_PRESETS, BuildRequest, cache_dir, compile_cubin
    from sagelib.cuda.check import variant_suffix
    from sagelib.cuda.instances import INSTANCES, ONLY_ARCHS, builds

    _known("--arch", args.arch, ARCH_PRESETS,
           "give one of those presets (repeat --arch for several), or leave it out to build for sm_90")
    for arch in args.arch or ["sm_90"]:
        for file, names in INSTANCES.items():
            if arch not in ONLY_ARCHS.get(file, (arch,)):
                continue  # e.g. the wgmma kernels exist for sm_90a only
            for options in builds(file):
                for name in names:
                    built = compile_cubin(BuildRequest(file, (name,), arch, options))
                    print(f"{arch}  {name + variant_suffix(options):<40} "
                          f"{'cached' if built.from_cache else 'compiled'}")
    print(f"cache: {cache_dir()}")
    return 0


def run_check_command(args) -> int:
    from sagelib.commands.args import output_file
    from sagelib.cuda import check

    _known("--kernel", args.kernel, sorted(check.INSTANCES),
           "give one of those files (repeat --kernel for several), or leave it out to check every kernel")
    _known("--arch", args.arch, check.ARCH_PRESETS,
           "give one of those presets (repeat --arch for several), or leave it out to check every architecture")
    if args.jobs < 1:
        raise UsageError(f"--jobs: expected a positive number, got {args.jobs}")
    json_out = output_file("--json", args.json) if args.json else None  # checked before the long compile
    result = check.run_check(args.kernel, args.arch, jobs=args.jobs, baseline={} if args.write_baseline else None)
    print(check.format_table(result))
    if json_out:
        from sagelib.records import documents

        documents.write_json(check.to_json(result), json_out)
    if args.write_baseline:
        failed_targets = [t for t in result.targets if not t.ok]
        if failed_targets:
            print("not writing the baseline: some targets failed to compile")
            return 1
        document = check.baseline_document(result, previous=check.load_baseline())
        check.BASELINE_PATH.write_text(json.dumps(document, indent=2) + "\n")
        print(f"wrote {check.BASELINE_PATH}")
        return 0
    if result.failures:
        print("\nFAILED:")
        for f in result.failures:
            print(f"  {f}")
        return 1
    print(f"\nok: {sum(len(t.kernels) for t in result.targets)} kernels x archs compiled, no new spills")
    return 0


def run_sass_command(args) -> int:
    from sagelib.commands.args import output_file
    from sagelib.cuda import sass
    from sagelib.cuda.build import macro_options
    from sagelib.cuda.instances import ONLY_ARCHS

    _known("--kernel", args.kernel, sorted(sass.EXP_PASS_TARGETS),
           "give one of those files (repeat --kernel for several), or leave it out for both")
    _known("--arch", args.arch, sass.check.ARCH_PRESETS,
           "give one of those presets (repeat --arch for several), or leave it out for each file's defaults")
    try:
        options = macro_options(args.option or (), "--option", "--option=-DSM90_ABLATE_CVT=1")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.compare and not options:
        raise UsageError("--compare: compares a build with --option against the default one; give the experiment's "
                         "switch, e.g. --compare --option=-DSM90_ABLATE_CVT=1")
    if args.jobs < 1:
        raise UsageError(f"--jobs: expected a positive number, got {args.jobs}")
    targets = {}
    for file in args.kernel or sass.EXP_PASS_TARGETS:
        archs = tuple(a for a in args.arch if a in ONLY_ARCHS.get(file, (a,))) if args.arch \
            else sass.EXP_PASS_TARGETS[file]
        if archs:
            targets[file] = archs
    if not targets:
        raise UsageError(f"--arch: none of {args.arch} builds {args.kernel or sorted(sass.EXP_PASS_TARGETS)} "
                         f"(attn_sm90.cu is sm_90a only); add --arch sm_90a or another kernel")
    missing = sass.unavailable_reason()
    if missing:
        raise UsageError(f"the SASS table {missing}")
    json_out = output_file("--json", args.json) if args.json else None  # checked before the compile
    # with --compare the default build compiles beside the experiment's, in one pool
    mixes, *rest = sass.exp_pass_builds(targets, (options, ()) if args.compare else (options,), jobs=args.jobs)
    baseline = rest[0] if rest else None
    print(sass.format_table(mixes))
    if args.option:
        print(f"built with {' '.join(args.option)}")
    if baseline is not None:
        print("\n" + sass.format_change(baseline, mixes, options))
    if json_out:
        from sagelib.measure.profiling import tool_status
        from sagelib.records import documents
        from sagelib.records.datafile import utc_stamp

        document = sass.to_json(mixes, options, baseline)
        given = [f"--kernel {k}" for k in args.kernel or ()] + [f"--arch {a}" for a in args.arch or ()] \
            + [f"--option={o}" for o in args.option or ()] + (["--compare"] if args.compare else [])
        document |= {"created_utc": utc_stamp(), "command": " ".join(["sagelib kernels sass", *given]),
                     "toolchain": {"nvcc": tool_status("nvcc").version, "cuobjdump": sass.find_cuobjdump()}}
        documents.write_json(document, json_out)
    return 0


def run_fingerprint_command(args) -> int:
    from sagelib.commands.args import output_file
    from sagelib.cuda import sass

    _known("--kernel", args.kernel, sorted(sass.check.INSTANCES),
           "give one of those files (repeat --kernel for several), or leave it out for every kernel")
    _known("--arch", args.arch, sass.check.ARCH_PRESETS,
           "give one of those presets (repeat --arch for several), or leave it out for every architecture")
    if args.jobs < 1:
        raise UsageError(f"--jobs: expected a positive number, got {args.jobs}")
    before = None
    if args.against:
        try:
            before = json.loads(open(args.against).read())["fingerprints"]
        except (OSError, ValueError, KeyError) as exc:
            raise UsageError(f"--against: expected a file written by `sagelib kernels fingerprint --json`, "
                             f"got {args.against!r} ({exc})") from None
    json_out = output_file("--json", args.json) if args.json else None  # checked before the compile
    missing = sass.unavailable_reason()
    if missing:
        raise KernelUnavailable(f"the fingerprints {missing}")
    found = sass.fingerprints(args.kernel, args.arch, jobs=args.jobs)
    if json_out:
        from sagelib.measure.profiling import tool_status

        json_out.write_text(json.dumps({"schema": sass.FINGERPRINT_SCHEMA,
                                        "toolchain": {"nvcc": tool_status("nvcc").version,
                                                      "cuobjdump": sass.find_cuobjdump()},
                                        "fingerprints": found}, indent=1) + "\n")
    if before is None:
        for key, digest in found.items():
            print(f"{digest}  {key}")
        return 0
    if args.kernel or args.arch:  # a partial run compares only what it built
        before = {k: v for k, v in before.items() if k in found}
    table, ok = sass.compare_fingerprints(before, found)
    print(table)
    return 0 if ok else 1
