"""Exact pins of the contract's stage arithmetic (issue 32).

Accuracy bounds cannot see a wrong rounding rule: dropping the FP8 offset moves the output by
3.8% relative L1 and leaves the error against float64 where it was. Each test here builds a
tiny input by hand, works out what NUMERICAL_CONTRACT.md says the contract returns with an
emulation written in this file (numpy, never the code under test), and compares bits.

The emulation follows the document's rules, rounding to float32 where the contract rounds a
product, sum or quotient to float32. Where a transcendental (exp2, log2) or an fp32 sum of
unspecified order feeds a rounding, it works in float64 and first asserts that the value lies
well clear of that rounding's ties, so a last-ulp difference between math libraries cannot
move the expected bits. V's channel amaxes are powers of two in pins 1-4, where the division
and reciprocal forms of V's multiplier agree (the V quantizer is changing; pin 5 is that change).
"""

import numpy as np
import pytest
import torch
from exact_float32 import fma32

from sagelib import contract

F32 = np.float32
D = 64  # head_dim: sm_scale = 64 ** -0.5 = 0.125, a power of two
LOG2E = 1.44269504  # NUMERICAL_CONTRACT.md, constants
OFFSET = 8.807
SCALE_MAX = 448.0  # V's scale_max for fp32+fp32
#: per_thread geometry of each preset: WARPQ, WARPK, CTA_K (NUMERICAL_CONTRACT.md, presets)
GEOMETRY = {"sm90": (16, 128, 128), "sm89": (32, 64, 64)}
#: fraction bits, smallest normal exponent, largest finite value
FORMATS = {"e4m3": (3, -6, 448.0), torch.float16: (10, -14, 65504.0), torch.bfloat16: (7, -126, 3.3e38)}
DTYPES = [pytest.param(torch.float16, id="fp16"), pytest.param(torch.bfloat16, id="bf16")]
PRESETS = ["sm90", "sm89"]


# ---- number formats, written from their definitions --------------------------------------

def _quantum(x, fmt):
    mant, emin, _ = FORMATS[fmt]
    _, e = np.frexp(np.asarray(x, np.float64))  # |x| = f * 2**e, f in [0.5, 1)
    return np.ldexp(1.0, np.maximum(e - 1, emin) - mant)


def round_to(x, fmt):
    """Round half to even into ``fmt`` (e4m3 saturates at 448; fp16/bf16 values must be in range)."""
    x = np.asarray(x, np.float64)
    top = FORMATS[fmt][2]
    assert fmt == "e4m3" or np.all(np.abs(x) <= top)
    return np.clip(np.round(x / _quantum(x, fmt)) * _quantum(x, fmt), -top, top)


def assert_clear_of_ties(x, fmt, rel):
    """Every x is at least rel * |x| away from the midpoints where ``fmt``'s rounding flips."""
    x = np.asarray(x, np.float64)
    q = _quantum(x, fmt)
    to_tie = np.abs(x / q - np.floor(x / q) - 0.5) * q
    ok = (to_tie > rel * np.abs(x)) | (np.abs(x) >= FORMATS[fmt][2])
    assert ok.all(), f"hand-built input puts {x[~ok]} next to a rounding tie of {fmt}; change the input"


def truncate_fp22(x):
    """Keep 13 of float32's 23 mantissa bits (toward zero): the fp8 tensor core's accumulator."""
    bits = np.asarray(x, F32).view(np.int32) & np.int32(~0x3FF)
    return bits.view(F32)


def tensor(x, dtype):
    """The [1, 1, N, D] tensor of ``dtype`` holding x exactly (asserted)."""
    t = torch.tensor(np.asarray(x, np.float64)).to(dtype)
    assert np.array_equal(t.double().numpy(), x), "hand-built value not representable in the dtype"
    return t[None, None]


# ---- the contract's stages, emulated (B = H = 1, per_thread granularity, triton flavour) --

