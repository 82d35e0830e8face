"""Stages 3-7 of the contract: traversal, online softmax, fp8, accumulation, lse, layouts.

The float64 path (every stage exact) is checked against a naive per-row loop
written here; the kernel arithmetic is checked for properties that hold by
construction (invariances, bit-identity across layouts and GQA expansion) and
for accuracy against float64.
"""

import math

import pytest
import torch

from sagelib import contract
from sagelib.contract import metrics
from sagelib.contract import presets as P
from sagelib.contract.fp8 import round_e4m3, round_e4m3_arithmetic, truncate_fp22

EXACT = contract.Exact.everything()


def qkv(b=1, hq=2, hkv=None, nq=64, nkv=None, d=64, dtype=torch.float16, seed=0, k_bias=0.0):
    g = torch.Generator().manual_seed(seed)
    hkv, nkv = hkv or hq, nkv or nq
    q = torch.randn(b, hq, nq, d, generator=g).to(dtype)
    k = (torch.randn(b, hkv, nkv, d, generator=g) + k_bias * torch.randn(b, hkv, 1, d, generator=g)).to(dtype)
    v = torch.randn(b, hkv, nkv, d, generator=g).to(dtype)
    return q, k, v


def naive_attention(q, k, v, causal, alignment):
    """Row by row, float64, straight from the definition."""
    b, hq, nq, d = q.shape
    hkv, nkv = k.shape[1], k.shape[2]
    out = torch.zeros(b, hq, nq, d, dtype=torch.float64)
    for bi in range(b):
        for h in range(hq):
            kv = h // (hq // hkv)
            for i in range(nq):
                last = nkv - 1
                if causal:
                    last = i + (nkv - nq if alignment == "bottom_right" else 0)
                if last < 0:
                    continue
                keys = k[bi, kv, : last + 1].double()
                w = torch.softmax(keys @ q[bi, h, i].double() / math.sqrt(d), dim=0)
                out[bi, h, i] = w @ v[bi, kv, : last + 1].double()
    return out


