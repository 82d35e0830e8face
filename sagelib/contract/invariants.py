"""Properties the contract must have, as checks a notebook can show.

Both are exact-arithmetic statements: with every stage exact, smoothing K and
the fp8 offset change nothing but rounding (max |difference| ~ 1e-15).
"""

from __future__ import annotations

from dataclasses import dataclass

from sagelib.contract.config import ContractConfig, Exact
from sagelib.contract.pipeline import run

#: float64 agreement that counts as "unchanged" (the differences are rounding only)
TOLERANCE = 1e-9


@dataclass(frozen=True)
class Invariant:
    name: str
    statement: str
    max_abs_difference: float

    @property
    def holds(self) -> bool:
        return self.max_abs_difference <= TOLERANCE


def _max_diff(q, k, v, a: ContractConfig, b: ContractConfig, layout: str, lse: bool) -> float:
    out_a, lse_a = run(q, k, v, a, layout=layout, return_lse=True)
    out_b, lse_b = run(q, k, v, b, layout=layout, return_lse=True)
    diff = float((out_a - out_b).abs().max())
    return max(diff, float((lse_a - lse_b).abs().max())) if lse else diff


def smoothing_invariance(q, k, v, layout: str = "HND") -> Invariant:
    base = ContractConfig(exact=Exact.everything())
    return Invariant(
        "K smoothing leaves the output unchanged",
        "softmax(q.(k - km)) = softmax(q.k): every score row moves by the constant q.km; "
        "the lse moves by sm_scale * q.km and is corrected",
        _max_diff(q, k, v, ContractConfig(exact=Exact.everything(), smooth_k=False), base, layout, lse=True),
    )


def offset_cancellation(q, k, v, layout: str = "HND") -> Invariant:
    base = ContractConfig(exact=Exact.everything())
    return Invariant(
        "the fp8 offset cancels",
        "P = exp2(s - (max - 8.807)) scales every P of a row and its l by 2**8.807; O / l and the lse do not move",
        _max_diff(q, k, v, ContractConfig(exact=Exact.everything(), fp8_offset=0.0), base, layout, lse=True),
    )
