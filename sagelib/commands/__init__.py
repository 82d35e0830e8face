"""Subcommands of the `sagelib` command, one module each (see sagelib/cli.py)."""
