"""Stage 1-2 of the contract: group maps, both quantizer flavours, smoothing, layouts.

Expected values come from the written rules (CONTRACT.md section 2), computed by
hand or by a scalar numpy float32 emulation written here, independently of the
vectorised torch code under test.
"""

import zlib

import numpy as np
import pytest
import torch
from exact_float32 import fma32

from sagelib import contract
from sagelib.contract import quantize as Q


def test_per_thread_q_groups_follow_the_mma_fragment():
    # sm90: WARPQ=16, 8 groups per warp tile: rows 0-7 -> 0-7, rows 8-15 -> 0-7 again, next tile +8
    idx = contract.q_group_index(34, "sm90", "per_thread").tolist()
    assert idx[:16] == [0, 1, 2, 3, 4, 5, 6, 7] * 2
    assert idx[16:32] == [8, 9, 10, 11, 12, 13, 14, 15] * 2
    assert idx[32:] == [16, 17]
    # sm89: WARPQ=32: rows 0..31 -> r % 8, four rows per group
    idx = contract.q_group_index(40, "sm89", "per_thread").tolist()
    assert idx[:32] == [0, 1, 2, 3, 4, 5, 6, 7] * 4 and idx[32:] == list(range(8, 16))


def test_per_thread_k_groups_pair_columns_of_a_lane():
    idx = contract.k_group_index(130, "sm90", "per_thread").tolist()
    assert idx[:8] == [0, 0, 1, 1, 2, 2, 3, 3] and idx[120:128] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert idx[128:] == [4, 4]
    idx = contract.k_group_index(66, "sm89", "per_thread").tolist()
    assert idx[56:64] == [0, 0, 1, 1, 2, 2, 3, 3] and idx[64:] == [4, 4]


@pytest.mark.parametrize(
    "preset,gran,n,expect_q,expect_k",
    [
        ("sm90", "per_thread", 1, 32, 4),  # one BLKQ=64 block (4 warps x 8), one BLKK=128 block x 4
        ("sm90", "per_thread", 200, 4 * 32, 2 * 4),
        ("sm90", "per_warp", 200, 4 * 4, 2),
        ("sm90", "per_block", 200, 4, 2),
        ("sm89", "per_thread", 200, 2 * 4 * 8, 4 * 4),
        ("sm89", "per_warp", 200, 2 * 4, 4),
        ("sm89", "per_block", 200, 2, 4),
    ],
)
def test_scale_tensor_sizes_include_padded_tail_groups(preset, gran, n, expect_q, expect_k):
    assert contract.n_q_groups(n, preset, gran) == expect_q
    assert contract.n_k_groups(n, preset, gran) == expect_k
    q = torch.randn(1, 2, n, 64).half()
    res = contract.quantize_qk(q, q.clone(), preset=preset, granularity=gran)
    assert res.q_scale.shape == (1, 2, expect_q) and res.k_scale.shape == (1, 2, expect_k)
    assert res.q_scale.dtype == res.k_scale.dtype == torch.float32


def _one_group(values, flavour):
    """Quantize one group (one token row) with the torch code under test."""
    x = torch.tensor(values, dtype=torch.float32).reshape(1, 1, 1, -1)
    q, s = Q.quantize_groups(x, torch.zeros(1, dtype=torch.long), 1, flavour)
    return q.reshape(-1).tolist(), float(s.reshape(-1)[0])


def test_cuda_flavour_rounds_half_to_even():
    # amax 127 -> scale 1 and 127/amax = 1 exactly, so the ties below are exact ties
    q, s = _one_group([127.0, 63.5, 62.5, -63.5, -62.5, 0.5, 1.5, -0.5, 0.0], "cuda")
    assert s == pytest.approx(1.0)
    assert q == [127, 64, 62, -64, -62, 0, 2, 0, 0]


def test_fma_f32_rounds_once_also_where_the_float64_sum_is_a_float32_midpoint():
    # (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24: a float32 midpoint. Adding +-2^-80 is lost in float64 (the sum stays on
    # the midpoint, which rounds to even), but decides the fused result.
    a = torch.tensor([1 + 2.0**-12] * 3, dtype=torch.float32)
    for c in (2.0**-80, -(2.0**-80), 0.0):
        got = Q.fma_f32(a, a, c)
        assert got.dtype == torch.float32 and float(got[0]) == float(fma32(a[0].item(), a[0].item(), c))
    assert float(Q.fma_f32(a, a, 2.0**-80)[0]) == 1 + 2.0**-11 + 2.0**-23
    assert float(Q.fma_f32(a, a, -(2.0**-80))[0]) == 1 + 2.0**-11
    # random operands, each against the exact rational rounding
    g = np.random.default_rng(7)
    x = (g.standard_normal(400) * 10.0 ** g.integers(-3, 4, 400)).astype(np.float32)
    y = g.standard_normal(400).astype(np.float32)
    got = Q.fma_f32(torch.from_numpy(x), torch.from_numpy(y), 1e-7).numpy()
    assert all(got[i] == fma32(x[i], y[i], 1e-7) for i in range(400))


