"""``sagelib gpu-run``: the whole workbook on a GPU host in one call, packed to carry back, and kept as recordings.

    sagelib gpu-run                                # on the GPU host: every notebook, gpu profile, into /tmp/sagelib-gpu-run
    sagelib gpu-run --wheelhouse .whl --out OUT    # install the carried notebook stack first if the image lacks it
    sagelib gpu-run --record gpu-run-abc1234       # ... and keep the run in data/results there
    sagelib gpu-run --no-hopper                    # the run a card without wgmma and TMA gets (SAGELIB_HOPPER=off)
    sagelib gpu-run --from RUN_DIR --record gpu-run-abc1234 --command "sagelib gpu-run" --annotation "..."
                                                   # back home: keep a fetched run folder (OUT/run) as recordings

OUT gets run/ (the run folder), run.tgz (it, packed), run.log (the run's output) and gpu.txt (the card,
the exit status and time, whether the wgmma microbenchmark issues wgmma). A recording is never
overwritten; add each to the inventory afterwards (`sagelib inventory add PATH --kind timing|profiler_report
--command ... --environment RUN_DIR/environment.json`). Exit status: the notebooks' run's (0 all ran, 1 one
failed), 2 for bad input, 3 without a CUDA GPU.
"""

from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path

from sagelib.commands.args import describe
from sagelib.errors import InputError, KernelUnavailable, UsageError

DEFAULT_OUT = "/tmp/sagelib-gpu-run"


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "gpu-run", help="every notebook on a GPU host (gpu profile), packed to carry back; --record keeps a run in "
                        "data/results", description=describe(__doc__))
    parser.add_argument("--out", metavar="DIR", default=DEFAULT_OUT,
                        help=f"folder for run/, run.tgz, run.log and gpu.txt (default {DEFAULT_OUT})")
    parser.add_argument("--wheelhouse", metavar="DIR",
                        help="install the notebook stack from this folder of wheels (scripts/build_wheelhouse.sh) "
                             "when it does not import; default .whl when that folder exists")
    parser.add_argument("--only", metavar="NAME", action="append", default=[],
                        help="run only this notebook (as `sagelib run --only`); repeatable")
    parser.add_argument("--record", metavar="STEM",
                        help="keep the run as data/results/<date>-<card>-STEM[-performance|-ncu].json")
    parser.add_argument("--from", dest="source", metavar="RUN_DIR",
                        help="record this fetched run folder instead of running (needs --record and --command)")
    parser.add_argument("--command", metavar="TEXT",
                        help="with --from: the command that produced the run, kept in every recording")
    parser.add_argument("--annotation", metavar="TEXT", action="append", default=[],
                        help="a note kept with every recording (repeatable)")
    parser.add_argument("--results", metavar="DIR", help="where recordings go (default data/results)")
    parser.add_argument("--no-hopper", action="store_true",
                        help="switch the Hopper paths off (SAGELIB_HOPPER=off for the run): what a card without "
                             "wgmma and TMA gets, proved on an sm_90 GPU")
    parser.set_defaults(func=main)


def main(args) -> int:
    from sagelib.run import gpu_run

    if args.record is not None and (not args.record.strip() or "/" in args.record):
        raise UsageError(f"--record {args.record!r}: expected a file stem such as gpu-run-abc1234 (no folder)")
    if args.source is not None:
        if args.record is None or args.command is None:
            raise UsageError("--from: records a fetched run folder; give --record STEM and --command TEXT (the "
                             "command that produced it), e.g. --record gpu-run-abc1234 --command 'sagelib gpu-run'")
        if args.only or args.wheelhouse or args.no_hopper:
            raise UsageError("--from records a run already made; --only and --wheelhouse go with a run, as does "
                             "--no-hopper; leave them out")
        return _record(gpu_run, Path(args.source), args.command, args)
    if args.command is not None:
        raise UsageError("--command names the command of a fetched run (--from); a run here records its own")
    wheelhouse = Path(args.wheelhouse) if args.wheelhouse else Path(".whl") if Path(".whl").is_dir() else None
    if wheelhouse is not None and not wheelhouse.is_dir():
        raise UsageError(f"--wheelhouse {args.wheelhouse!r}: no such folder; give the folder of wheels "
                         "scripts/build_wheelhouse.sh made")
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {args.out!r}: a file, not a folder; give a folder for the run")
    import torch

    if not torch.cuda.is_available():
        raise KernelUnavailable(f"gpu-run runs the gpu profile: torch {torch.__version__} sees no CUDA GPU here; "
                                "`sagelib run --profile cpu` runs the workbook without one")
    from sagelib import paths
    from sagelib.cuda import features
    from sagelib.cuda.build import cache_dir

    env = dict(os.environ, PYTHONUNBUFFERED="1")
    if args.no_hopper:
        features.switch_off(env)  # the run's child and its notebooks inherit it
    features.hopper_switched_off(env)  # a malformed SAGELIB_HOPPER is refused (UsageError) before anything runs
    env.setdefault("SAGELIB_KERNEL_CACHE", str(paths.REPO_ROOT / "build" / "kernel_cache"))
    os.environ["SAGELIB_KERNEL_CACHE"] = env["SAGELIB_KERNEL_CACHE"]
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(paths.REPO_ROOT), env.get("PYTHONPATH")]))
    if wheelhouse is not None:
        try:
            print(gpu_run.install_wheelhouse(wheelhouse, env))
        except InputError as exc:
            raise UsageError(str(exc)) from None
    out.mkdir(parents=True, exist_ok=True)
    run_dir = out / "run"
    if run_dir.exists():
        import shutil

        shutil.rmtree(run_dir)
    summary = [gpu_run.gpu_line()]
    if features.hopper_switched_off(env):
        summary.append(f"Hopper paths: off ({features.HOPPER_SETTING}=off)")
    start = time.monotonic()
    status = gpu_run.run_notebooks(run_dir, out / "run.log", env, args.only)
    summary.append(f"sagelib run --profile gpu: exit {status} in {time.monotonic() - start:.0f} s")
    summary += gpu_run.wgmma_sass_lines(cache_dir())
    (out / "gpu.txt").write_text("\n".join(summary) + "\n")
    print("\n".join(summary))
    if run_dir.is_dir():
        print(f"packed: {gpu_run.pack(run_dir, out / 'run.tgz')}")
    if args.record is not None and (run_dir / "run.json").is_file():
        given = sys.argv[1:] if sys.argv[1:2] == ["gpu-run"] else ["gpu-run"]
        _record(gpu_run, run_dir, " ".join(["sagelib", *map(shlex.quote, given)]), args)
    return status


def _record(gpu_run, run_dir: Path, command: str, args) -> int:
    try:
        written = gpu_run.record(run_dir, args.record, command, args.annotation, args.results)
    except InputError as exc:
        raise UsageError(str(exc)) from None
    for path in written:
        print(f"recorded {path}")
    return 0
