"""Every ``sagelib ... --help`` page, rendered as a user sees it: a description, no argparse placeholders, no
docstring markup, and no words only the project's own planning knows."""

from __future__ import annotations

import re

import pytest

from sagelib import cli
from sagelib.commands.args import describe


def _command_paths(parser=None, prefix=()):
    parser = parser or cli.build_parser()
    yield prefix, parser
    for name, _, sub in cli.subcommands(parser):
        yield from _command_paths(sub, (*prefix, name))


COMMANDS = [path for path, _ in _command_paths()]

#: words a reader of the help cannot know: planning references instead of what a thing measures
_INTERNAL = re.compile(r"\bissues?\s*\d|\bthe issues?'s?\b|\bopen issues\b|\bseq\s*\d|EXPERIMENT_LOG seq", re.I)


def _render(path, capsys) -> str:
    with pytest.raises(SystemExit) as done:
        cli.main([*path, "--help"])
    assert done.value.code == 0
    return capsys.readouterr().out


def _description(page: str) -> str:
    """The text between the usage block and the first section (``options:``, ``positional arguments:``)."""
    body = page.split("\n\n", 1)[1] if "\n\n" in page else ""
    return body.split("\n\n")[0] if not re.match(r"^\w[\w ]*:\n", body) else ""


def test_the_walk_reaches_every_level():
    assert () in COMMANDS and ("run",) in COMMANDS
    assert ("log", "import-prior") in COMMANDS and ("profile", "ncu") in COMMANDS
    assert len(COMMANDS) > 30


@pytest.mark.parametrize("path", COMMANDS, ids=lambda p: " ".join(p) or "sagelib")
def test_help_page_reads_as_plain_text(path, capsys):
    page = _render(path, capsys)
    name = " ".join(("sagelib", *path))
    assert page.startswith(f"usage: {name}"), page[:200]
    assert "SUPPRESS" not in page, f"{name} --help shows argparse's hidden-entry marker:\n{page}"
    assert "``" not in page, f"{name} --help shows reST markup:\n{page}"
    description = _description(page)
    assert description.strip(), f"{name} --help has no description under its usage line:\n{page}"
    assert not description.lstrip().startswith(("sagelib", "`sagelib")), (
        f"{name} --help opens its description with the command's own name:\n{description}")
    found = _INTERNAL.findall(page)
    assert not found, f"{name} --help names planning items ({found}) instead of what is measured:\n{page}"


def test_every_subcommand_is_listed_with_a_help_line_but_the_profilers_programs():
    unlisted, empty = [], []

    def walk(parser, prefix):
        for name, line, sub in cli.subcommands(parser):
            path = " ".join((*prefix, name))
            if line is None:
                unlisted.append(path)
            elif not line.strip():
                empty.append(path)
            walk(sub, (*prefix, name))

    walk(cli.build_parser(), ())
    assert not empty, f"subcommands listed with an empty help line: {empty}"
    assert sorted(unlisted) == ["profile launch", "profile launch-cases"], (
        f"only the programs the profilers launch may stay out of the lists; unlisted: {unlisted}")


def test_describe_drops_the_heading_and_markup():
    doc = '"""``sagelib run``: execute the ``notebooks``.\n\nMore text."""'.strip('"')
    assert describe(doc) == "Execute the `notebooks`."
    assert describe(None) == ""
    assert describe("plain first line\ncontinued\n\nrest") == "Plain first line continued"


def test_hidden_programs_stay_out_of_the_verb_list(capsys):
    page = _render(("profile",), capsys)
    verbs = page.split("positional arguments:")[1].split("options:")[0]
    names = re.findall(r"^    (\S+)", verbs, re.M)
    assert "ncu" in names and "sanitize" in names
    assert "launch" not in names and "launch-cases" not in names
