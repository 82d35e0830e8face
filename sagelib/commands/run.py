"""``sagelib run``: execute the notebooks in batch (papermill) and write a run folder of HTML reports with an index.

    sagelib run                       # every notebook, the profile that fits this machine
    sagelib run --profile tiny        # small shapes, seconds per notebook
    sagelib run --only 00_contract -p n_tokens=1024
    sagelib run --only 00 -p n_tokens 1024 -y '{seq_sweep: [256, 1024]}'   # papermill's forms
    sagelib run --list                # notebooks, their parameters and profile values

Exit status: 0 when every notebook ran, 1 when one failed (each named with its
cell and error), 2 for bad input (nothing runs).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from sagelib.commands.args import describe, input_file
from sagelib.errors import UsageError
from sagelib.run import notebooks, parameters, runner


class _Formatter(argparse.HelpFormatter):
    """Shows ``-p NAME VALUE`` (one to two words: NAME=VALUE or NAME VALUE) instead of ``-p NAME [VALUE ...]``."""

    def _format_args(self, action, default_metavar):
        if action.dest == "params":
            return "NAME VALUE"
        return super()._format_args(action, default_metavar)


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "run", formatter_class=_Formatter,
        help="execute the notebooks (papermill) and write HTML reports and an index",
        description=describe(__doc__),
    )
    parser.add_argument("--profile", metavar="NAME",
                        help="parameter profile from notebooks/profiles.yaml: tiny, cpu or gpu "
                             "(default: gpu where torch sees CUDA, else cpu)")
    parser.add_argument("--only", metavar="NAME", action="append",
                        help="run only this notebook (00_contract, 00 or contract); repeatable")
    parser.add_argument("-p", "--param", "--parameters", metavar=("NAME", "VALUE"), nargs="+", action="append",
                        dest="params",
                        help="set a parameter of the selected notebooks, as papermill does (-p NAME VALUE) or as "
                             "-p NAME=VALUE; VALUE is a Python literal ([256, 1024], 1e-3, 'x'), true/false/null, or "
                             "plain text; checked against the type its notebook declares; repeatable")
    parser.add_argument("-r", "--parameters_raw", metavar=("NAME", "TEXT"), nargs=2, action="append", default=[],
                        dest="raw", help="set a text parameter to TEXT as given (papermill's -r); repeatable")
    parser.add_argument("-y", "--parameters_yaml", metavar="YAML", action="append", default=[], dest="yaml_texts",
                        help="parameters as a YAML mapping, e.g. -y '{n_tokens: 1024, seq_sweep: [256, 1024]}' "
                             "(papermill's -y); repeatable")
    parser.add_argument("-f", "--parameters_file", metavar="FILE", action="append", default=[], dest="files",
                        help="parameters from a YAML file of name: value lines (papermill's -f); repeatable")
    parser.add_argument("--out", metavar="DIR",
                        help="run folder (default: outputs/runs/<utc-time>-<profile>/)")
    parser.add_argument("--gpus", metavar="N|all",
                        help="run up to N notebooks at once, each on its own GPU of this host (CUDA_VISIBLE_DEVICES "
                             "per notebook; default: one after another, as before)")
    parser.add_argument("--list", action="store_true",
                        help="list the notebooks with their parameters and profile values, run nothing")
    parser.add_argument("--notebooks", metavar="DIR", default=str(notebooks.NOTEBOOKS_DIR),
                        help="folder of NN_name.py notebooks (default: the repository's notebooks/)")
    parser.add_argument("--profiles", metavar="FILE",
                        help="profiles file (default: profiles.yaml in the notebooks folder)")
    parser.add_argument("--no-progress", action="store_true", help="hide papermill's per-cell progress bar")
    parser.add_argument("--no-hopper", action="store_true",
                        help="switch the Hopper paths off (sets SAGELIB_HOPPER=off for the notebooks): the run a card "
                             "without wgmma and TMA gets (sm_89, sm_120, sm_121)")
    parser.set_defaults(func=main)


def main(args) -> int:
    gpus = None
    if args.gpus is not None and not args.list:  # checked before the plan, which makes the run folder
        from sagelib.measure.distribute import parse_gpus
        from sagelib.run.placement import visible_gpus

        gpus = visible_gpus(parse_gpus(args.gpus))
    notebooks_dir = Path(args.notebooks)
    profiles_path = notebooks_dir / parameters.PROFILES_FILE
    if args.profiles is not None:  # only the default may be absent (no profiles); a given file must exist
        profiles_path = input_file("--profiles", args.profiles, "a profiles YAML like notebooks/profiles.yaml, "
                                   "or leave --profiles out to use the one in the notebooks folder")
    if args.list:
        return list_notebooks(notebooks_dir, profiles_path, args.only, args.profile)
    from sagelib.cuda import features

    if args.no_hopper:
        features.switch_off()  # the notebooks' kernels inherit it
    features.hopper_switched_off()  # a malformed SAGELIB_HOPPER is refused before anything runs
    profile = args.profile or parameters.default_profile()
    try:
        overrides = parameters.collect_overrides(args.params, raw=args.raw, yaml_texts=args.yaml_texts,
                                                 files=args.files)
        plan = runner.plan_run(
            profile, only=args.only, overrides=overrides, out=args.out,
            notebooks_dir=notebooks_dir, profiles_path=profiles_path,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    print(f"sagelib run: {len(plan.notebooks)} notebook(s), {profile} profile, into {plan.folder}"
          + (f", side by side on GPU(s) {','.join(gpus)}" if gpus else ""))
    report = runner.execute_plan(plan, progress_bar=not args.no_progress and not gpus, gpus=gpus)
    for line in report.failures:
        print(f"sagelib run: FAILED {line}", file=sys.stderr)
    print(f"index: {report.index}")
    return 0 if report.ok else 1


def list_notebooks(notebooks_dir: Path, profiles_path: Path, only, profile: str | None = None) -> int:
    """Print each notebook's parameters: default, then the value of every profile (or of ``profile``)."""
    try:
        paths = notebooks.select_notebooks(notebooks.discover_notebooks(notebooks_dir), only)
        profiles = parameters.load_profiles(profiles_path)
        if profile is not None:
            profiles = {profile: parameters.get_profile(profiles, profile, profiles_path)}
        found = [notebooks.load_notebook(p) for p in paths]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if not found:
        print(f"no notebooks in {notebooks_dir} (files named NN_name.py)")
        return 0
    columns = ["parameter", "default", *profiles]
    for nb in found:
        rows = [[name, repr(default), *(_profile_cell(p, nb.name, name) for p in profiles.values())]
                for name, default in nb.parameters.items()]
        widths = [max(len(r[i]) for r in [columns, *rows]) for i in range(len(columns))]
        print(f"{nb.name}  ({nb.path})")
        for row in [columns, *rows]:
            print("  " + "  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip())
        print()
    timeouts = ", ".join(f"{p.name} {p.cell_timeout_s:g} s" for p in profiles.values())
    print(f"profiles from {profiles_path}; per-cell timeout: {timeouts or 'none'}; "
          "a blank profile value means the default is used")
    return 0


def _profile_cell(profile: parameters.Profile, notebook: str, parameter: str) -> str:
    if parameter == notebooks.OUTPUT_DIR_PARAMETER:
        return "(run folder)"
    values = profile.notebooks.get(notebook, {})
    return repr(values[parameter]) if parameter in values else ""
