"""Parity of our CUDA kernels with the contract, stage by stage (GPU tests).

Quantizers must be bit-exact (int8 values, e4m3 bytes, scales, k mean); the
attention output must lie within ATTN_REL_L1 of the contract's output for the
same configuration, and its error against float64 must not exceed the
contract's own by more than ERROR_SLACK. Every test draws fresh random inputs
(the seed is printed on failure). The input-validation tests at the end need no GPU.
"""

import pytest
import torch

from sagelib import contract
from sagelib.backends.kernels import mma, operands, quantizers
from sagelib.contract.quantize import n_q_groups
from sagelib.measure import parity
from sagelib.measure.parity import ATTN_REL_L1, ERROR_SLACK, LSE_ABS

gpu = pytest.mark.gpu


_seed = parity.fresh_seed
_inputs = parity.random_qkv  # (b, hq, hkv, nq, nkv, d, dtype, layout, seed) on the GPU
_rel_l1 = parity.relative_l1


QK_CASES = [
    (preset, gran, dtype, layout, n, d)
    for preset in ("sm90", "sm89")
    for gran in ("per_thread", "per_warp")
    for dtype in (torch.float16, torch.bfloat16)
    for layout in ("HND", "NHD")
    for n, d in ((1, 128), (17, 64), (1000, 128), (4099, 64))
]


@gpu
@pytest.mark.parametrize("preset,gran,dtype,layout,n,d", QK_CASES)
def test_quantize_qk_is_bit_exact(preset, gran, dtype, layout, n, d):
    seed = _seed()
    q, k, _ = _inputs(2, 4, 2, n, n + 5, d, dtype, layout, seed)
    k_before = k.clone()
    ours = quantizers.quantize_qk(q, k, layout=layout, preset=preset, granularity=gran)
    ref = contract.quantize_qk(q, k, layout=layout, preset=preset, granularity=gran)
    msg = f"seed={seed}"
    assert torch.equal(k, k_before), "k was modified in place"
    assert torch.equal(ours.km, ref.km), f"k mean differs ({msg})"
    assert torch.equal(ours.q_scale, ref.q_scale), f"q_scale differs ({msg})"
    assert torch.equal(ours.k_scale, ref.k_scale), f"k_scale differs ({msg})"
    assert torch.equal(ours.q_int8, ref.q_int8), f"q_int8 differs in {int((ours.q_int8 != ref.q_int8).sum())} ({msg})"
    assert torch.equal(ours.k_int8, ref.k_int8), f"k_int8 differs in {int((ours.k_int8 != ref.k_int8).sum())} ({msg})"
    assert ours.flavour == ref.flavour


@gpu
@pytest.mark.parametrize("flavour", ["triton", "cuda"])
@pytest.mark.parametrize("smooth_k", [True, False])
def test_quantize_qk_flavours_and_no_smoothing(flavour, smooth_k):
    seed = _seed()
    q, k, _ = _inputs(1, 2, 2, 333, 333, 128, torch.float16, "HND", seed)
    kw = dict(preset="sm89", granularity="per_thread", flavour=flavour, smooth_k=smooth_k)
    ours, ref = quantizers.quantize_qk(q, k, **kw), contract.quantize_qk(q, k, **kw)
    assert (ours.km is None) == (ref.km is None)
    for name in ("q_int8", "q_scale", "k_int8", "k_scale"):
        assert torch.equal(getattr(ours, name), getattr(ref, name)), f"{name} differs (seed={seed})"


V_CASES = [
    (preset, accum, dtype, layout, n, d)
    for preset in ("sm90", "sm89")
    for accum in ("fp32+fp32", "fp32+fp16")
    for dtype in (torch.float16, torch.bfloat16)
    for layout in ("HND", "NHD")
    for n, d in ((1, 64), (17, 128), (1000, 64), (4099, 128))
]


