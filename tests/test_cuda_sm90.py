"""Parity of the Hopper kernel (kernels/attn_sm90.cu) with the contract's sm90 preset.

GPU tests (an sm_90 GPU: H100/H200) follow tests/test_cuda_parity.py stage by stage:
the V operand the kernel reads is the contract's sm90 V with every 16 tokens in the
sm89 order (bit for bit), the output lies within ATTN_REL_L1 of the contract's output
for the same configuration and its error against float64 is no larger than the
contract's (times ERROR_SLACK), the lse agrees within LSE_ABS. Fresh random inputs
each time; the seed is in every failure message. The expected values come from the
contract (CPU semantics on the GPU tensors), never from the kernel.
CPU tests: the launcher's checks and the shared-memory budget.
"""

import pytest
import torch

from sagelib import contract
from sagelib.backends.kernels import sm90
from sagelib.contract import presets as P
from sagelib.measure import parity
from sagelib.measure.parity import ATTN_REL_L1, ERROR_SLACK, LSE_ABS

gpu = pytest.mark.gpu


def _needs_sm90():
    reason = sm90.unavailable_reason()
    if reason:
        pytest.skip(reason)


_seed = parity.fresh_seed
_inputs = parity.random_qkv  # (b, hq, hkv, nq, nkv, d, dtype, layout, seed) on the GPU
_rel_l1 = parity.relative_l1


@gpu
@pytest.mark.parametrize("n,d,dtype,layout", [(1, 64, torch.float16, "HND"), (1000, 128, torch.bfloat16, "NHD"),
                                              (4099, 64, torch.float16, "NHD"), (300, 96, torch.float16, "HND")])
def test_v_operand_is_the_contract_v_permuted_in_16s(n, d, dtype, layout):
    _needs_sm90()
    seed = _seed()
    q, k, v = _inputs(2, 4, 2, 64, n, d, dtype, layout, seed)
    p = sm90.prepare(q, k, v, layout=layout)
    ref = contract.quantize_v(v, layout=layout, preset="sm90", pv_accum="fp32+fp32")
    assert p.v_fp8.shape[-1] % 128 == 0 and p.v_fp8.shape[-1] == ref.v_fp8.shape[-1]
    expected = parity.sm89_permuted(ref.v_fp8)
    assert torch.equal(p.v_scale[..., :d], ref.v_scale), f"v_scale differs (seed={seed})"
    diff = p.v_fp8[:, :, :d].view(torch.uint8) != expected
    assert not bool(diff.any()), f"v_fp8 differs in {int(diff.sum())} bytes (seed={seed})"


# (n_q, n_kv, d, dtype, layout, h_q, h_kv, causal, alignment, granularity)
SM90_CASES = [
    (1, 1, 128, torch.float16, "HND", 4, 4, False, "bottom_right", "per_thread"),
    (17, 17, 64, torch.bfloat16, "NHD", 4, 2, True, "bottom_right", "per_warp"),
    (1000, 1000, 128, torch.float16, "NHD", 8, 2, False, "bottom_right", "per_thread"),
    (1000, 1000, 64, torch.bfloat16, "HND", 4, 4, True, "bottom_right", "per_thread"),
    (4099, 4099, 128, torch.bfloat16, "HND", 2, 1, True, "top_left", "per_warp"),
    (4099, 4099, 64, torch.float16, "NHD", 4, 4, False, "bottom_right", "per_warp"),
    (100, 1333, 128, torch.float16, "HND", 4, 2, True, "bottom_right", "per_thread"),
    (100, 1333, 64, torch.float16, "HND", 4, 2, True, "top_left", "per_thread"),
    (1333, 100, 128, torch.bfloat16, "NHD", 4, 4, True, "bottom_right", "per_thread"),
    (1333, 100, 64, torch.float16, "HND", 2, 2, False, "bottom_right", "per_warp"),
    (257, 4099, 128, torch.float16, "HND", 8, 1, False, "bottom_right", "per_thread"),
    (65, 63, 96, torch.float16, "HND", 2, 2, True, "bottom_right", "per_thread"),
    (2048, 2048, 128, torch.float16, "HND", 3, 3, True, "bottom_right", "per_thread"),
]


