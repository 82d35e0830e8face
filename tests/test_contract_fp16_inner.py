"""The fp32+fp16 mode on the sm90 preset (issue 37): fp16 partials of 64 keys joined into the fp32 O.

Expected values come from NUMERICAL_CONTRACT.md's rules worked out here in numpy (np.float16 for the
fp16 accumulator), never from the code under test.
"""

import numpy as np
import pytest
import torch

from sagelib import contract
from sagelib import inputs as data
from sagelib.contract import metrics
from sagelib.contract import presets as P
from sagelib.studies import contract_sweeps

D = 64
OFFSET = 8.807  # NUMERICAL_CONTRACT.md, constants
V_AMAX = 4.0  # V's channel amax in the hand-built inputs: multiplier 2.25 * fl32(1 / 4) = 0.5625 exactly
FP16_MAX = 65504.0


def tensor(x, dtype=torch.float16):
    t = torch.tensor(np.asarray(x, np.float64)).to(dtype)
    assert np.array_equal(t.double().numpy(), x), "hand-built value not representable in the dtype"
    return t[None, None]


def fp16_inner(products, keys_per_partial):
    """Stage 6, fp32+fp16, one query row and channel: ``products`` [N] (P8 * V8, exact) summed per k32 step,
    each step added to a fresh-per-partial fp16 accumulator and rounded (np.float16: nearest, ties to
    even), every partial joined into an fp32 O in key order. Returns (O, the partials)."""
    o, partials = np.float32(0), []
    for first in range(0, len(products), keys_per_partial):
        inner = np.float16(0)
        with np.errstate(over="ignore"):
            for step in range(first, first + keys_per_partial, 32):
                inner = np.float16(np.float64(inner) + products[step:step + 32].sum())
        partials.append(float(inner))
        o = np.float32(o + np.float32(inner))
    return float(o), partials


# ---- the option runs, its span, and the refusals -----------------------------------------

def test_fp16_partials_span_64_keys_two_per_sm90_block():
    assert contract.ContractConfig(pv_accum="fp32+fp16").fp16_partial == 64
    assert contract.ContractConfig(preset="sm89", pv_accum="fp32+fp16").fp16_partial == 64
    assert contract.ContractConfig(pv_accum="fp32+fp16", cta_k=32).fp16_partial == 32  # never past a block
    x = data.make("gaussian", data.Shape(batch=1, heads=1, tokens=40, head_dim=64))
    assert bool(torch.isfinite(contract.attention(x.q, x.k, x.v, pv_accum="fp32+fp16", cta_k=16)).all())
    assert contract.ContractConfig(pv_accum="fp32+fp16", fp16_partial_keys=32).fp16_partial == 32
    # the limit is derived: 448 x 2.25 x 64 = 64,512 fits fp16's 65,504; 96 keys would give 96,768
    assert P.FP16_PARTIAL_KEYS == P.fp16_partial_limit() == 64
    assert P.fp16_partial_worst_case(64) == 64512 and P.fp16_partial_worst_case(128) == 129024


def test_sm90_fp16_option_runs_and_its_fp16_rounding_is_small():
    x = data.make("k_outliers", data.Shape(batch=1, heads=2, tokens=300, head_dim=128))
    out = contract.attention(x.q, x.k, x.v, pv_accum="fp32+fp16")
    twin = contract.attention(x.q, x.k, x.v, pv_accum="fp32+fp16", exact=contract.Exact(pv_accum=True))
    assert out.shape == x.q.shape and out.dtype == x.q.dtype and bool(torch.isfinite(out).all())
    assert 0 < metrics.relative_l1(out, twin) < 1e-3  # the fp16 partials alone: measured 2.4e-4


@pytest.mark.parametrize("options, message", [
    ({"fp16_partial_keys": 128}, r"partial of 128 keys can reach 448 x 2.25 x 128 = 129024, past fp16's 65504; "
                                 r"use at most 64 keys"),
    ({"fp16_partial_keys": 96}, r"96 keys can reach .* = 96768"),
    ({"fp16_partial_keys": 48}, r"fp16_partial_keys: expected None or a positive multiple of 32"),
    ({"fp16_partial_keys": 64, "pv_accum": "fp32+fp32"}, r"only defined for pv_accum='fp32\+fp16'"),
    ({"fp8_offset": 12.0, "exact": contract.Exact(p_fp8=True)}, r"can reach 2\^12 \(exact P\).*lower fp8_offset"),
])
def test_configurations_that_can_overflow_fp16_are_refused(options, message):
    options = {"pv_accum": "fp32+fp16", **options}
    with pytest.raises(ValueError, match=message):
        contract.ContractConfig(**options)


def test_a_128_key_partial_is_allowed_when_the_inner_accumulation_is_exact():
    # nothing rounds to fp16 then, so nothing can overflow
    config = contract.ContractConfig(pv_accum="fp32+fp16", fp16_partial_keys=128, exact=contract.Exact(pv_accum=True))
    assert config.fp16_partial == 128


# ---- pins: the worst case stays finite; the join keeps the partials apart ------------------

