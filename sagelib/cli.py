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
    "sagelib.commands.notebooks",
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
        description="A workbook for 8-bit (SageAttention2-style) attention kernels: run the notebooks, time and "
                    "profile the CUDA kernels, keep the experiment log and the recorded results.",
        epilog="`sagelib COMMAND --help` explains one command. Exit status: 0 ok, 1 a failed check, "
               "2 bad input, 3 a tool or GPU this machine lacks.",
    )
    # dest is not "command": `sagelib inventory add --command` fills that one
    subparsers = parser.add_subparsers(dest="subcommand", metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    describe_subcommands(parser)
    return parser


def subcommands(parser: argparse.ArgumentParser):
    """``(name, help, parser)`` of each subcommand directly under ``parser``; help is None for an unlisted one."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name), sub


def describe_subcommands(parser: argparse.ArgumentParser) -> None:
    """Give every subcommand below ``parser`` a ``--help`` description: its own, else its one-line help."""
    for _, line, sub in subcommands(parser):
        if not sub.description and line:
            sub.description = line[:1].upper() + line[1:] + "."
        describe_subcommands(sub)


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