# The three-consumer geometry (cta_k 64): the sm90 preset with 64-key steps; P.V in two halves at 128.
K64_CASES = [
    (1, 1, 64, torch.float16, "HND", 4, 4, False, "bottom_right", "per_thread"),
    (17, 17, 128, torch.bfloat16, "NHD", 4, 2, True, "bottom_right", "per_warp"),
    (1000, 1000, 64, torch.bfloat16, "HND", 4, 4, True, "bottom_right", "per_thread"),
    (1000, 1000, 128, torch.float16, "NHD", 8, 2, False, "bottom_right", "per_thread"),
    (4099, 4099, 64, torch.float16, "NHD", 4, 4, False, "bottom_right", "per_warp"),
    (4099, 4099, 128, torch.bfloat16, "HND", 2, 1, True, "top_left", "per_warp"),
    (100, 1333, 64, torch.float16, "HND", 4, 2, True, "top_left", "per_thread"),
    (1333, 100, 96, torch.float16, "HND", 2, 2, True, "bottom_right", "per_warp"),
    (65, 63, 48, torch.float16, "HND", 2, 2, True, "bottom_right", "per_thread"),
    (2048, 2048, 128, torch.float16, "HND", 3, 3, True, "bottom_right", "per_thread"),
    (130, 4099, 64, torch.bfloat16, "NHD", 8, 1, False, "bottom_right", "per_thread"),
    # K-biased, N a multiple of no tile, padded head dims (32 -> 64; 80, 96, 112 -> 128)
    (777, 777, 128, torch.bfloat16, "HND", 8, 2, False, "bottom_right", "per_thread"),
    (777, 777, 32, torch.bfloat16, "NHD", 8, 2, False, "bottom_right", "per_thread"),
    (777, 777, 80, torch.float16, "HND", 4, 4, True, "bottom_right", "per_warp"),
    (777, 777, 96, torch.float16, "NHD", 8, 2, False, "bottom_right", "per_thread"),
    (333, 333, 112, torch.bfloat16, "HND", 8, 2, True, "top_left", "per_thread"),
]


@gpu
@pytest.mark.parametrize("nq,nkv,d,dtype,layout,hq,hkv,causal,align,gran,cta_k",
                         [(*c, None) for c in SM90_CASES] + [(*c, 64) for c in K64_CASES])
def test_sm90_attention_matches_contract(nq, nkv, d, dtype, layout, hq, hkv, causal, align, gran, cta_k):
    _assert_matches_contract(nq, nkv, d, dtype, layout, hq, hkv, causal, align, gran, cta_k, "fp32+fp32")


def _assert_matches_contract(nq, nkv, d, dtype, layout, hq, hkv, causal, align, gran, cta_k, pv_accum):
    """sm90.attention on fresh random inputs against the contract's sm90 preset in the same configuration."""
    _needs_sm90()
    seed = _seed()
    q, k, v = _inputs(2, hq, hkv, nq, nkv, d, dtype, layout, seed)
    check = parity.check_attention(sm90.attention, q, k, v, causal=causal, layout=layout, preset="sm90",
                                   granularity=gran, pv_accum=pv_accum, causal_alignment=align, cta_k=cta_k)
    print(f"[parity sm90 {pv_accum} cta_k {cta_k}] {nq}x{nkv} d{d} {dtype} {layout} gqa{hq}/{hkv} "
          f"causal={causal}/{align} {gran}: {check}")
    assert check["output_passed"], f"{check} (seed={seed}; tolerances {ATTN_REL_L1}, x{ERROR_SLACK}, {LSE_ABS})"


@gpu
@pytest.mark.parametrize("stages,cta_k,d", [(2, None, 128), (3, None, 128), (3, None, 64), (10, None, 64), (3, 64, 64),
                                            (12, 64, 64), (4, 64, 128)])
def test_every_ring_depth_gives_the_same_bits(stages, cta_k, d):
    _needs_sm90()
    q, k, v = _inputs(1, 4, 4, 700, 1500, d, torch.float16, "HND", _seed())
    p = sm90.prepare(q, k, v, causal=True)
    assert torch.equal(sm90.run_attention(p, stages=stages, cta_k=cta_k), sm90.run_attention(p, cta_k=cta_k))


@gpu
@pytest.mark.parametrize("nq,nkv,causal,align,gran,hq,hkv", [(1000, 1000, False, "bottom_right", "per_thread", 4, 4),
                                                          (100, 1333, True, "bottom_right", "per_thread", 4, 2),
                                                          (777, 777, True, "top_left", "per_warp", 2, 2),
                                                          (1333, 100, True, "bottom_right", "per_warp", 4, 1)])
