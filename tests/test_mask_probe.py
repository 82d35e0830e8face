"""No hidden key ever contributes, at any input magnitude (the contract here; the kernels in the GPU tests)."""

import pytest
import torch

from sagelib import contract
from sagelib.contract import metrics
from sagelib.contract import presets as P
from sagelib.measure import mask_probe


def causal_contract(q, k, v):
    return contract.attention(q, k, v, causal=True)


def test_the_contract_never_attends_to_a_hidden_key_up_to_the_dtype_limits():
    rows = mask_probe.probe(causal_contract, n=128)
    assert {r.dtype for r in rows} == {"float16", "bfloat16"}
    assert max(mask_probe.REFUSED[torch.float16]) == torch.finfo(torch.float16).max  # the rest is refused
    bad = [r for r in rows if r.leak != 0.0 or not r.finite]
    assert not bad, bad


@pytest.mark.parametrize("dtype", list(mask_probe.REFUSED))
def test_magnitudes_up_to_the_dtype_limit_beyond_the_score_limit_are_refused(dtype):
    for magnitude in mask_probe.REFUSED[dtype]:
        q, k, v = mask_probe.hidden_key_inputs(64, 64, magnitude, dtype)
        with pytest.raises(ValueError, match="q, k, sm_scale: scores could reach"):
            causal_contract(q, k, v)


def test_the_probe_sees_a_finite_sentinel_that_real_scores_undercut(monkeypatch):
    monkeypatch.setattr(P, "MASK_SCORE", -5.0e6)
    monkeypatch.setattr(P, "INITIAL_ROW_MAX", -5.0e6)
    rows = mask_probe.probe(causal_contract, n=64, head_dims=(64,),
                            magnitudes={torch.float16: (1.0, 1000.0)})
    assert [r.leak for r in rows] == [0.0, 1.0]


def test_scores_all_below_minus_5e6_still_give_softmax_attention():
    q = torch.full((1, 1, 16, 64), 200.0).half()
    k = torch.full((1, 1, 16, 64), -200.0).half()
    v = torch.randn(1, 1, 16, 64, generator=torch.Generator().manual_seed(1)).half()
    out = contract.attention(q, k, v, smooth_k=False)
    exact = contract.reference_attention(q, k, v)
    assert torch.isfinite(out).all()
    assert metrics.relative_l1(out, exact) < 0.05  # equal scores: the mean of V, within e4m3's error


@pytest.mark.parametrize("check_finite", [True, False])
def test_scores_beyond_float32_are_refused_with_the_arguments_named(check_finite):
    q = torch.full((1, 1, 8, 64), 1e19).bfloat16()
    with pytest.raises(ValueError, match="q, k, sm_scale: scores"):
        contract.attention(q, q, q, sm_scale=1e38, check_finite=check_finite)


def test_the_probe_wants_an_even_number_of_tokens():
    with pytest.raises(ValueError, match="n: expected an even number"):
        mask_probe.hidden_key_inputs(7, 64, 1.0, torch.float16)
