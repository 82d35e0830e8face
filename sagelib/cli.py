"""The ``sagelib`` command.

Each subcommand lives in its own module under ``sagelib/commands/`` and exposes
``register(subparsers)``; the module adds its parser and sets ``func`` (a
callable taking the parsed namespace and returning an exit code).
"""

from __future__ import annotations

import argparse
import importlib
import sys

# One module per subcommand, in the order `sagelib --help` lists them.
COMMAND_MODULES = (
    "sagelib.commands.run",
    "sagelib.commands.bench",
    "sagelib.commands.targets",
    "sagelib.commands.profile",
    "sagelib.commands.log",
    "sagelib.commands.inventory",
    "sagelib.commands.kernels",
)


class UsageError(Exception):
    """Bad input to a subcommand: printed as one clear line, exit code 2, no traceback."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="sagelib",
        description="Research workbook for 8-bit attention kernels.",
    )
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (UsageError, ValueError, FileNotFoundError) as exc:
        print(f"sagelib {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
