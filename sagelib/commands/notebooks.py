"""``sagelib notebooks``: the workbook's notebooks as files for other tools.

    sagelib notebooks export                      # every notebook as outputs/notebooks/NN_name.ipynb
    sagelib notebooks export --only 00 --out DIR
    papermill outputs/notebooks/00_contract.ipynb out.ipynb -p n_tokens 1024   # from the repository root

The notebooks are kept as py:percent text files (``notebooks/NN_name.py``); papermill and nbconvert read only
.ipynb. ``export`` writes each as an .ipynb without outputs, its parameters cell tagged ``parameters`` with the
declared types papermill's ``--help-notebook`` shows. Run the exported file from the repository root (the
notebooks read ``data/`` and ``kernels/`` there); ``sagelib run`` does the same with profiles and reports.
"""

from __future__ import annotations

from pathlib import Path

from sagelib.commands.args import describe
from sagelib.errors import UsageError
from sagelib.run import notebooks

DEFAULT_EXPORT_DIR = Path("outputs") / "notebooks"


def register(subparsers) -> None:
    parser = subparsers.add_parser("notebooks", help="the notebooks as .ipynb files for papermill and nbconvert "
                                   "(export)", description=describe(__doc__))
    sub = parser.add_subparsers(dest="notebooks_command", metavar="ACTION")
    export = sub.add_parser("export", help="write each notebook as an .ipynb (no outputs) that papermill runs as it "
                            "is, e.g. papermill OUT/00_contract.ipynb run.ipynb -p n_tokens 1024")
    export.add_argument("--only", metavar="NAME", action="append",
                        help="only this notebook (00_contract, 00 or contract); repeatable")
    export.add_argument("--out", metavar="DIR", default=str(DEFAULT_EXPORT_DIR),
                        help=f"folder for the .ipynb files (default {DEFAULT_EXPORT_DIR}/)")
    export.add_argument("--notebooks", metavar="DIR", default=str(notebooks.NOTEBOOKS_DIR),
                        help="folder of NN_name.py notebooks (default: the repository's notebooks/)")
    export.set_defaults(func=cmd_export)
    parser.set_defaults(func=lambda args: parser.print_help() or 2)


def cmd_export(args) -> int:
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise UsageError(f"--out {args.out!r}: a file, not a folder; give a folder for the .ipynb files")
    try:
        paths = notebooks.select_notebooks(notebooks.discover_notebooks(args.notebooks), args.only)
        written = [notebooks.export_notebook(p, out) for p in paths]
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    for path in written:
        print(path)
    if not written:
        print(f"no notebooks in {args.notebooks} (files named NN_name.py)")
    return 0
