"""sagelib: a research workbook for 8-bit attention kernels.

The numerical contract lives in :mod:`sagelib.contract`; kernels are built by
:mod:`sagelib.cuda` and reached through :mod:`sagelib.backends`; notebooks are
run in batch by :mod:`sagelib.run.runner` (``sagelib run``).
"""

__version__ = "0.1.0"
