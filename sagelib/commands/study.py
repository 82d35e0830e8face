"""``sagelib study``: focused measurements behind the kernel notes, each answering one question on a GPU.

    sagelib study softmax                      # the softmax step alone at 1-4 warps per scheduler (sm_89+)
    sagelib study softmax --beside --out softmax-beside.json   # ... beside tensor-core work (sm_90)
    sagelib study softmax --beside --softmax-warpgroups 2      # two softmax warpgroups side by side
    sagelib study quant-breakdown --rounds 5 --out breakdown.json
    sagelib study ceilings --out ceilings.json # the card's GEMM and copy ceilings, and int8 with a row-major B

softmax: kernels/microbench_softmax.cu runs the Hopper kernel's softmax step (one 64 x 128 tile per
warpgroup) in a loop on one CTA per SM; --beside runs kernels/microbench_softmax_beside.cu
(sagelib.studies.softmax_beside). quant-breakdown: the cuda-sm90 call pass by pass against cuDNN's,
and what each fusion could save at most (sagelib.studies.quant_breakdown). --define NAME[=V]
builds the softmax kernels with an experiment's switch. Exit status: 0 when measured, 2 for bad
input, 3 when this machine lacks the GPU (or CuPy) the study needs.
"""

from __future__ import annotations

import shlex
import sys

from sagelib.commands.args import describe
from sagelib.errors import InputError, KernelUnavailable, UsageError


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "study", help="focused GPU studies: the softmax step alone and beside the tensor cores, the N1024 call "
                      "pass by pass, the card's ceilings",
        description=describe(__doc__))
    verbs = parser.add_subparsers(dest="study", metavar="STUDY")

    softmax = verbs.add_parser("softmax", help="cycles of the Hopper kernel's softmax step, alone or beside another "
                                               "warpgroup's tensor-core work")
    softmax.add_argument("--iters", type=int, default=2000, help="softmax steps per launch (default 2000)")
    softmax.add_argument("--beside", action="store_true",
                         help="the step beside another warpgroup's work (sm_90): what slows the softmax down")
    softmax.add_argument("--softmax-warpgroups", type=int, default=1, choices=(1, 2),
                         help="with --beside: softmax warpgroups side by side (2: two warps per scheduler)")
    softmax.add_argument("--define", action="append", default=[], metavar="MACRO=V",
                         help="a -D option for the kernel build (repeatable), e.g. SM90_ABLATE_PACK=1")
    softmax.add_argument("--out", metavar="FILE.json",
                         help="with --beside: write the rows (schema sagelib.softmax-beside/3)")
    softmax.set_defaults(func=cmd_softmax)

    breakdown = verbs.add_parser("quant-breakdown", help="the cuda-sm90 call pass by pass (sm_90, cuDNN) and the "
                                                         "most each fusion of a quantization pass could save")
    breakdown.add_argument("--shapes", default="32:32:1024:128,2:32:16384:128,2:32:16384:64", metavar="B:H:N:D,..",
                           help="default: B32 N1024 D128, B2 N16384 D128 and B2 N16384 D64")
    breakdown.add_argument("--rounds", type=int, default=5, help="rounds in rotated order (default 5)")
    breakdown.add_argument("--out", metavar="FILE.json", help="write the rows (schema sagelib.quant_breakdown/1)")
    breakdown.set_defaults(func=cmd_quant_breakdown)

    ceilings = verbs.add_parser("ceilings", help="the card's int8/fp8/bf16 GEMM and copy ceilings, and the int8 GEMM "
                                                 "with a row-major B beside them")
    ceilings.add_argument("--out", metavar="FILE.json", help="write the figures as JSON")
    ceilings.set_defaults(func=cmd_ceilings)
    parser.set_defaults(func=lambda args: (parser.print_help(), 2)[1])


def _command(prefix: str) -> str:
    """The command line as given, for a recording's provenance."""
    given = sys.argv[1:] if sys.argv[1:2] == ["study"] else []
    return " ".join(["sagelib", *map(shlex.quote, given)]) if given else prefix