@pytest.mark.parametrize(
    "nq,nkv,causal,alignment",
    [(1, 1, False, "bottom_right"), (17, 17, True, "top_left"), (40, 150, True, "bottom_right"),
     (40, 150, True, "top_left"), (150, 40, True, "bottom_right"), (130, 130, False, "bottom_right")],
)
def test_exact_pipeline_is_softmax_attention(nq, nkv, causal, alignment):
    q, k, v = qkv(hq=4, hkv=2, nq=nq, nkv=nkv, d=32, seed=nq + nkv)
    want = naive_attention(q, k, v, causal, alignment)
    got = contract.attention(q, k, v, causal=causal, causal_alignment=alignment, exact=EXACT)
    ref = contract.reference_attention(q, k, v, causal=causal, causal_alignment=alignment)
    assert got.dtype == torch.float64
    torch.testing.assert_close(got, want, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(ref, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("preset", ["sm90", "sm89"])
def test_k_smoothing_leaves_the_exact_output_unchanged(preset):
    q, k, v = qkv(nq=100, nkv=300, k_bias=6.0)
    a = contract.attention(q, k, v, preset=preset, exact=EXACT, smooth_k=True)
    b = contract.attention(q, k, v, preset=preset, exact=EXACT, smooth_k=False)
    torch.testing.assert_close(a, b, rtol=1e-11, atol=1e-13)


def test_k_smoothing_rescues_int8_from_channel_outliers():
    q, k, v = qkv(hq=2, nq=256, nkv=512, k_bias=16.0, seed=5)
    ref = contract.reference_attention(q, k, v)
    smooth = metrics.relative_l1(contract.attention(q, k, v, smooth_k=True), ref)
    raw = metrics.relative_l1(contract.attention(q, k, v, smooth_k=False), ref)
    assert smooth < 0.5 * raw


def test_fp8_offset_cancels():
    q, k, v = qkv(nq=90, nkv=200, seed=7)
    with_offset, lse_a = contract.attention(q, k, v, exact=EXACT, return_lse=True)
    without, lse_b = contract.attention(q, k, v, exact=EXACT, return_lse=True, fp8_offset=0.0)
    torch.testing.assert_close(with_offset, without, rtol=1e-12, atol=1e-13)
    torch.testing.assert_close(lse_a, lse_b, rtol=1e-12, atol=1e-12)


def test_offset_puts_the_row_max_at_448_so_fp8_p_never_saturates():
    s = torch.tensor([[3.0, 1.0, -2.0]])
    m = s.amax(dim=-1) - P.FP8_OFFSET
    p = torch.exp2(s - m.unsqueeze(-1))
    assert 447.0 < float(p.max()) <= P.E4M3_MAX


def test_nhd_equals_hnd_bit_for_bit():
    q, k, v = qkv(hq=4, hkv=2, nq=77, nkv=200, seed=9)
    hnd, lse_h = contract.attention(q, k, v, causal=True, return_lse=True)
    t = lambda x: x.transpose(1, 2).contiguous()  # noqa: E731
    nhd, lse_n = contract.attention(t(q), t(k), t(v), causal=True, layout="NHD", return_lse=True)
    assert torch.equal(nhd.transpose(1, 2), hnd) and torch.equal(lse_h, lse_n)


def test_gqa_equals_repeated_kv_heads_bit_for_bit():
    q, k, v = qkv(hq=6, hkv=2, nq=50, nkv=130, seed=11)
    gqa = contract.attention(q, k, v)
    rep = contract.attention(q, k.repeat_interleave(3, dim=1), v.repeat_interleave(3, dim=1))
    assert torch.equal(gqa, rep)


@pytest.mark.parametrize("n", [1, 17, 129, 1000])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_ragged_lengths_stay_accurate(n, dtype):
    q, k, v = qkv(nq=n, nkv=n, dtype=dtype, seed=n, k_bias=2.0)
    out = contract.attention(q, k, v)
    assert out.dtype == dtype and out.shape == q.shape
    err = metrics.compare(out, contract.reference_attention(q, k, v))
    assert err.cosine > 0.998 and err.relative_l1 < 0.06


@pytest.mark.parametrize("pv_accum", ["fp32", "fp32+fp32", "fp32+fp16"])
@pytest.mark.parametrize("preset,gran", [("sm90", "per_thread"), ("sm89", "per_warp"), ("sm89", "per_block")])
def test_every_configuration_is_close_to_float64(pv_accum, preset, gran):
    q, k, v = qkv(hq=2, nq=200, nkv=300, k_bias=3.0, seed=13)
    out = contract.attention(q, k, v, causal=True, preset=preset, granularity=gran, pv_accum=pv_accum)
    err = metrics.compare(out, contract.reference_attention(q, k, v, causal=True))
    assert err.cosine > 0.998


def test_lse_matches_float64_with_the_smoothing_correction():
    q, k, v = qkv(hq=2, nq=100, nkv=260, k_bias=4.0, seed=17)
    _, want = contract.reference_attention(q, k, v, return_lse=True)
    _, exact = contract.attention(q, k, v, exact=EXACT, return_lse=True)
    torch.testing.assert_close(exact, want, rtol=1e-10, atol=1e-10)
    for correction in ("fp32", "input_dtype"):
        _, got = contract.attention(q, k, v, return_lse=True, lse_correction=correction)
        assert got.dtype == torch.float32 and got.shape == (1, 2, 100)
        assert (got.double() - want).abs().max() < 5e-3
    _, unsmoothed = contract.attention(q, k, v, exact=EXACT, return_lse=True, smooth_k=False)
    torch.testing.assert_close(unsmoothed, want, rtol=1e-10, atol=1e-10)  # no correction without smoothing


def test_rows_that_see_no_key_give_zero_and_minus_inf_lse():
    q, k, v = qkv(nq=20, nkv=5, seed=19)
    out, lse = contract.attention(q, k, v, causal=True, return_lse=True)
    assert torch.all(out[:, :, :15] == 0) and torch.all(torch.isneginf(lse[:, :, :15]))
    assert torch.isfinite(lse[:, :, 15:]).all()


def test_two_level_accumulation_beats_one_level_as_n_grows():
    q, k, v = qkv(b=1, hq=1, nq=64, nkv=8192, d=64, seed=23)
    ref = contract.reference_attention(q, k, v)
    only_accumulator = contract.Exact.all_but("pv_accum")  # every other stage exact
    errors = {mode: metrics.relative_l1(contract.attention(q, k, v, pv_accum=mode, exact=only_accumulator), ref)
              for mode in ("fp32", "fp32+fp32")}
    # one FP22 accumulator loses ~2**-13 relative per step on a growing sum; flushing every block bounds it
    assert errors["fp32+fp32"] < errors["fp32"] / 5


def test_traversal_block_override():
    """cta_k=None is the preset's block; the preset's own value changes no bit; another value
    changes the rounding (P's scale, the accumulator's span) and still lands near float64."""
    q, k, v = qkv(nq=300, nkv=300, seed=5, k_bias=2.0)
    ref = contract.reference_attention(q, k, v)
    base = contract.attention(q, k, v, preset="sm90")
    assert torch.equal(contract.attention(q, k, v, preset="sm90", cta_k=128), base)
    stepped = contract.attention(q, k, v, preset="sm90", cta_k=64)
    assert not torch.equal(stepped, base)
    assert metrics.relative_l1(stepped, ref) < 1.05 * metrics.relative_l1(base, ref)
    # every stage exact: the traversal block cannot matter at all
    assert torch.allclose(contract.attention(q, k, v, cta_k=32, exact=EXACT).double(), ref.double(), atol=2e-3)


@pytest.mark.parametrize("d,padded", [(32, 64), (96, 128), (200, 256), (256, 256)])
def test_head_dims_are_zero_padded_and_sliced_back(d, padded):
    assert contract.padded_head_dim(d) == padded
    q, k, v = qkv(nq=40, nkv=70, d=d, seed=d)
    out = contract.attention(q, k, v)
    assert out.shape == q.shape
    assert metrics.compare(out, contract.reference_attention(q, k, v)).cosine > 0.998


def test_error_budget_has_every_stage_and_the_full_contract():
    q, k, v = qkv(nq=128, nkv=256, k_bias=3.0, seed=29)
    rows = contract.error_budget(q, k, v)
    assert [r.stage for r in rows] == list(contract.Exact.stage_names()) + ["all"]
    errors = {r.stage: r.error.relative_l1 for r in rows}
    assert errors["float64_state"] < 1e-5  # fp32 state alone is nearly exact
    assert errors["all"] > errors["float64_state"]
    assert all(math.isfinite(e) for e in errors.values())


def test_round_e4m3_ties_to_even_saturates_and_handles_subnormals():
    x = torch.tensor([17.0, 19.0, 1000.0, -1000.0, 2.0**-10, 3 * 2.0**-10, 0.0, 448.0, 2.0**-9])
    want = [16.0, 20.0, 448.0, -448.0, 0.0, 2.0**-8, 0.0, 448.0, 2.0**-9]
    assert round_e4m3(x).tolist() == want
    assert round_e4m3_arithmetic(x.double()).tolist() == want


def test_round_e4m3_arithmetic_agrees_with_torch_float8_everywhere():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(200_000, generator=g) * torch.exp(torch.randn(200_000, generator=g) * 4)
    assert torch.equal(round_e4m3(x), round_e4m3_arithmetic(x.double()).float())


def test_fp22_truncation_drops_ten_mantissa_bits_toward_zero():
    x = torch.tensor([1.0 + 2**-13 + 2**-14, -(1.0 + 2**-13 + 2**-20), 3.0])
    assert truncate_fp22(x).tolist() == [1.0 + 2**-13, -(1.0 + 2**-13), 3.0]


def test_v_is_transposed_padded_and_permuted_for_sm89():
    v = torch.arange(70, dtype=torch.float32).reshape(1, 1, 70, 1).repeat(1, 1, 1, 2).half() / 8
    qv = contract.quantize_v(v, preset="sm89")
    assert qv.v_fp8.shape == (1, 1, 2, 128) and qv.v_fp8.dtype == torch.float8_e4m3fn
    stored = qv.v_fp8.float()[0, 0, 0] * qv.v_scale[0, 0, 0]
    # position 2 of every 16 holds token 8, position 4 holds token 2 (CONTRACT.md section 5)
    assert stored[2].item() == pytest.approx(8 / 8, rel=0.07) and stored[4].item() == pytest.approx(2 / 8, rel=0.07)
    assert torch.all(qv.v_fp8.float()[..., 80:] == 0)  # tokens 70..127 padded with zeros
    assert qv.v_scale[0, 0, 0].item() == pytest.approx((69 / 8) / 448, rel=1e-6)
    torch.testing.assert_close(qv.tokens_hnd() * qv.v_scale.unsqueeze(2), v.float(), rtol=0.07, atol=0)
    assert contract.quantize_v(v, preset="sm90").v_fp8.shape == (1, 1, 2, 128)


def test_fp32_fp16_mode_scales_v_to_2_25():
    v = torch.randn(1, 1, 64, 64).half()
    qv = contract.quantize_v(v, pv_accum="fp32+fp16")
    assert float(qv.v_fp8.float().abs().max()) == pytest.approx(2.25, rel=0.07)


def test_the_mma_accumulator_follows_the_target():
    assert contract.ContractConfig(preset="sm89").accumulator == "fp22"  # Ada, the preset's own target
    assert contract.ContractConfig(preset="sm89", target="sm90").accumulator == "fp32"  # widened on Hopper
    assert contract.ContractConfig(preset="sm89", target="sm121").accumulator == "fp32"
    assert contract.ContractConfig(preset="sm90").accumulator == "fp22"
    assert contract.ContractConfig(preset="sm89", target="sm90", mma_accumulator="fp22").accumulator == "fp22"
    with pytest.raises(ValueError, match="target: the sm90 preset's kernels run on"):
        contract.ContractConfig(preset="sm90", target="sm120")
    with pytest.raises(ValueError, match="mma_accumulator: expected one of"):
        contract.ContractConfig(mma_accumulator="fp16")


def test_an_fp32_accumulator_moves_the_output_and_the_target_picks_it():
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 300, 64, generator=g).half() for _ in range(3))
    fp22 = contract.attention(q, k, v, preset="sm89")
    on_hopper = contract.attention(q, k, v, preset="sm89", target="sm90")
    assert torch.equal(on_hopper, contract.attention(q, k, v, preset="sm89", mma_accumulator="fp32"))
    assert not torch.equal(on_hopper, fp22)
    exact = contract.reference_attention(q, k, v)
    assert metrics.relative_l1(on_hopper, exact) <= metrics.relative_l1(fp22, exact) * 1.02
