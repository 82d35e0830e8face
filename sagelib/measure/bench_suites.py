"""Named benches (``sagelib bench --suite NAME``): the runs whose documents ``sagelib targets`` and notebook 03 read.

``default`` is the bench recorded in ``data/results/*-bench-<tree>.json``: the device copy bandwidth and
the quantizers' bandwidth first (:mod:`sagelib.measure.quant_bench`), then our backends and the peers on the
issue's shapes, causal and not, end to end and kernel-only, in one ``sagelib.bench/1`` document with the
quantizer figures under ``quantizers`` (what :func:`sagelib.measure.targets.evaluate` reads the copy share
from). ``quick`` is the same on fewer shapes and repetitions; ``quant`` measures the quantizers alone and
writes their ``sagelib.quantizers/1`` document. These were ``scripts/bench_cuda.py`` (its default, --quick
and --quant-only), which recordings up to 2026-11-30 name.
"""

from __future__ import annotations

from dataclasses import dataclass

#: Every backend a full bench times; those that cannot run on the host are skipped, each with its reason.
SUITE_BACKENDS = ("cuda-sm90", "cuda-sm90-k64", "cuda", "cuda-per-warp-fp16", "sage2-sm90", "sage2-sm89",
                  "sage2-sm89-per-warp-fp16", "sage", "sdpa-flash", "sdpa-cudnn", "cudnn-fp8")


@dataclass(frozen=True)
class Suite:
    """What one named bench runs; the command's own flags override backends, shapes, causal, reps and budget."""

    help: str
    backends: tuple[str, ...] = SUITE_BACKENDS
    shapes: str = "2:32:16384:128,32:32:1024:128,2:32:16384:64"
    causal: str = "no,yes"
    reps: int = 20
    budget_s: float = 1.5
    attention: bool = True  #: False: the quantizers alone (their own document)


SUITES = {
    "default": Suite("our kernels, quantizers and the peers at B2 N16384 D128 and D64 and B32 N1024 D128, both causal modes: the bench `sagelib targets` reads"),
    "quick": Suite("the default suite on two shapes and 10 repetitions", shapes="2:32:16384:128,32:32:1024:128",
                   reps=10),
    "quant": Suite("the copy ceiling and the quantizers' bandwidth alone (sagelib.quantizers/1)", attention=False),
}


def suite(name: str) -> Suite:
    from sagelib.errors import InputError

    if name not in SUITES:
        raise InputError(f"--suite: expected one of {', '.join(SUITES)}, got {name!r}")
    return SUITES[name]


def with_quantizers(document: dict, quantizers: dict) -> dict:
    """The bench ``document`` with the quantizer figures of a ``sagelib.quantizers/1`` document under ``quantizers``,
    as a full bench records them."""
    return {**document, "quantizers": {"copy_tb_s": quantizers["copy_tb_s"], "rows": quantizers["rows"]}}