def test_triton_scale_is_one_fused_multiply_add_of_the_reciprocal_of_127():
    """amax * fl32(1/127) + 1e-7 rounded once, as ptxas compiles the real Triton quantizer (its SASS is one FFMA):
    about a third of amax values give a different scale when the product is rounded on its own first."""
    amaxes = np.random.default_rng(3).uniform(0.01, 20.0, 300).astype(np.float32)
    fused = [fma32(a, np.float32(1 / 127), np.float32(1e-7)) for a in amaxes]
    unfused = [np.float32(np.float32(a * np.float32(1 / 127)) + np.float32(1e-7)) for a in amaxes]
    assert 30 < sum(f != u for f, u in zip(fused, unfused)) < 270  # the two forms are told apart here
    x = torch.from_numpy(amaxes).reshape(1, 1, -1, 1)
    _, scales = Q.quantize_groups(x, torch.arange(300), 300, "triton")
    assert scales.reshape(-1).numpy().tolist() == [float(f) for f in fused]


def test_triton_flavour_rounds_half_away_from_zero():
    # amax 0 plus eps gives scale 1e-7 exactly in fp32 terms; pick values that are exact ties of scale 2**-k:
    # use amax such that fma(amax, 1/127, 1e-7) == 0.5 in float32, then x = 1.25 -> x/scale = 2.5 -> 3 (away
    # from zero)
    scale = np.float32(0.5)
    amax = np.float32((scale - np.float32(1e-7)) * np.float32(127))
    assert fma32(amax, np.float32(1 / 127), np.float32(1e-7)) == scale  # the setup is an exact tie
    q, s = _one_group([float(amax), 1.25, -1.25, 0.75, -0.75, 0.25, -0.25, 0.0], "triton")
    assert s == pytest.approx(0.5, rel=0, abs=0)
    assert q[1:] == [3, -3, 2, -2, 1, -1, 0]  # half away from zero (x/scale = 2.5, 1.5, 0.5)


def test_extremes_map_to_plus_minus_127_and_never_minus_128():
    for flavour in ("triton", "cuda"):
        q, _ = _one_group([-3.0, 3.0, 1.0], flavour)
        assert q[0] in (-127, -126) and q[1] in (127, 126) and q[0] == -q[1]
        assert min(q) >= -127


def test_all_zero_groups_quantize_to_zero_with_the_flavour_floor_scale():
    q, s = _one_group([0.0] * 8, "triton")
    assert q == [0] * 8 and s == pytest.approx(1e-7, rel=1e-6)
    q, s = _one_group([0.0] * 8, "cuda")
    assert q == [0] * 8 and s == pytest.approx(1e-7 / 127, rel=1e-6)


def _numpy_quantize(x32, groups, n_groups, flavour):
    """Scalar float32 emulation of CONTRACT.md section 2 (independent of the torch code)."""
    b, h, n, d = x32.shape
    qs = np.zeros((b, h, n, d), np.int8)
    scales = np.zeros((b, h, n_groups), np.float32)
    f = np.float32
    for bi in range(b):
        for hi in range(h):
            for g in range(n_groups):
                rows = [r for r in range(n) if groups[r] == g]
                amax = f(max([abs(f(v)) for r in rows for v in x32[bi, hi, r]], default=f(0)))
                # a division by the constant 127 is a multiply by its float32 reciprocal (GPU arithmetic)
                if flavour == "triton":
                    scale = fma32(amax, f(1 / 127), f(1e-7))  # one rounding, as the real quantizer
                else:
                    amax = max(amax, f(1e-7))
                    scale, recip = f(amax * f(1 / 127)), f(f(127) / amax)
                scales[bi, hi, g] = scale
                for r in rows:
                    for c in range(d):
                        v = f(x32[bi, hi, r, c])
                        if flavour == "triton":
                            t = f(v / scale)
                            t = f(t + (f(0.5) if t >= 0 else f(-0.5)))
                            qs[bi, hi, r, c] = int(np.trunc(t))
                        else:
                            qs[bi, hi, r, c] = int(np.clip(np.round(f(v * recip)), -128, 127))
    return qs, scales


@pytest.mark.parametrize("preset", ["sm90", "sm89"])
@pytest.mark.parametrize("gran", ["per_thread", "per_warp"])
@pytest.mark.parametrize("flavour", ["triton", "cuda"])
@pytest.mark.parametrize("draw", range(4))
def test_quantizer_matches_scalar_emulation_bit_for_bit(preset, gran, flavour, draw):
    torch.manual_seed(zlib.crc32(f"{preset}{gran}{flavour}{draw}".encode()))
    n = 37  # ragged: partial warp tiles and empty tail groups
    x = (torch.randn(1, 2, n, 16) * 3).half().float()
    idx = contract.k_group_index(n, preset, gran) if gran == "per_thread" else contract.q_group_index(n, preset, gran)
    ng = int(idx.max()) + 3  # two empty tail groups on top
    q, s = Q.quantize_groups(x, idx, ng, flavour)
    q_ref, s_ref = _numpy_quantize(x.numpy(), idx.tolist(), ng, flavour)
    assert np.array_equal(q.numpy(), q_ref)
    assert np.array_equal(s.numpy(), s_ref)


