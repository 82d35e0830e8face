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


@pytest.mark.parametrize("options, match", [
    ({"sm_scale": "0.125"}, r"sm_scale: expected a number or None, got str '0.125'.*float\('0.125'\)"),
    ({"sm_scale": True}, r"sm_scale: expected a number or None, got bool True"),
    ({"sm_scale": torch.tensor(0.1)}, r"sm_scale: expected a number or None, got Tensor.*\.item\(\)"),
    ({"causal": "False"}, r"causal: expected a bool \(True or False\), got str 'False'; pass causal=False"),
    ({"causal": 1}, r"causal: expected a bool \(True or False\), got int 1"),
    ({"return_lse": "no"}, r"return_lse: expected a bool \(True or False\), got str 'no'; pass return_lse=False"),
    ({"check_finite": "yes"}, r"check_finite: expected a bool"),
    ({"smooth_k": None}, r"smooth_k: expected a bool"),
    ({"cta_k": 64.0}, r"cta_k: expected an int or None, got float 64.0"),
])
def test_scalar_arguments_of_the_wrong_type_are_refused_by_name(options, match):
    """Text or a bool where a number belongs, text or an int where a bool belongs: never read through truthiness."""
    with pytest.raises(TypeError, match=match):  # a TypeError as in torch; a ValueError too (one except catches all)
        contract.attention(*good(), **options)
    raises(match, *good(), **options)


@pytest.mark.parametrize("options", [{"sm_scale": "0.125"}, {"causal": "False"}, {"return_lse": "no"},
                                     {"sm_scale": True}])
def test_the_float64_reference_checks_its_scalars_too(options):
    with pytest.raises(ValueError, match=next(iter(options))):
        contract.reference_attention(*good(), **options)


def test_numpy_numbers_and_bools_are_numbers_and_bools():
    np = pytest.importorskip("numpy")
    q, k, v = good()
    out = contract.attention(q, k, v, sm_scale=np.float32(0.125), causal=np.bool_(True))
    assert torch.equal(out, contract.attention(q, k, v, sm_scale=float(np.float32(0.125)), causal=True))


def test_meta_tensors_are_named_before_any_scan_of_values():
    q, k, v = good()
    meta = [torch.empty(x.shape, dtype=x.dtype, device="meta") for x in (q, k, v)]
    for check_finite in (True, False):
        raises(r"q: expected a tensor with data on cpu or cuda, got a meta tensor", *meta, check_finite=check_finite)


@pytest.mark.parametrize("which", [0, 1, 2])
def test_mixed_cpu_and_meta_is_a_device_mismatch_not_an_item_error(which):
    tensors = list(good())
    tensors[which] = torch.empty(tensors[which].shape, dtype=tensors[which].dtype, device="meta")
    raises(r"k, v: expected the device of q \((cpu|meta)\).*\.to\(q\.device\)", *tensors)


def test_backends_check_scalars_before_touching_a_tensor():
    from sagelib.backends.sdpa import SdpaBackend

    q, k, v = good()
    with pytest.raises(ValueError, match=r"causal: expected a bool.*got str 'False'"):
        SdpaBackend("sdpa-flash").attention(q, k, v, causal="False")
    with pytest.raises(ValueError, match=r"sm_scale: expected a number or None, got str"):
        SdpaBackend("sdpa-cudnn").attention(q, k, v, sm_scale="0.125")


def test_kernel_wrappers_check_scalars_before_quantizing():
    from sagelib.backends.kernels import mma

    q, k, v = good()
    with pytest.raises(ValueError, match=r"return_lse: expected a bool"):
        mma.attention(q, k, v, return_lse="no")
    with pytest.raises(ValueError, match=r"causal: expected a bool"):
        mma.prepare(q, k, v, causal="False")