def pin_v():
    """128 keys, channel 0 built so fp16 rounding shows; channel 1 the worst case (every V8 at +2.25).

    With q = 0 every P is e4m3(2**8.807) = 448. V8 = 0.5625 v: 4 -> 2.25 (product 1008), -4 -> -2.25,
    2**-8 -> e4m3(2**-9 * 1.125) = 2**-9 (product 0.875). Channel 0's k32 steps (exact sums):
      step 1: 31 x 1008 + 0.875 = 31248.875     step 2: 0
      step 3: -31248 + 0.875 = -31247.125       step 4: 1008
    """
    v = np.zeros((128, D))
    v[0:31, 0], v[31, 0] = 4.0, 2.0 ** -8
    v[64:95, 0], v[95, 0] = -4.0, 2.0 ** -8
    v[96, 0] = 4.0
    v[:, 1] = 4.0
    return v


def test_pin_fp16_partials_of_64_keys_joined_in_fp32():
    v = pin_v()
    v8 = np.where(np.abs(v) == 4.0, np.sign(v) * 2.25, np.where(v != 0, 2.0 ** -9, 0.0))
    products = 448.0 * v8
    # channel 0: partial 1 = fp16(31248.875) = 31248 (fp16 steps of 16 there); partial 2 = fp16(-31247.125)
    # = -31248, then fp16(-31248 + 1008) = -30240; O = 1008. One 128-key fp16 accumulator would give
    # fp16(31248 - 31247.125) = 0.875, then 1009; an fp32 one 1009.75.
    o0, parts0 = fp16_inner(products[:, 0], 64)
    assert parts0 == [31248.0, -30240.0] and o0 == 1008.0
    assert fp16_inner(products[:, 0], 128)[0] == 1009.0
    # channel 1, the worst case: each partial 64 x 1008 = 64512 (finite); one 128-key partial overflows
    o1, parts1 = fp16_inner(products[:, 1], 64)
    assert parts1 == [64512.0, 64512.0] and o1 == 129024.0
    assert fp16_inner(products[:, 1], 128)[1] == [np.inf]

    # out = O / l * v_scale: l = 128 * 2**8.807 (P before rounding), v_scale = 4 * fl32(1 / 2.25)
    l = 128 * 2.0 ** float(np.float32(OFFSET))
    v_scale = float(np.float32(V_AMAX) * np.float32(1 / np.float32(2.25)))
    want = np.array([o0, o1]) / l * v_scale
    got = contract.attention(tensor(np.zeros((2, D))), tensor(np.zeros((128, D))), tensor(v),
                             pv_accum="fp32+fp16")[0, 0, :, :2].double().numpy()
    assert np.isfinite(got).all()
    ulp = np.spacing(np.float16(want)).astype(np.float64)
    assert (np.abs(want / ulp - np.round(want / ulp)) < 0.3).all(), "expected output too near an fp16 tie"
    assert np.array_equal(got, np.tile(np.float16(want).astype(np.float64), (2, 1)))
    # the pin tells the rules apart: the single accumulator's and fp32's channel 0 round elsewhere
    for other in (1009.0, 1009.75):
        assert np.float16(other / l * v_scale) != np.float16(want[0])


def test_worst_case_partial_stays_finite_whatever_the_order_and_rounding_inside_the_instruction():
    # wgmma does not document how it accumulates into f16: round after every single product (the finest
    # rounding possible), to nearest or toward zero, over 64 products of 448 x 2.25, and the partial stays
    # below 65,520, the smallest value fp16 rounds to inf
    total = np.float16(0)
    for _ in range(64):
        total = np.float16(np.float64(total) + 1008.0)
    assert np.isfinite(total) and float(total) <= FP16_MAX
    # the half-ulp drift the rounding can add over 64 products is bounded by the sum of half-ulps
    drift = sum(float(np.spacing(np.float16(1008.0 * j))) / 2 for j in range(1, 65))
    assert 64512 + drift < 65520


def test_sm89_fp16_block_of_128_keys_is_split_too():
    # a cta_k study on the sm89 preset used to give one 128-key fp16 partial; it now splits at 64
    v = pin_v()
    got = contract.attention(tensor(np.zeros((1, D))), tensor(np.zeros((128, D))), tensor(v), preset="sm89",
                             pv_accum="fp32+fp16", cta_k=128)
    assert bool(torch.isfinite(got).all())


def test_exact_v_keeps_its_channel_scale_in_the_fp16_mode():
    # V of 300 unscaled would give products of 448 x 300 and overflow the first fp16 partial; scaled to
    # 2.25 per channel the partials stay finite and the output is V's value
    v = np.full((128, D), 300.0)
    q, k = np.zeros((1, D)), np.zeros((128, D))
    exact = contract.Exact.all_but("pv_accum")
    out = contract.attention(tensor(q), tensor(k), tensor(v), pv_accum="fp32+fp16", exact=exact)
    assert bool(torch.isfinite(out).all())
    assert torch.allclose(out.double(), torch.full_like(out, 300.0, dtype=torch.float64), rtol=1e-3)


# ---- accuracy against float64 (issue 37's bar) ---------------------------------------------

def test_sm90_fp16_within_10_percent_of_fp32_fp32_and_no_worse_than_sage2_sm89_fp16():
    rows = contract_sweeps.fp16_inner_errors(["gaussian", "k_outliers"],
                                             data.Shape(batch=1, heads=2, tokens=1024, head_dim=128))
    for row in rows:
        ours, base = row["sm90 fp32+fp16"], row["sm90 fp32+fp32"]
        assert ours <= 1.10 * base, row
        assert ours <= row["sm89 per_warp fp32+fp16 (SageAttention2's)"], row
