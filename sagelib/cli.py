"""The ``sagelib`` command: it only dispatches.

Each subcommand lives in its own module under ``sagelib/commands/`` and exposes
``register(subparsers)``; the module adds its parser and sets ``func`` (a
callable taking the parsed namespace and returning an exit code). An error
raised on purpose (:class:`sagelib.errors.SagelibError`) is printed as one line
and exits with its code (2 for usage and input, 3 for what this machine lacks,
1 for a failed check); anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from sagelib.errors import EXIT_USAGE, SagelibError, exit_code

# One module per subcommand, in the order `sagelib --help` lists them.
COMMAND_MODULES = (
    "sagelib.commands.run",
    "sagelib.commands.gpu_run",
    "sagelib.commands.bench",
    "sagelib.commands.targets",
    "sagelib.commands.parity",
    "sagelib.commands.profile",
    "sagelib.commands.log",
    "sagelib.commands.inventory",
    "sagelib.commands.kernels",
    "sagelib.commands.sweep",
    "sagelib.commands.parity_grid",
    "sagelib.commands.study",
    "sagelib.commands.ab",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sagelib",
        description="Research workbook for 8-bit attention kernels.",
    )
    # dest is not "command": `sagelib inventory add --command` fills that one
    subparsers = parser.add_subparsers(dest="subcommand", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args.func(args) or 0)
    except SagelibError as exc:
        print(f"sagelib {args.subcommand}: error: {exc}", file=sys.stderr)
        return exit_code(exc)


if __name__ == "__main__":
    raise SystemExit(main())
