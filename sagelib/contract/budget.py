"""The error budget: what each stage of the contract adds on its own.

Each row runs the pipeline with every stage exact except one and compares the
result with the float64 ground truth; the last row runs the kernel's arithmetic
throughout. The stages do not add linearly, so the full row is measured, not summed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from sagelib.contract import metrics
from sagelib.contract.config import ContractConfig, Exact
from sagelib.contract.pipeline import run
from sagelib.contract.reference import reference_attention

STAGE_LABELS = {
    "qk_int8": "Q, K to INT8",
    "p_fp8": "P to e4m3",
    "v_fp8": "V to e4m3",
    "pv_accum": "P.V inner accumulator",
    "float64_state": "fp32 scores and state",
    "output_rounding": "output to input dtype",
}


@dataclass(frozen=True)
class StageError:
    stage: str  #: an Exact field name, or "all" for the kernel's arithmetic throughout
    label: str
    error: metrics.ErrorReport


def error_budget(q, k, v, config: ContractConfig | None = None, layout: str = "HND",
                 reference=None) -> list[StageError]:
    """One StageError per stage (that stage alone inexact), then the full contract."""
    config = config or ContractConfig()
    if reference is None:
        reference = reference_attention(q, k, v, causal=config.causal, sm_scale=config.sm_scale, layout=layout,
                                        causal_alignment=config.causal_alignment)
    rows = []
    for stage in Exact.stage_names():
        out = run(q, k, v, replace(config, exact=Exact.all_but(stage)), layout=layout)
        rows.append(StageError(stage, STAGE_LABELS[stage], metrics.compare(out, reference)))
    out = run(q, k, v, replace(config, exact=Exact()), layout=layout)
    rows.append(StageError("all", "full contract", metrics.compare(out, reference)))
    return rows