def test_three_consumers_at_d64_give_the_two_consumer_bits(nq, nkv, causal, align, gran, hq, hkv):
    """Head_dim 64 runs three consumer warpgroups on the preset's 128-key step (log seq 58); the two-consumer
    build of the same preset must give the same output and lse, bit for bit (192- against 128-row tiles)."""
    _needs_sm90()
    seed = _seed()
    q, k, v = _inputs(2, hq, hkv, nq, nkv, 64, torch.float16, "HND", seed)
    p = sm90.prepare(q, k, v, causal=causal, causal_alignment=align, granularity=gran)
    assert sm90.geometry_for(None, 64) == sm90.PRESET_D64_GEOMETRY
    three = sm90.run_attention(p, return_lse=True)
    two = sm90.run_attention(p, return_lse=True, geometry=sm90.PRESET_GEOMETRY)
    assert torch.equal(three[0], two[0]) and torch.equal(three[1], two[1]), f"seed={seed}"


@gpu
def test_persistent_grid_covers_more_tiles_than_sms():
    """More tiles than SMs (each CTA walks several) and the causal heaviest-first order: equal to the contract."""
    _needs_sm90()
    seed = _seed()
    q, k, v = _inputs(2, 20, 4, 1100, 1100, 64, torch.float16, "HND", seed)  # 9 x 20 x 2 = 360 tiles
    for causal in (False, True):
        out = sm90.attention(q, k, v, causal=causal)
        ref = contract.attention(q, k, v, causal=causal, preset="sm90")
        assert _rel_l1(out, ref) <= ATTN_REL_L1, f"causal={causal} seed={seed}"


@gpu
def test_canonical_accuracy_is_the_contract_sm90_accuracy():
    """The ANCHORS accuracy input (B1 H8 N4096 D128, k with a 4x channel bias) against float64."""
    _needs_sm90()
    from sagelib.contract import metrics

    q, k, v = _inputs(1, 8, 8, 4096, 4096, 128, torch.float16, "HND", 0)
    exact = contract.reference_attention(q, k, v)
    ours = metrics.compare(sm90.attention(q, k, v), exact)
    ref = metrics.compare(contract.attention(q, k, v, preset="sm90"), exact)
    print(f"[accuracy sm90] ours {ours} contract {ref}")
    assert ours.cosine >= ref.cosine - 1e-5
    assert ours.relative_l1 <= ref.relative_l1 * ERROR_SLACK


@gpu
def test_backend_runs_and_kernel_only_matches():
    _needs_sm90()
    from sagelib import backends

    backend = backends.get("cuda-sm90")
    q, k, v = _inputs(1, 4, 4, 300, 300, 128, torch.float16, "HND", _seed())
    out = backend.attention(q, k, v, causal=True)
    assert torch.equal(out, backend.kernel_only(q, k, v, causal=True)())
    assert backends.resolve_auto() == "cuda-sm90"
    k64 = backends.get("cuda-sm90-k64")
    q, k, v = _inputs(1, 4, 4, 300, 300, 64, torch.float16, "HND", _seed())
    out = k64.attention(q, k, v, causal=True)
    assert torch.equal(out, k64.kernel_only(q, k, v, causal=True)())
    assert torch.equal(out, sm90.attention(q, k, v, causal=True, cta_k=64))


@gpu
@pytest.mark.parametrize("backend", ["cuda-sm90", "cuda-sm90-k64"])
def test_parity_sweep_rows_pass_on_the_hopper_kernel(backend):
    _needs_sm90()
    rows = [parity.run_case(c, "cuda", backend=backend)
            for c in parity.default_sweep(n_values=(17, 300), head_dims=(64, 128))]
    assert all(r["kernel"] == "run" and r["preset"] == "sm90" and r["pv_accum"] == "fp32+fp32" for r in rows)
    assert all(r["cta_k"] == parity.KERNEL_CTA_K.get(backend) for r in rows)
    assert all(r["passed"] for r in rows), [r["label"] for r in rows if not r["passed"]]


# ---------------------------------------------------------------- no GPU needed


