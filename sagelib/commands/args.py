"""Checks the subcommands share for the files their arguments name, made before any work starts."""

from __future__ import annotations

import os
import re
from pathlib import Path

from sagelib.errors import UsageError


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


_COMMAND_PREFIX = re.compile(r"^``sagelib [\w -]+``:\s*")


def describe(doc: str | None) -> str:
    """A subcommand's ``--help`` description from its module docstring: the first paragraph, without the
    ``sagelib NAME``: heading the docstring opens with, and without reST's double backticks."""
    first = (doc or "").strip().split("\n\n")[0]
    text = " ".join(_COMMAND_PREFIX.sub("", first).split()).replace("``", "`")
    return text[:1].upper() + text[1:]