def test_smoothing_uses_the_correctly_rounded_token_mean_and_leaves_k_alone():
    torch.manual_seed(1)
    k = (torch.randn(2, 3, 50, 64) + 5).half()
    before = k.clone()
    res = contract.quantize_qk(torch.randn_like(k), k)
    assert torch.equal(k, before)  # not modified in place
    assert res.km.dtype == torch.float16 and res.km.shape == (2, 3, 1, 64)
    exact = torch.tensor(np.mean(k.numpy().astype(np.float64), axis=2, keepdims=True)).half()
    assert torch.equal(res.km, exact)


def test_flavours_differ_in_where_they_subtract_the_mean():
    # triton rounds k - km to fp16 first; cuda subtracts in fp32. Values chosen so that matters.
    k = torch.tensor([1000.0, 1000.5, 1001.5, 998.0]).half().reshape(1, 1, 4, 1).repeat(1, 1, 1, 64)
    km = contract.quantize_qk(k, k, flavour="triton").km
    from sagelib.contract.smoothing import smoothed_k
    t = smoothed_k(k, km, "triton")
    c = smoothed_k(k, km, "cuda")
    assert torch.equal(t, (k - km).float()) and torch.equal(c, k.float() - km.float())


def test_no_smoothing_gives_no_km():
    q = torch.randn(1, 1, 8, 64).half()
    assert contract.quantize_qk(q, q, smooth_k=False).km is None


def test_per_block_folds_sm_scale_log2e_into_q():
    torch.manual_seed(2)
    q = torch.randn(1, 1, 64, 64).half()
    folded = contract.quantize_qk(q, q, granularity="per_block", flavour="cuda")
    plain = contract.quantize_qk(q, q, granularity="per_warp", flavour="cuda", preset="sm90")
    factor = 64 ** -0.5 * 1.44269504
    assert folded.scale_folded and not plain.scale_folded
    assert folded.q_scale[0, 0, 0].item() == pytest.approx(q.float().abs().max().item() * factor / 127, rel=1e-6)


def test_nhd_gives_the_same_quantization_as_hnd_transposed():
    torch.manual_seed(3)
    q, k = torch.randn(2, 4, 70, 64).half(), torch.randn(2, 2, 90, 64).half()
    hnd = contract.quantize_qk(q, k)
    nhd = contract.quantize_qk(q.transpose(1, 2).contiguous(), k.transpose(1, 2).contiguous(), layout="NHD")
    assert torch.equal(nhd.q_int8.transpose(1, 2), hnd.q_int8)
    assert torch.equal(nhd.k_int8.transpose(1, 2), hnd.k_int8)
    assert torch.equal(nhd.q_scale, hnd.q_scale) and torch.equal(nhd.k_scale, hnd.k_scale)
    assert torch.equal(nhd.km.transpose(1, 2), hnd.km)


def test_a_division_stand_in_reaches_both_flavours_and_leaves_with_the_block():
    """The seam the GPU peer parity uses: inside ``division`` the quantizers divide with the stand-in, at the two
    sites named; outside it they divide exactly again. A stand-in that makes each quotient 2^-10 too large moves
    some INT8 values (those that close to a rounding boundary), and only inside the block."""
    from sagelib.contract import quantize as Q

    g = torch.Generator().manual_seed(3)
    q = torch.randn(1, 2, 4096, 64, generator=g).half()
    k = torch.randn(1, 2, 4096, 64, generator=g).half()
    seen = []

    def slightly_large(a, b, site):
        seen.append(site)
        return a / b * (1 + 2.0**-10)

    for granularity, flavour, site in (("per_thread", "triton", "triton_ratio"),
                                       ("per_warp", "cuda", "cuda_multiplier")):
        exact = Q.quantize_qk(q, k, preset="sm89", granularity=granularity, flavour=flavour)
        with Q.division(slightly_large):
            moved = Q.quantize_qk(q, k, preset="sm89", granularity=granularity, flavour=flavour)
        again = Q.quantize_qk(q, k, preset="sm89", granularity=granularity, flavour=flavour)
        assert site in seen and set(seen) <= set(Q.DIVISION_SITES)
        assert int((moved.q_int8 != exact.q_int8).sum()) > 0, flavour
        assert torch.equal(again.q_int8, exact.q_int8) and torch.equal(again.k_int8, exact.k_int8)
        seen.clear()