@gpu
@pytest.mark.parametrize("preset,accum,dtype,layout,n,d", V_CASES)
def test_quantize_v_is_bit_exact(preset, accum, dtype, layout, n, d):
    seed = _seed()
    _, _, v = _inputs(2, 2, 3, 1, n, d, dtype, layout, seed)
    ours = quantizers.quantize_v(v, layout=layout, preset=preset, pv_accum=accum)
    ref = contract.quantize_v(v, layout=layout, preset=preset, pv_accum=accum)
    assert ours.v_fp8.shape == ref.v_fp8.shape
    assert torch.equal(ours.v_scale, ref.v_scale), f"v_scale differs (seed={seed})"
    diff = ours.v_fp8.view(torch.uint8) != ref.v_fp8.view(torch.uint8)
    assert not bool(diff.any()), f"v_fp8 differs in {int(diff.sum())} bytes (seed={seed})"


# (B, H_kv, N, D, dtype, layout, granularity): K and V through ONE quant_kv launch (what
# attention uses); the N=16384 cases have more items than the launcher's lag, so stats
# and apply items interleave and apply items re-read K and V after other heads' work.
FUSED_KV_CASES = [
    (2, 2, 1000, 128, torch.float16, "HND", "per_thread"),
    (1, 3, 4099, 64, torch.bfloat16, "NHD", "per_warp"),
    (2, 8, 16384, 128, torch.float16, "HND", "per_thread"),
    (1, 8, 16384 + 77, 64, torch.bfloat16, "HND", "per_warp"),
]


@gpu
@pytest.mark.parametrize("b,h,n,d,dtype,layout,gran", FUSED_KV_CASES)
def test_fused_kv_quantization_is_bit_exact(b, h, n, d, dtype, layout, gran):
    seed = _seed()
    q, k, v = _inputs(b, h, h, 64, n, d, dtype, layout, seed)
    p = mma.prepare(q, k, v, layout=layout, granularity=gran)
    ref_qk = contract.quantize_qk(q, k, layout=layout, preset=mma.ATTN_PRESET, granularity=gran)
    ref_v = contract.quantize_v(v, layout=layout, preset=mma.ATTN_PRESET, pv_accum="fp32+fp32")
    msg = f"seed={seed}"
    ref_k = ref_qk.k_int8 if layout == "HND" else ref_qk.k_int8.transpose(1, 2)
    assert torch.equal(p.k_int8[..., :d], ref_k), f"k_int8 differs in {int((p.k_int8[..., :d] != ref_k).sum())} ({msg})"
    assert torch.equal(p.k_scale, ref_qk.k_scale), f"k_scale differs ({msg})"
    ref_km = ref_qk.km.reshape(b, h, d) if layout == "HND" else ref_qk.km.transpose(1, 2).reshape(b, h, d)
    assert torch.equal(p.km[..., :d], ref_km), f"k mean differs ({msg})"
    assert torch.equal(p.v_scale[..., :d], ref_v.v_scale), f"v_scale differs ({msg})"
    diff = p.v_fp8[:, :, :d].view(torch.uint8) != ref_v.v_fp8.view(torch.uint8)
    assert not bool(diff.any()), f"v_fp8 differs in {int(diff.sum())} bytes ({msg})"


@gpu
@pytest.mark.parametrize("n,d,dtype,preset,gran,flavour", [(4099, 64, torch.float16, "sm89", "per_thread", "triton"),
                                                            (1000, 128, torch.bfloat16, "sm90", "per_thread", "cuda"),
                                                            (65, 128, torch.float16, "sm90", "per_warp", "triton")])
def test_q_blocks_of_64_and_128_tokens_give_the_same_bits(n, d, dtype, preset, gran, flavour):
    """The Q kernel's 64-token blocks (seq 174) and the 128-token ones K without smoothing takes: every Q group
    tile divides 64, so nothing may move."""
    seed = _seed()
    q, _, _ = _inputs(2, 3, 3, n, 64, d, dtype, "HND", seed)
    geometry, groups = operands.q_geometry(preset, gran), n_q_groups(n, preset, gran)
    ref, got = (quantizers.quantize_int8(q, geometry, groups, flavour, "HND", rows=rows) for rows in (128, 64))
    assert torch.equal(ref[0], got[0]) and torch.equal(ref[1], got[1]), f"seed={seed}"