def test_geometry_follows_cta_k_and_refuses_what_is_not_built():
    assert sm90.geometry_for(None) == sm90.geometry_for(128) == sm90.PRESET_GEOMETRY
    d64 = sm90.geometry_for(None, head_dim=64)  # the preset at head_dim 64: three consumers, 128-key steps
    assert d64 == sm90.PRESET_D64_GEOMETRY
    assert (d64.consumers, d64.block_keys, d64.threads, d64.cta_q) == (3, 128, 512, 192)
    assert sm90.check_stages(64, None) == 6
    # Q tiles, ring stages, channel scales, 12 warps' output staging, 16 mbarriers, tile indices, the decode's
    # five divisors, padding to the struct's 8-byte alignment, alignment slack
    assert sm90.shared_memory_bytes(64, 6) == (2 * 192 * 64 + 6 * 2 * 128 * 64 + 2 * 64 * 4 + 12 * 16 * (128 + 16)
                                                   + 8 * 16 + 8 + 5 * 12 + 4 + 1024)
    with pytest.raises(ValueError,
                       match=r"geometry: Geometry\(consumers=2, block_keys=64\) is not built at head_dim 64"):
        sm90.check_stages(64, None, sm90.Geometry(2, 64))
    k64 = sm90.geometry_for(64)
    assert (k64.consumers, k64.block_keys, k64.threads, k64.cta_q) == (3, 64, 512, 192)
    with pytest.raises(ValueError, match="cta_k: the sm_90a kernel is built for None .* or 64 keys, got 32"):
        sm90.geometry_for(32)
    q = torch.randn(1, 2, 8, 96, dtype=torch.float16)  # refused before anything is quantized (or moved to a GPU)
    with pytest.raises(ValueError, match="cta_k: the sm_90a kernel is built for"):
        sm90.attention(q, q, q, cta_k=96)
    # two Q tiles of 192 rows, 8 stages of 64-key K and V^T, two slots' channel scales, 12 warps' output
    # staging, 20 mbarriers, two tile indices, the decode's five divisors, padding to 8 bytes, alignment slack
    assert sm90.shared_memory_bytes(64, 8, k64) == (2 * 192 * 64 + 8 * 2 * 64 * 64 + 2 * 64 * 4
                                                        + 12 * 16 * (128 + 16) + 8 * 20 + 8 + 5 * 12 + 4 + 1024)
    assert sm90.check_stages(64, None, k64) == 8 and sm90.check_stages(128, None, k64) == 6
    with pytest.raises(ValueError, match="stages: expected an int in 2..21 at head_dim 64"):
        sm90.check_stages(64, 40, k64)


def test_parity_rows_name_the_kernel_and_its_mode():
    row = parity.run_case(parity.ParityCase(5, 9, 64, pv_accum="fp32+fp16"), "cpu", seed=1, backend="cuda-sm90")
    assert row["kernel"] == "not run" and row["preset"] == "sm90" and row["pv_accum"] == "fp32+fp32"
    assert "fp32+fp32" in row["label"] and 0 < row["contract_err"] < 0.2 and row["cta_k"] is None
    row = parity.run_case(parity.ParityCase(5, 9, 64, pv_accum="fp32+fp16"), "cpu", seed=1, backend="cuda-sm90-k64")
    assert (row["kernel"], row["preset"], row["pv_accum"], row["cta_k"]) == ("not run", "sm90", "fp32+fp32", 64)
    with pytest.raises(ValueError, match="backend: expected one of"):
        parity.run_case(parity.ParityCase(5, 9, 64), "cpu", backend="sdpa-flash")


def test_sm89_permutation_moves_every_16_tokens():
    x = torch.arange(32, dtype=torch.uint8).view(torch.float8_e4m3fn).reshape(1, 32)
    expected = [*P.SM89_V_PERMUTATION, *(16 + t for t in P.SM89_V_PERMUTATION)]
    assert parity.sm89_permuted(x).flatten().tolist() == expected


def test_shared_memory_budget_and_stage_checks():
    # two Q tiles, 4 stages of K and V^T, two slots' channel scales, 8 warps' output staging (16 rows of
    # 256 + 16 bytes), 12 mbarriers, two tile indices, the decode's five divisors, padding to the struct's
    # 8-byte alignment, alignment slack
    assert sm90.shared_memory_bytes(128, 4) == (2 * 128 * 128 + 4 * 2 * 128 * 128 + 2 * 128 * 4
                                                    + 8 * 16 * (256 + 16) + 8 * 12 + 8 + 5 * 12 + 4 + 1024)
    assert sm90.check_stages(64, None) >= 2
    for bad in (1, 7, "3"):
        with pytest.raises(ValueError, match="stages: expected an int in 2..4 at head_dim 128"):
            sm90.check_stages(128, bad)


