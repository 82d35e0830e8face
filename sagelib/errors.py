"""The errors sagelib raises on purpose, and the exit code the ``sagelib`` command gives each.

Every error a user can cause or a record can carry derives from :class:`SagelibError`; anything
else that escapes a command is a bug and shows its traceback. Exit codes::

    0  done
    1  a failure the command exists to report (a notebook failed, a log or inventory check failed)
    2  the command or its input (an argument, a file it reads) was wrong: nothing was written; the message
       says the fix
    3  what the command needs is not here (no CUDA GPU, no CuPy, a tool or an architecture missing)

The contract (``sagelib.contract``) imports nothing outside itself, so it raises the built-in
``ValueError`` and ``TypeError`` for bad input, as torch does; :class:`InputError` is a
``ValueError`` too, so one ``except ValueError`` catches bad input from either layer.
"""

from __future__ import annotations

EXIT_OK, EXIT_FAILURE, EXIT_USAGE, EXIT_UNAVAILABLE = 0, 1, 2, 3


class SagelibError(Exception):
    """The root of the errors sagelib raises on purpose."""

    exit_code = EXIT_FAILURE


class UsageError(SagelibError):
    """A command line that cannot run as given: one clear line, no traceback."""

    exit_code = EXIT_USAGE


class InputError(SagelibError, ValueError):
    """A value given to a function or a parameter is wrong; the message names the argument and the fix."""

    exit_code = EXIT_USAGE


class KernelUnavailable(SagelibError, RuntimeError):
    """A kernel, backend or tool cannot run on this machine (no GPU, no CuPy, another architecture)."""

    exit_code = EXIT_UNAVAILABLE


class SchemaError(SagelibError, ValueError):
    """A committed or recorded document does not hold what its schema says (the message points at the place).

    Exit code 2, like any other input the command cannot use: nothing was written, and the message says the fix.
    """

    exit_code = EXIT_USAGE


class LedgerError(SchemaError):
    """The experiment log is broken, tampered with or refuses an entry (its reopening rules)."""


def exit_code(exc: BaseException) -> int:
    """The exit code for an error raised on purpose (:class:`SagelibError`), EXIT_FAILURE for anything else."""
    return getattr(exc, "exit_code", EXIT_FAILURE) if isinstance(exc, SagelibError) else EXIT_FAILURE