def test_q_block_rows_are_checked():
    q = torch.randn(1, 2, 8, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match=r"rows: expected 128 or 64 tokens per block, a multiple of the group tile "
                                         r"\(128\), got 64"):
        quantizers.quantize_int8(q, operands.k_geometry("sm90", "per_thread"), 1, "cuda", "HND", rows=64)


# Non-finite input (the contract refuses it; check_finite=False, which CUDA graph capture needs,
# lets it through) must still come back. These run in a child process with a timeout, because
# the bug they guard against hung the GPU rather than failing.
_INFINITE_V_CHILD = """
import sys, torch
from sagelib.backends.kernels import mma, operands, quantizers
bad = float(sys.argv[1])
torch.manual_seed(0)
q, k, v = (torch.randn(1, 2, 1000, 128, device="cuda", dtype=torch.float16) for _ in range(3))
ref = mma.prepare(q, k, v, check_finite=False)
v[0, 1, 37, 5] = bad
got = mma.prepare(q, k, v, check_finite=False)
only_v = quantizers.quantize_v(v, preset="sm89", check_finite=False)
torch.cuda.synchronize()
head0 = lambda t: t[0, 0].view(torch.uint8) if t.dtype == torch.float8_e4m3fn else t[0, 0]
same = all(torch.equal(head0(getattr(got, f)), head0(getattr(ref, f))) for f in ("v_fp8", "v_scale", "k_int8", "km"))
print("head 0 unchanged:", same, "| v_scale of the channel:", got.v_scale[0, 1, 5].item(),
      only_v.v_scale.flatten()[128 + 5].item())
"""

_NONFINITE_ATTENTION_CHILD = """
import sys, torch
from sagelib import backends
from sagelib.backends.kernels import sm90, mma, operands, quantizers
runs = {"cuda": mma.attention}
if backends.get("cuda-sm90", require_available=False).unavailable_reason() is None:
    runs["cuda-sm90"] = sm90.attention
torch.manual_seed(0)
for d in (64, 128):
    clean = [torch.randn(2, 2, 300, d, device="cuda", dtype=torch.float16) for _ in range(3)]
    for name, attention in runs.items():
        ref = attention(*clean, check_finite=False)
        for which in range(3):
            for bad in (float("inf"), float("-inf"), float("nan")):
                qkv = [t.clone() for t in clean]
                qkv[which][0, 1, 77, 5] = bad
                out = attention(*qkv, check_finite=False, causal=which == 1)
                ref_b1 = ref if which != 1 else attention(*clean, check_finite=False, causal=True)
                torch.cuda.synchronize()
                print(name, d, "qkv"[which], bad, "returned; batch 1 unchanged:", torch.equal(out[1], ref_b1[1]),
                      flush=True)
"""


def _run_child(code: str, *args: str, timeout_s: int = 180):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")]))}
    try:
        run = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                             timeout=timeout_s, env=env, cwd=root)
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"no return within {timeout_s} s (a kernel polling for ever?); output so far:\n{exc.stdout}")
    assert run.returncode == 0, run.stderr[-3000:]
    return run.stdout


@gpu
@pytest.mark.parametrize("bad", ["inf", "-inf"])
def test_infinite_v_returns_instead_of_hanging(bad):
    # An infinite V made the channel's multiplier 0, which the K/V kernel's apply items read as
    # "not yet published" and polled for ever. It must return, leave the other heads alone and
    # give the channel an infinite scale.
    out = _run_child(_INFINITE_V_CHILD, bad, timeout_s=120)
    assert "head 0 unchanged: True | v_scale of the channel: inf inf" in out, out