def k_mean(k, dtype):
    return round_to(F32(k.mean(axis=0)), dtype)  # float64 mean -> float32 -> dtype (stage 1)


def quantize_triton(x, group):
    """Stage 2, triton flavour: scale = fma(amax, fl32(1/127), 1e-7); trunc(x / scale + 0.5 sign)."""
    x = np.asarray(x, F32)
    values, scales = np.zeros(x.shape), {}
    for g in np.unique(group):
        rows = group == g
        amax = F32(np.abs(x[rows]).max())
        scales[int(g)] = scale = fma32(amax, F32(1 / 127), F32(1e-7))
        ratio = x[rows] / scale  # float32, correctly rounded
        half = np.where(ratio >= 0, F32(0.5), F32(-0.5))
        values[rows] = np.clip(np.trunc(ratio + half), -128, 127)
    return values, np.array([scales[int(g)] for g in group], np.float64)


def q_groups(n, preset):
    warpq = GEOMETRY[preset][0]
    row = np.arange(n)
    return (row // warpq) * 8 + (row % warpq) % 8


def k_groups(n, preset):
    warpk = GEOMETRY[preset][1]
    row = np.arange(n)
    return (row // warpk) * 4 + ((row % warpk) % 8) // 2


def quantize_v(v, form="division"):
    """Stage 5 for V: per-channel amax (floor 1e-7); v_scale = amax * fl32(1/448); e4m3(v * mult)."""
    v32 = np.asarray(v, F32)
    amax = np.maximum(np.abs(v32).max(axis=0), F32(1e-7))
    v_scale = amax * F32(1 / SCALE_MAX)
    if form == "division":  # fl32(scale_max / amax), correctly rounded
        mult = F32(SCALE_MAX) / amax
    else:  # fl32(scale_max * fl32(1 / amax))
        mult = F32(SCALE_MAX) * (F32(1) / amax)
    return round_to(v32 * mult, "e4m3"), v_scale.astype(np.float64)


def pv_block(p8, v8):
    """Stage 6, fp32+fp32: a fresh FP22 inner accumulator, truncated after every 32-token k-step."""
    inner = np.zeros((p8.shape[0], v8.shape[1]), F32)
    for t0 in range(0, p8.shape[1], 32):
        p, v = p8[:, t0:t0 + 32], v8[t0:t0 + 32]
        # e4m3 x e4m3 products are multiples of (quantum_p * quantum_v); the k-step's fp32 sum is
        # exact in any order when the sum of magnitudes stays under 2**24 of the smallest unit.
        units = _quantum(p, "e4m3")[:, :, None] * _quantum(v, "e4m3")[None]
        used = (p[:, :, None] * v[None]) != 0
        if used.any():
            assert (np.abs(p) @ np.abs(v)).max() < 2.0 ** 24 * units[used].min()
        inner = truncate_fp22(inner + F32(p @ v))  # the add is float32, then truncated
    return inner.astype(np.float64)


def emulate_attention(q, k, v, dtype, preset):
    """Stages 1-7 on [N, D] float64 arrays (non-causal, fp32+fp32). Returns the output in dtype."""
    cta_k = GEOMETRY[preset][2]
    q8, qs = quantize_triton(q, q_groups(len(q), preset))
    k8, ks = quantize_triton(round_to(k - k_mean(k, dtype), dtype), k_groups(len(k), preset))
    s = (q8 @ k8.T) * qs[:, None] * ks[None, :] * float(F32(D ** -0.5 * LOG2E))
    v8, v_scale = quantize_v(v)
    m, l, o = np.full(len(q), -5e6), np.zeros(len(q)), np.zeros((len(q), D))
    for start in range(0, len(k), cta_k):
        blk = slice(start, start + cta_k)
        m_new = np.maximum(m, s[:, blk].max(axis=1) - float(F32(OFFSET)))
        p = np.exp2(s[:, blk] - m_new[:, None])
        assert_clear_of_ties(p, "e4m3", 5e-5)
        alpha = np.exp2(m - m_new)
        l = l * alpha + p.sum(axis=1)  # P before rounding
        o = o * alpha[:, None] + pv_block(round_to(p, "e4m3"), v8[blk])
        m = m_new
    out = o / l[:, None] * v_scale
    assert_clear_of_ties(out, dtype, 3e-5)
    return round_to(out, dtype)


def contract_out(q, k, v, dtype, preset):
    out = contract.attention(tensor(q, dtype), tensor(k, dtype), tensor(v, dtype), preset=preset)
    return out[0, 0].double().numpy()


# ---- pin 1: the fp32+fp32 inner accumulator truncates to FP22 after every k32 step -------

def cancelling_v():
    """V for 64 keys whose channels 0 and 1 cancel across the block's two k-steps; amax 256.

    multiplier 448 / 256 = 1.75 exactly, so v8 = 1.75 v: 256 -> 448, 2**-6 -> 0.02734375,
    2**-2 -> 0.4375, 2**-3 -> 0.21875 (all e4m3 values).
    """
    v = np.zeros((64, D))
    v[0, :2] = 256.0
    v[32, :2] = -256.0
    v[1, 0] = 2.0 ** -6
    v[1, 1], v[2, 1] = 2.0 ** -2, 2.0 ** -3
    return v


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_pin_fp32_fp32_inner_accumulator_truncates_to_fp22(preset, dtype):
    # q = 0: every score is 0, so every P = exp2(8.807) = 447.9 -> e4m3 448 and l = 64 * 2**8.807.
    # One block (64 keys) of two k-steps. FP22 keeps steps of 16 in [2**17, 2**18):
    #   ch 0: step 1 = 448 * (448 + 0.02734375) = 200704 + 12.25 -> 200704; step 2: -200704 -> 0
    #   ch 1: step 1 = 448 * (448 + 0.4375 + 0.21875) = 200704 + 294 -> 200992; step 2 -> 288
    # Without the truncation the two channels would carry 12.25 and 294.
    q, v = np.zeros((1, D)), cancelling_v()
    _, k, _ = varied_qkv()
    v8, _ = quantize_v(v)
    inner = pv_block(np.full((1, 64), 448.0), v8)
    assert inner[0, 0] == 0.0 and inner[0, 1] == 288.0
    want = emulate_attention(q, k, v, dtype, preset)
    assert want[0, 0] == 0.0 and want[0, 1] != 0.0
    assert np.array_equal(contract_out(q, k, v, dtype, preset), want)


# ---- pin 2: the lse correction q . km is float32 unless input_dtype is asked ------------

@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_pin_lse_correction_in_fp32(preset, dtype):
    # Every key equals kc, so km = kc exactly, the smoothed keys are 0 and every score is 0:
    # both rows get the same (log2(l) + m) / log2e = A, about ln 64 = 4.1589.
    # Row 0 has q = 0 (no correction): lse0 = A. Row 1: q . km = 1 * 1000 + 1 * 0.125 = 1000.125,
    # exact in fp32 and not in fp16 (1000.0) or bf16 (1000.0): lse1 = fl32(A + 0.125 * 1000.125).
    kc = np.zeros(D)
    kc[:2] = [1000.0, 0.125]
    k, v = np.tile(kc, (64, 1)), cancelling_v()
    q = np.zeros((2, D))
    q[1, :2] = 1.0
    _, lse = contract.attention(tensor(q, dtype), tensor(k, dtype), tensor(v, dtype), preset=preset,
                                return_lse=True)
    lse = lse[0, 0].numpy()
    a = (np.log2(64 * 2.0 ** float(F32(OFFSET))) - float(F32(OFFSET))) / LOG2E
    assert abs(lse[0] - a) <= 4 * np.spacing(F32(a))  # transcendental part: to a few ulp
    assert lse[1] == F32(lse[0]) + F32(0.125 * 1000.125)  # the correction: exact


# ---- pin 3: the triton flavour subtracts K's mean in the input dtype --------------------

@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_pin_triton_smoothing_rounds_k_minus_km_to_the_input_dtype(preset, dtype):
    # Channel 0 over 8 keys: 1000, -1000, 3, 0 ... mean 3/8 = 0.375 (exact in both dtypes).
    # k - km: 999.625 and -1000.375 are not fp16 (step 0.5: 999.5, -1000.5) nor bf16 (step 4:
    # 1000, -1000), so the amax of k group 0 (keys 0 and 1) is 1000.5 (fp16) or 1000 (bf16) where
    # a float32 subtraction would give 1000.375.
    k = np.zeros((8, D))
    k[:3, 0] = [1000.0, -1000.0, 3.0]
    q = np.zeros((8, D))
    got = contract.quantize_qk(tensor(q, dtype), tensor(k, dtype), preset=preset)
    smoothed = round_to(k - 0.375 * (np.arange(D) == 0), dtype)
    assert np.abs(smoothed[:2, 0]).max() == {torch.float16: 1000.5, torch.bfloat16: 1000.0}[dtype]
    want_int8, want_scale = quantize_triton(smoothed, k_groups(8, preset))
    assert np.array_equal(got.k_int8[0, 0].numpy(), want_int8)
    assert np.array_equal(got.k_scale[0, 0].double().numpy(), want_scale[[0, 2, 4, 6]])


# ---- pin 4: the running max is stored as max - 8.807 -----------------------------------

def varied_qkv():
    """Two query rows, 64 keys with scores spread over about 14 log2 units, V channels of amax 1.

    (Chosen so that no P and no output lies near a rounding tie: emulate_attention asserts it.)
    """
    t = np.arange(64)
    q = np.zeros((2, D))
    q[0, 0], q[1, :2] = 1.25, [0.5, 1.0]
    k = np.zeros((64, D))
    k[:, 0], k[:, 1] = t - 32.0, (t * 7) % 13 - 6.0
    v = np.zeros((64, D))
    for c in range(4):
        v[:, c] = ((t * 7 + c * 3) % 17 - 8) / 8.0  # in [-1, 1], both ends reached: multiplier 448
    return q, k, v


@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_pin_fp8_offset_in_the_running_max(preset, dtype):
    # With the offset the largest P of a row is 2**8.807 ~ 448 and P's e4m3 rounding happens
    # there; without it P tops at 1 and every P rounds differently (the small ones to zero).
    q, k, v = varied_qkv()
    want = emulate_attention(q, k, v, dtype, preset)
    assert np.array_equal(contract_out(q, k, v, dtype, preset), want)


# ---- pin 5: V's multiplier is fl32(448 * fl32(1 / amax)) (the reciprocal form) ----------

@pytest.mark.parametrize("preset", PRESETS)
@pytest.mark.parametrize("dtype", DTYPES)
def test_pin_v_multiplier_is_a_rounded_reciprocal_times_scale_max(preset, dtype):
    # amax 0.75: 448 / 0.75 = 597.333.. -> fl32 597.33331 (below); fl32(1 / 0.75) = 1.33333337
    # (above), times 448 -> 597.33337 (above). The key 9 * 2**-11 lands on 2.625, the tie between
    # e4m3 2.5 and 2.75: 2.625 - 0.375 ulp rounds to 2.625 then ties to even 2.5 (division);
    # 2.625 + 0.75 ulp rounds to 2.625 + 1 ulp then 2.75 (reciprocal).
    v = np.zeros((2, D))
    v[:, 0] = [0.75, 9 * 2.0 ** -11]
    division, _ = quantize_v(v, "division")
    reciprocal, _ = quantize_v(v, "reciprocal")
    assert division[:, 0].tolist() == [448.0, 2.5] and reciprocal[:, 0].tolist() == [448.0, 2.75]
    got = contract.quantize_v(tensor(v, dtype), preset=preset)
    assert np.array_equal(got.tokens_hnd()[0, 0].double().numpy(), reciprocal)
