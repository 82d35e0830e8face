"""sagelib.errors and the exit codes of ``sagelib``: usage and input errors are told apart from failures and bugs."""

import pytest

from sagelib import cli, errors


def test_every_kind_derives_from_the_root_and_has_its_exit_code():
    assert errors.exit_code(errors.UsageError("x")) == errors.EXIT_USAGE == 2
    assert errors.exit_code(errors.InputError("x")) == 2
    assert errors.exit_code(errors.SchemaError("x")) == 2
    assert errors.exit_code(errors.LedgerError("x")) == 2
    assert errors.exit_code(errors.KernelUnavailable("x")) == errors.EXIT_UNAVAILABLE == 3
    assert errors.exit_code(errors.SagelibError("x")) == errors.EXIT_FAILURE == 1
    assert errors.exit_code(ValueError("a bug")) == 1
    # bad input stays catchable as the built-in ValueError, as the contract's own checks raise it
    assert issubclass(errors.InputError, ValueError) and issubclass(errors.SchemaError, ValueError)


def _command_raising(exc):
    def register(subparsers):
        parser = subparsers.add_parser("boom")
        parser.set_defaults(func=lambda args: (_ for _ in ()).throw(exc))
    return register


@pytest.fixture
def boom(monkeypatch):
    def install(exc):
        original = cli.build_parser

        def build_parser():
            parser = original()
            subparsers = next(a for a in parser._actions if a.dest == "subcommand")
            _command_raising(exc)(subparsers)
            return parser
        monkeypatch.setattr(cli, "build_parser", build_parser)
    return install


@pytest.mark.parametrize("exc, code", [(errors.UsageError("--x: give y"), 2), (errors.InputError("n: give 1"), 2),
                                       (errors.KernelUnavailable("no GPU"), 3), (errors.SagelibError("failed"), 1)])
def test_errors_raised_on_purpose_are_one_line_with_their_code(boom, capsys, exc, code):
    boom(exc)
    assert cli.main(["boom"]) == code
    assert capsys.readouterr().err == f"sagelib boom: error: {exc}\n"


def test_a_bug_is_not_reported_as_a_usage_error(boom):
    boom(ValueError("an internal inconsistency"))
    with pytest.raises(ValueError, match="internal inconsistency"):
        cli.main(["boom"])