@gpu
def test_attention_returns_on_non_finite_input():
    # Every backend, head_dim 64 and 128, +-inf and nan in each of q, k, v: each call returns,
    # and batch element 1 (clean; nothing is shared across the batch) gives the clean bits.
    out = _run_child(_NONFINITE_ATTENTION_CHILD)
    lines = [line for line in out.splitlines() if "returned" in line]
    assert len(lines) >= 18, out
    assert all(line.endswith("batch 1 unchanged: True") for line in lines), out


# (n_q, n_kv, d, dtype, layout, h_q, h_kv, causal, alignment, granularity, pv_accum)
ATTN_CASES = [
    (1, 1, 128, torch.float16, "HND", 4, 4, False, "bottom_right", "per_thread", "fp32+fp32"),
    (17, 17, 64, torch.bfloat16, "NHD", 4, 2, True, "bottom_right", "per_warp", "fp32+fp16"),
    (1000, 1000, 128, torch.float16, "NHD", 8, 2, False, "bottom_right", "per_thread", "fp32+fp16"),
    (1000, 1000, 64, torch.bfloat16, "HND", 4, 4, True, "bottom_right", "per_thread", "fp32+fp32"),
    (4099, 4099, 128, torch.bfloat16, "HND", 2, 1, True, "top_left", "per_warp", "fp32+fp32"),
    (4099, 4099, 64, torch.float16, "NHD", 4, 4, False, "bottom_right", "per_warp", "fp32+fp16"),
    (100, 1333, 128, torch.float16, "HND", 4, 2, True, "bottom_right", "per_thread", "fp32+fp32"),
    (100, 1333, 64, torch.float16, "HND", 4, 2, True, "top_left", "per_thread", "fp32+fp16"),
    (1333, 100, 128, torch.bfloat16, "NHD", 4, 4, True, "bottom_right", "per_thread", "fp32+fp32"),
    (1333, 100, 64, torch.float16, "HND", 2, 2, False, "bottom_right", "per_warp", "fp32+fp32"),
    (257, 4099, 128, torch.float16, "HND", 8, 1, False, "bottom_right", "per_thread", "fp32+fp32"),
    (65, 63, 96, torch.float16, "HND", 2, 2, True, "bottom_right", "per_thread", "fp32+fp32"),
    # K-biased, N a multiple of no tile, padded head dims (32 -> 64; 80, 96, 112 -> 128)
    (777, 777, 128, torch.bfloat16, "HND", 8, 2, False, "bottom_right", "per_thread", "fp32+fp32"),
    (777, 777, 32, torch.bfloat16, "NHD", 8, 2, False, "bottom_right", "per_thread", "fp32+fp32"),
    (777, 777, 80, torch.float16, "HND", 4, 4, True, "bottom_right", "per_warp", "fp32+fp16"),
    (777, 777, 96, torch.float16, "NHD", 8, 2, False, "bottom_right", "per_thread", "fp32+fp32"),
    (333, 333, 112, torch.bfloat16, "HND", 8, 2, True, "top_left", "per_thread", "fp32+fp32"),
]


@gpu
@pytest.mark.parametrize("kernel", ["mma", "sm90"])
def test_no_hidden_key_contributes_at_any_magnitude(kernel):
    from sagelib.backends.kernels import sm90
    from sagelib.measure import mask_probe

    if kernel == "sm90" and torch.cuda.get_device_capability() != (9, 0):
        pytest.skip("the Hopper kernel needs sm_90")
    attention = (mma if kernel == "mma" else sm90).attention
    rows = mask_probe.probe(lambda q, k, v: attention(q, k, v, causal=True), n=256, device="cuda")
    bad = [r for r in rows if r.leak != 0.0 or not r.finite]
    assert not bad, bad
    for dtype, magnitudes in mask_probe.REFUSED.items():  # up to the dtype's limit: refused, never NaN
        for magnitude in magnitudes:
            q, k, v = mask_probe.hidden_key_inputs(256, 128, magnitude, dtype, "cuda")
            with pytest.raises(ValueError, match="scores could reach"):
                attention(q, k, v, causal=True)


