"""sagelib: a research workbook for 8-bit attention kernels.

``sagelib.attention`` is SDPA's call on our kernels and ``sagelib.sdpa_routed()`` routes a model's SDPA calls to it
(:mod:`sagelib.ops`; both load on first use, so ``import sagelib`` stays light).

Layers, lowest first (each imports only from those below it; tests/test_architecture.py holds them):
:mod:`sagelib.contract` (the numerics, pure torch) and :mod:`sagelib.inputs`; :mod:`sagelib.cuda` (the
loader: build, launch, check); :mod:`sagelib.records` (the log, inventory, environment, result documents);
:mod:`sagelib.backends` (one attention interface; our kernels' host code in ``backends/kernels``);
:mod:`sagelib.ops` (the ``sagelib::attention`` PyTorch op and the SDPA routing);
:mod:`sagelib.measure` (timing, parity, profiling, targets); :mod:`sagelib.studies` (the Phase 1 models and
the notebooks' helpers); :mod:`sagelib.run` (the papermill batch runner); :mod:`sagelib.commands` and
:mod:`sagelib.cli` (the ``sagelib`` command). :mod:`sagelib.errors` and :mod:`sagelib.paths` sit under all.
STATUS.md and docs/README.md are where a reader starts.
"""

__version__ = "0.1.0"


def __getattr__(name: str):
    if name in ("attention", "sdpa_routed"):
        from sagelib import ops

        return getattr(ops, name)
    raise AttributeError(f"module 'sagelib' has no attribute {name!r}")