def test_environment_options_are_macro_words_only(monkeypatch):
    monkeypatch.delenv(sm90.OPTIONS_ENV, raising=False)
    assert sm90.environment_options() == ()
    monkeypatch.setenv(sm90.OPTIONS_ENV, " -DSM90_ABLATE_PACK=1  -USM90_TRACE ")
    assert sm90.environment_options() == ("-DSM90_ABLATE_PACK=1", "-USM90_TRACE")
    monkeypatch.setenv(sm90.OPTIONS_ENV, "-DSM90_ABLATE_PACK=1 --use_fast_math")
    with pytest.raises(ValueError, match=r"SAGELIB_SM90_OPTIONS: expected -DNAME\[=VALUE\] or -UNAME words, "
                                         r"got \['--use_fast_math'\]"):
        sm90.environment_options()


def test_bad_input_is_refused_with_the_fix():
    q = torch.randn(1, 2, 8, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match="preset: the sm_90a kernel's geometry is the 'sm90' preset"):
        sm90.attention(q, q, q, preset="sm89")
    with pytest.raises(ValueError, match="options"):
        sm90.attention(q, q, q, exact=True)
    with pytest.raises(ValueError, match="q: expected a CUDA tensor"):
        sm90.attention(q, q, q)
    with pytest.raises(ValueError, match="q: expected dtype"):
        sm90.attention(q.float(), q.float(), q.float())


def test_a_trace_buffer_of_the_wrong_shape_is_refused_before_launch():
    from types import SimpleNamespace
    prepared = SimpleNamespace(q_int8=torch.zeros(1, 2, 8, 128, dtype=torch.int8),
                               k_int8=torch.zeros(1, 2, 8, 128, dtype=torch.int8))
    old_shape = torch.zeros(8, 64, 6, dtype=torch.int64)  # the layout before the tile rows
    with pytest.raises(ValueError, match=r"trace: expected an int64 tensor of shape \(9, 96, 6\)"):
        sm90.run_attention(prepared, trace=old_shape)
    with pytest.raises(ValueError, match="got torch.int32"):
        sm90.run_attention(prepared, trace=torch.zeros(sm90.TRACE_SHAPE, dtype=torch.int32))


def test_unavailable_reason_names_the_alternative(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (8, 9))
    assert "use the 'cuda' backend" in sm90.unavailable_reason()


def test_both_kernels_read_the_same_flag_bits():
    """operands.kernel_flags builds one `flags` argument for attn_mma.cu and attn_sm90.cu: both read the bits of
    AttnFlags (params.cuh), which operands takes its values from; neither kernel defines bits of its own."""
    import re

    from sagelib.backends.kernels import operands
    from sagelib.cuda import params
    from sagelib.cuda.build import INCLUDE_DIR, KERNELS_DIR

    flags = params.attn_flags()
    assert (operands.ATTN_CAUSAL, operands.ATTN_PER_THREAD, operands.ATTN_OUT_BF16) == \
        (flags["ATTN_CAUSAL"], flags["ATTN_PER_THREAD"], flags["ATTN_OUT_BF16"]) == (1, 2, 4)
    assert not re.search(r"#define ATTN_(CAUSAL|PER_THREAD|OUT_BF16)\b", (KERNELS_DIR / "attn_mma.cu").read_text())
    sm90 = dict(re.findall(r"#define SM90_(CAUSAL|PER_THREAD|OUT_BF16) (\w+)",
                           (INCLUDE_DIR / "attn_sm90" / "mainloop.cuh").read_text()))
    assert sm90 == {"CAUSAL": "ATTN_CAUSAL", "PER_THREAD": "ATTN_PER_THREAD", "OUT_BF16": "ATTN_OUT_BF16"}