@gpu
@pytest.mark.parametrize("nq,nkv,d,dtype,layout,hq,hkv,causal,align,gran,accum", ATTN_CASES)
def test_attention_matches_contract(nq, nkv, d, dtype, layout, hq, hkv, causal, align, gran, accum):
    seed = _seed()
    q, k, v = _inputs(2, hq, hkv, nq, nkv, d, dtype, layout, seed)
    check = parity.check_attention(mma.attention, q, k, v, causal=causal, layout=layout,
                                   preset="sm89", granularity=gran,
                                   pv_accum=accum, causal_alignment=align)
    print(f"[parity] {nq}x{nkv} d{d} {dtype} {layout} gqa{hq}/{hkv} causal={causal}/{align} {gran}: {check}")
    assert check["output_passed"], f"{check} (seed={seed}; tolerances {ATTN_REL_L1}, x{ERROR_SLACK}, {LSE_ABS})"


#: the register-lean key loop that sm_120a / sm_121a build at head_dim 128 (kernels/attn_mma.cu, ATTN_LEAN), built
#: here for the GPU at hand: no sm_120 card runs in these tests, so this is how that code path meets the contract
LEAN_KEY_LOOP = ("-DATTN_LEAN=1",)


def _lean_attention(q, k, v, causal=False, sm_scale=None, layout="HND", preset="sm89", granularity="per_thread",
                    pv_accum="fp32+fp32", return_lse=False, **options):
    """mma.attention with the kernel built with LEAN_KEY_LOOP (the call's own keywords go to prepare by name;
    checked_options takes only the contract's extra options)."""
    options = operands.checked_options(mma.MMA_TARGET, preset, options)
    prepared = mma.prepare(q, k, v, causal=causal, sm_scale=sm_scale, layout=layout, granularity=granularity,
                           pv_accum=pv_accum, **options)
    return mma.run_attention(prepared, return_lse=return_lse, build_options=LEAN_KEY_LOOP)


@gpu
@pytest.mark.parametrize("nq,nkv,d,dtype,layout,hq,hkv,causal,align,gran,accum", [c for c in ATTN_CASES if c[2] > 64])
def test_the_lean_key_loop_of_sm120_matches_contract(nq, nkv, d, dtype, layout, hq, hkv, causal, align, gran, accum):
    # every case the default build meets at width 128 (head dims 80 to 128): both accumulators, GQA, ragged and
    # blind rows, both alignments, batch 2, so the epilogue's fresh block and thread indices land on every row
    seed = _seed()
    q, k, v = _inputs(2, hq, hkv, nq, nkv, d, dtype, layout, seed)
    check = parity.check_attention(_lean_attention, q, k, v, causal=causal, layout=layout, preset="sm89",
                                   granularity=gran, pv_accum=accum, causal_alignment=align)
    print(f"[parity lean] {nq}x{nkv} d{d} {dtype} {layout} gqa{hq}/{hkv} causal={causal}/{align} {gran} {accum}: "
          f"{check}")
    assert check["output_passed"], f"{check} (seed={seed}; tolerances {ATTN_REL_L1}, x{ERROR_SLACK}, {LSE_ABS})"


@gpu
def test_backend_runs_and_kernel_only_matches():
    from sagelib import backends

    backend = backends.get("cuda")
    q, k, v = _inputs(1, 4, 4, 300, 300, 128, torch.float16, "HND", _seed())
    out = backend.attention(q, k, v, causal=True)
    again = backend.kernel_only(q, k, v, causal=True)()
    assert torch.equal(out, again)