def cmd_softmax(args) -> int:
    from sagelib.commands.args import output_file
    from sagelib.cuda.build import define_options
    from sagelib.studies import softmax_beside

    try:
        options = define_options(args.define)
    except InputError as exc:
        raise UsageError(str(exc)) from None
    if args.iters < 1:
        raise UsageError(f"--iters: expected at least 1 step, got {args.iters}")
    if not args.beside and (args.out or args.softmax_warpgroups != 1):
        raise UsageError("--out and --softmax-warpgroups go with --beside (the recorded study); add --beside")
    out = output_file("--out", args.out) if args.out else None
    if args.beside:
        from sagelib.backends.kernels import sm90

        reason = sm90.unavailable_reason()
        if reason:
            raise KernelUnavailable(f"--beside runs an sm_90a kernel: {reason}")
        import torch

        rows = softmax_beside.measure(args.iters, args.softmax_warpgroups, options)
        print(softmax_beside.format_beside(rows))
        if out:
            from sagelib.records import documents

            document = softmax_beside.beside_document(
                rows, iters=args.iters, softmax_warpgroups=args.softmax_warpgroups, options=options,
                command=_command("sagelib study softmax --beside"), gpu=torch.cuda.get_device_name(0))
            documents.write_json(document, out)
            print(f"sagelib study softmax: wrote {out}")
        return 0
    from sagelib import backends

    reason = backends.get("cuda", require_available=False).unavailable_reason()
    if reason:
        raise KernelUnavailable(f"the softmax microbenchmark runs one of our CUDA kernels: {reason}")
    print(softmax_beside.format_alone(softmax_beside.measure_alone(args.iters, options)))
    return 0


def cmd_quant_breakdown(args) -> int:
    from sagelib import inputs
    from sagelib.commands.args import output_file
    from sagelib.studies import quant_breakdown

    if args.rounds < 1:
        raise UsageError(f"--rounds: expected a whole number of 1 or more, got {args.rounds}")
    try:
        shapes = inputs.parse_shapes(args.shapes)
    except InputError as exc:
        raise UsageError(f"--shapes: {str(exc).split(': ', 1)[-1]}") from None
    out = output_file("--out", args.out) if args.out else None
    reason = quant_breakdown.unavailable_reason()
    if reason:
        raise KernelUnavailable(f"the breakdown times the cuda-sm90 and sdpa-cudnn backends: {reason}")
    rows = []
    for shape in shapes:
        row = quant_breakdown.measure(shape, args.rounds)
        print(quant_breakdown.format_table(row["shape"], quant_breakdown.PassTimes(**row["times_ms"])), flush=True)
        rows.append(row)
    if out:
        from sagelib.records import documents

        documents.write_json(quant_breakdown.document(rows, _command("sagelib study quant-breakdown")), out)
        print(f"sagelib study quant-breakdown: wrote {out}")
    return 0


def cmd_ceilings(args) -> int:
    from sagelib.commands.args import output_file

    out = output_file("--out", args.out) if args.out else None
    import torch

    if not torch.cuda.is_available():
        raise KernelUnavailable(f"the ceilings are the GPU's: torch {torch.__version__} sees no CUDA GPU here")
    from sagelib.measure.ceilings import (
        format_ceilings,
        int8_row_major_b,
        measure_ceilings,
    )

    device = torch.device("cuda")
    ceilings = measure_ceilings(device)
    print(format_ceilings(ceilings))
    row_major = int8_row_major_b(device)
    print(f"int8 torch._int_mm with row-major B: {row_major['tops']:.1f} TOPS "
          f"(median {row_major['stats']['median_ms']:.3f} ms)")
    if out:
        from sagelib.records import documents

        documents.write_json({"ceilings": ceilings, "int8_row_major_b_tops": row_major["tops"],
                                  "int8_row_major_b_stats": row_major["stats"]}, out)
        print(f"sagelib study ceilings: wrote {out}")
    return 0
