"""Bad input to the contract: each a ValueError naming the argument and the fix; nothing mutated."""

import pytest
import torch

from sagelib import contract


def good(nq=16, d=64, hq=2, hkv=2, dtype=torch.float16):
    return (torch.randn(1, hq, nq, d).to(dtype), torch.randn(1, hkv, nq, d).to(dtype),
            torch.randn(1, hkv, nq, d).to(dtype))


def raises(match, *args, **kwargs):
    with pytest.raises(ValueError, match=match):
        contract.attention(*args, **kwargs)


def test_wrong_dtype_names_the_tensor_and_the_conversion():
    q, k, v = good()
    raises(r"q: expected dtype torch.float16 or torch.bfloat16, got torch.float32.*q.half\(\)", q.float(), k, v)
    raises(r"k, v: expected the dtype of q", q, k.bfloat16(), v)


def test_device_mismatch_is_named(monkeypatch):
    q, k, v = good()
    meta_k = torch.empty(k.shape, dtype=k.dtype, device="meta")
    raises(r"k, v: expected the device of q .*\.to\(q\.device\)", q, meta_k, v, check_finite=False)


def test_bad_layout_string():
    raises(r"layout: expected 'HND'.*'NHD'.*got 'BHSD'", *good(), layout="BHSD")


def test_unsupported_head_dim_and_mismatched_head_dim():
    q, k, v = good(d=288)
    raises(r"head_dim: expected at most 256, got 288", q, k, v)
    q, k, v = good()
    raises(r"k: expected head_dim 64", q, k[..., :32].contiguous(), v[..., :32].contiguous())


def test_shape_mismatch_between_k_and_v():
    q, k, v = good()
    raises(r"v: expected the shape of k", q, k, v[:, :, :8].contiguous())


def test_gqa_heads_must_divide():
    q, k, v = good(hq=6, hkv=4)
    raises(r"kv heads \(4\) must divide the number of query heads \(6\)", q, k, v)


def test_non_contiguous_last_dim():
    q, k, v = good()
    raises(r"q: expected a contiguous last \(head_dim\) dimension.*q.contiguous\(\)", q.transpose(2, 3), k, v)


@pytest.mark.parametrize("bad", [float("nan"), float("inf")])
def test_nan_or_inf_input(bad):
    q, k, v = good()
    v[0, 0, 3, 5] = bad
    raises(r"v: contains 1 NaN or Inf value\(s\).*check_finite=False", q, k, v)


def test_options_and_choices_are_checked():
    raises(r"preset: expected one of \['sm90', 'sm89'\], got 'sm100'", *good(), preset="sm100")
    raises(r"granularity: expected one of", *good(), granularity="per_head")
    raises(r"pv_accum: expected one of", *good(), pv_accum="fp16")
    raises(r"options: unknown option\(s\) \['smoth_k'\]", *good(), smoth_k=True)
    raises(r"causal_alignment: expected one of", *good(), causal=True, causal_alignment="diagonal")
    raises(r"sm_scale: expected a positive finite number", *good(), sm_scale=-1.0)
    raises(r"smooth_v: only defined for the fp32 accumulation modes", *good(), pv_accum="fp32+fp16", smooth_v=True)
    with pytest.raises(ValueError, match=r"flavour: expected one of"):
        contract.quantize_qk(*good()[:2], flavour="numpy")
    raises(r"cta_k: expected None \(the preset's 128\) or a positive multiple of 16 keys, got 40", *good(), cta_k=40)
    raises(r"cta_k: expected None \(the preset's 64\)", *good(), preset="sm89", cta_k=0)


def test_wrong_rank_and_empty_sequences():
    q, k, v = good()
    raises(r"q: expected a 4-d tensor", q[0], k, v)
    raises(r"expected at least one token", q[:, :, :0], k, v)


def test_inputs_are_never_modified():
    q, k, v = good(nq=70)
    k = k + 3.0
    copies = [x.clone() for x in (q, k, v)]
    contract.attention(q, k, v, causal=True, return_lse=True)
    contract.quantize_qk(q, k)
    contract.quantize_v(v, preset="sm89", smooth_v=True)
    for before, after in zip(copies, (q, k, v)):
        assert torch.equal(before, after)