@gpu
def test_parity_sweep_rows_pass_on_the_gpu():
    rows = [parity.run_case(c, "cuda") for c in parity.default_sweep(n_values=(17, 300), head_dims=(64, 128))]
    assert all(r["kernel"] == "run" for r in rows)
    assert all(r["passed"] for r in rows), [r["label"] for r in rows if not r["passed"]]
    maps = parity.error_report(parity.ParityCase(300, 300, 128), "cuda")
    assert maps["kernel_runs"] and maps["kernel_vs_contract"].shape == (4, 3)
    assert float(maps["kernel_vs_contract"].max()) <= ATTN_REL_L1 * 5  # per block, not the whole output


# ---------------------------------------------------------------- no GPU needed


def test_sweep_covers_every_factor_and_says_why_the_kernel_did_not_run():
    cases = parity.default_sweep()
    for field, values in (("dtype", {"fp16", "bf16"}), ("layout", {"HND", "NHD"}), ("causal", {True, False}),
                          ("alignment", {"bottom_right", "top_left"}), ("granularity", {"per_thread", "per_warp"}),
                          ("pv_accum", {"fp32+fp32", "fp32+fp16"}), ("head_dim", {64, 128})):
        assert {getattr(c, field) for c in cases} == values, field
    assert {1, 17, 1000, 4099} <= {c.n_q for c in cases}
    assert any(c.n_q < c.n_kv for c in cases) and any(c.n_q > c.n_kv for c in cases)
    row = parity.run_case(parity.ParityCase(5, 9, 64, causal=True), device="cpu", seed=3)
    assert row["kernel"] == "not run" and "no GPU" in row["reason"] and row["passed"] is None
    assert 0 < row["contract_err"] < 0.2
    grid, labels, checks = parity.pass_grid([row])
    assert bool(grid.isnan().all()) and labels == [row["label"]] and len(checks) == grid.shape[1]


def test_check_attention_passes_the_contract_itself_and_fails_a_scaled_output():
    q, k, v = parity.random_qkv(1, 2, 1, 40, 70, 64, torch.float16, "NHD", seed=3, device="cpu")
    options = dict(causal=True, layout="NHD", preset="sm89", granularity="per_warp", pv_accum="fp32+fp16",
                   causal_alignment="top_left")
    same = parity.check_attention(contract.attention, q, k, v, **options)
    assert same["output_passed"] and same["to_contract"] == 0.0 and same["lse_err"] == 0.0

    def scaled(q, k, v, **kw):
        out, lse = contract.attention(q, k, v, **kw)
        return out * 1.05, lse

    off = parity.check_attention(scaled, q, k, v, **options)
    assert not off["output_passed"] and off["to_contract"] > ATTN_REL_L1


def test_error_maps_have_block_shapes():
    q, k, _ = parity.make_inputs(parity.ParityCase(200, 130, 64), "cpu", seed=0)
    scores = parity.score_error_blocks(q, k, block_q=128, block_k=64)
    assert scores.shape == (2, 3) and bool((scores > 0).all()) and bool((scores < 0.1).all())


# ---------------------------------------------------------------- input validation (no GPU needed)


def test_cpu_tensors_are_refused_with_the_fix():
    q = torch.randn(1, 2, 8, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match="q: expected a CUDA tensor"):
        mma.attention(q, q, q)


def test_wrong_preset_and_options_are_refused():
    q = torch.randn(1, 2, 8, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match="preset"):
        mma.attention(q, q, q, preset="sm90")
    with pytest.raises(ValueError, match="options"):
        mma.attention(q, q, q, exact=True)


def test_contract_checks_come_first():
    q = torch.randn(1, 2, 8, 64, dtype=torch.float32)
    with pytest.raises(ValueError, match="q: expected dtype"):
        mma.attention(q, q, q)
    big = torch.randn(1, 2, 8, 192, dtype=torch.float16)
    with pytest.raises(ValueError, match="head_dim"):
        quantizers.quantize_qk(big, big)
