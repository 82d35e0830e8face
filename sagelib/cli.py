"""The ``sagelib`` command.

Each subcommand lives in its own module under ``sagelib/commands/`` and exposes
``register(subparsers)``; the module adds its parser and sets ``func`` (a
callable taking the parsed namespace and returning an exit code).
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from pathlib import Path

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


def input_file(flag: str, name: str, what: str) -> Path:
    """The file ``name`` given to ``flag``; UsageError saying it is missing or a folder, and to give ``what``."""
    path = Path(name)
    if not path.is_file():
        found = "a folder, not a file" if name and path.is_dir() else "no such file"
        raise UsageError(f"{flag} {name!r}: {found}; give {what}")
    return path


def file_in_folder(flag: str, name: str, what: str) -> Path:
    """The file ``name`` given to ``flag``, which the command may create but whose folder must exist already;
    UsageError saying it is a folder or its folder is missing, and to give ``what``."""
    path = Path(name)
    if path.is_dir() or not path.parent.is_dir():
        problem = "a folder, not a file" if path.is_dir() else f"its folder {str(path.parent)!r} does not exist"
        raise UsageError(f"{flag} {name!r}: {problem}; give {what}")
    return path


def output_file(flag: str, name: str) -> Path:
    """The file ``name`` given to ``flag``, checked before any work: not a folder, and its nearest existing
    folder is a writable folder (the command creates the folders below it), so no result is lost at the end."""
    path = Path(name)
    if path.is_dir():
        raise UsageError(f"{flag} {name!r}: a folder, not a file; give a file name such as {path / 'out.json'}")
    folder = path.parent
    while not folder.exists():
        folder = folder.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        problem = "a file, not a folder" if not folder.is_dir() else "not writable"
        raise UsageError(f"{flag} {name!r}: cannot write there, {str(folder)!r} is {problem}; "
                         "give a path in a writable folder")
    return path


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
        return 2
    try:
        return int(args.func(args) or 0)
    except (UsageError, ValueError, FileNotFoundError) as exc:
        print(f"sagelib {args.subcommand}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    raise SystemExit(main())