def test_a_causal_call_takes_the_causal_instance_where_one_is_built():
    from types import SimpleNamespace

    from sagelib.cuda import instances

    def call(head_dim, causal):
        return SimpleNamespace(q_int8=torch.empty(1, 1, 1, head_dim), causal=causal)

    d64, d128 = sm90.geometry_for(None, 64), sm90.geometry_for(None, 128)
    assert sm90.kernel_instance(call(64, True), 6, d64) == "attn_sm90_kernel<64, 6, 3, 128, true>"
    assert sm90.kernel_instance(call(64, False), 6, d64) == "attn_sm90_kernel<64, 6, 3, 128, false>"
    # 128-row tiles on 128-key blocks: every warpgroup sees the tile's blocks, so there is no causal instance
    assert sm90.kernel_instance(call(128, True), 4, d128) == "attn_sm90_kernel<128, 4, 2, 128, false>"
    assert sm90.kernel_instance(call(64, True), 6, d64, causal_instance=False).endswith("false>")
    for head_dim, causal, geometry in ((64, False, d64), (128, True, d128)):
        with pytest.raises(ValueError, match="causal_instance: True needs a causal call in a geometry with a causal"):
            sm90.kernel_instance(call(head_dim, causal), 6, geometry, causal_instance=True)
    # what the launcher can pick is what `sagelib kernels check` compiles and `kernels build` caches
    built = instances.INSTANCES["attn_sm90.cu"]
    assert "attn_sm90_kernel<64, 6, 3, 128, true>" in built and "attn_sm90_kernel<64, 6, 3, 128, false>" in built
    assert sum(name.endswith("true>") for name in built) == len(instances.SM90_CAUSAL_ONLY)


# ---- the fp32+fp16 inner level (build option SM90_PV_F16; issue 37) ----------------------------------------

# One-pass geometries only: the preset at both head dims (two and three consumers) and cta_k 64 at head_dim 64.
FP16_INNER_CASES = [
    (1, 1, 128, torch.float16, "HND", 4, 4, False, "bottom_right", "per_thread", None),
    (17, 17, 64, torch.bfloat16, "NHD", 4, 2, True, "bottom_right", "per_warp", None),
    (1000, 1000, 128, torch.float16, "NHD", 8, 2, False, "bottom_right", "per_thread", None),
    (1000, 1000, 64, torch.bfloat16, "HND", 4, 4, True, "bottom_right", "per_thread", None),
    (4099, 4099, 128, torch.bfloat16, "HND", 2, 1, True, "top_left", "per_warp", None),
    (100, 1333, 128, torch.float16, "HND", 4, 2, True, "bottom_right", "per_thread", None),
    (777, 777, 96, torch.float16, "NHD", 8, 2, False, "bottom_right", "per_thread", None),
    (1000, 1000, 64, torch.float16, "HND", 4, 4, False, "bottom_right", "per_thread", 64),
]


@gpu
@pytest.mark.parametrize("nq,nkv,d,dtype,layout,hq,hkv,causal,align,gran,cta_k", FP16_INNER_CASES)
def test_fp16_inner_level_matches_its_contract_twin(nq, nkv, d, dtype, layout, hq, hkv, causal, align, gran, cta_k):
    """pv_accum='fp32+fp16' on the sm_90a kernel against the contract's sm90 preset with the same mode (64-key fp16
    partials, V at 2.25): the usual parity bars."""
    _assert_matches_contract(nq, nkv, d, dtype, layout, hq, hkv, causal, align, gran, cta_k, "fp32+fp16")


def test_fp16_inner_level_is_built_only_for_the_one_pass_geometries():
    from types import SimpleNamespace

    plain = SimpleNamespace(pv_accum="fp32+fp32")
    assert sm90.fp16_inner_options(plain, 128, sm90.PRESET_GEOMETRY) == ()
    asked = SimpleNamespace(pv_accum="fp32+fp16")
    for width, geometry in ((128, sm90.PRESET_GEOMETRY), (64, sm90.PRESET_D64_GEOMETRY),
                            (64, sm90.ROTATION_GEOMETRY)):
        assert sm90.fp16_inner_options(asked, width, geometry) == sm90.FP16_INNER_OPTIONS
    with pytest.raises(ValueError, match="two channel passes: use cta_k=None"):
        sm90.fp16_inner_options(asked, 128, sm90.ROTATION_GEOMETRY)
    q = torch.randn(1, 2, 8, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match="q: expected a CUDA tensor"):  # the mode is accepted: the input's turn
        sm90.attention(q, q, q, pv_accum="fp32+fp16")
