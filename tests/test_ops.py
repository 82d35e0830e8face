"""sagelib.attention (the sagelib::attention op) and sdpa_routed on the CPU, where the contract runs.

Exact attention (SDPA in fp32) is the yardstick: the op must land within the contract's error of it, with SDPA's
conventions (top-left causal when N_q != N_kv, enable_gqa, scale). The GPU twins are in tests/test_ops_gpu.py.
"""

import pytest
import torch
import torch.nn.functional as F

import sagelib
from sagelib.contract.metrics import relative_l1
from sagelib.ops import op


def _qkv(b=1, h=4, h_kv=2, n_q=96, n_kv=96, d=64, dtype=torch.float16, seed=0):
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(b, h, n_q, d, generator=g).to(dtype), torch.randn(b, h_kv, n_kv, d, generator=g).to(dtype),
            torch.randn(b, h_kv, n_kv, d, generator=g).to(dtype))


def _exact(q, k, v, **kw):
    return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), **kw)


@pytest.mark.parametrize("causal", [False, True])
def test_the_op_is_sdpa_within_the_contracts_error(causal):
    q, k, v = _qkv()
    out = sagelib.attention(q, k, v, is_causal=causal, enable_gqa=True)
    assert out.shape == q.shape and out.dtype == q.dtype and out.is_contiguous()
    assert relative_l1(out, _exact(q, k, v, is_causal=causal, enable_gqa=True)) < 0.06


def test_causal_is_aligned_top_left_as_sdpa_aligns_it():
    q, k, v = _qkv(n_q=40, n_kv=100)
    out = sagelib.attention(q, k, v, is_causal=True, enable_gqa=True)
    top_left = _exact(q, k, v, is_causal=True, enable_gqa=True)
    keep = torch.ones(40, 100, dtype=torch.bool).tril(diagonal=60)  # the bottom-right alignment, for contrast
    bottom_right = _exact(q, k, v, attn_mask=keep, enable_gqa=True)
    assert relative_l1(out, top_left) < 0.06 < relative_l1(out, bottom_right)


def test_scale_and_strided_inputs_follow_sdpa():
    q, k, v = _qkv(h=2, h_kv=2)
    nhd = [x.transpose(1, 2).contiguous().transpose(1, 2) for x in (q, k, v)]  # [B,N,H,D] storage, HND view
    out = sagelib.attention(*nhd, scale=0.05)
    assert relative_l1(out, _exact(q, k, v, scale=0.05)) < 0.06


def test_fp32_needs_a_cast_and_comes_back_fp32():
    q, k, v = (x.float() for x in _qkv(h=2, h_kv=2))
    with pytest.raises(ValueError, match="cast=torch.float16"):
        sagelib.attention(q, k, v)
    out = sagelib.attention(q, k, v, cast=torch.bfloat16)
    assert out.dtype == torch.float32 and relative_l1(out, _exact(q, k, v)) < 0.06


@pytest.mark.parametrize("call,match", [
    (dict(attn_mask=torch.ones(96, 96, dtype=torch.bool)), "attn_mask: sagelib.attention takes no mask"),
    (dict(dropout_p=0.1), "dropout_p"),
    (dict(enable_gqa=False), "needs enable_gqa=True"),
    (dict(backend="sdpa-flash"), "backend: expected one of"),
    (dict(cast=torch.float32), "cast: expected"),
])
def test_what_is_not_supported_says_so(call, match):
    q, k, v = _qkv()
    call = {"enable_gqa": True, **call}
    with pytest.raises(ValueError, match=match):
        sagelib.attention(q, k, v, **call)
    with pytest.raises(ValueError, match="4-d tensor"):
        sagelib.attention(q[0], k[0], v[0], enable_gqa=True)


def test_opcheck_passes():
    q, k, v = _qkv(h=2, h_kv=1, n_q=16, n_kv=24, d=32)
    torch.library.opcheck(torch.ops.sagelib.attention.default, (q, k, v, True, 0.2, "auto"))


def test_the_fake_kernel_gives_the_real_shape_dtype_and_strides():
    from torch._subclasses.fake_tensor import FakeTensorMode

    q, k, v = _qkv(n_q=32, n_kv=48, dtype=torch.bfloat16)
    real = torch.ops.sagelib.attention(q, k, v)
    with FakeTensorMode() as mode:
        fake = torch.ops.sagelib.attention(*(mode.from_tensor(x) for x in (q, k, v)))
    assert (fake.shape, fake.dtype, fake.stride()) == (real.shape, real.dtype, real.stride())


def test_routing_swaps_sdpa_and_puts_it_back():
    original = F.scaled_dot_product_attention
    q, k, v = _qkv(h=2, h_kv=2)
    with sagelib.sdpa_routed() as routed:
        assert F.scaled_dot_product_attention is not original
        out = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        masked = F.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(96, 96, dtype=torch.bool))
    assert F.scaled_dot_product_attention is original
    assert torch.equal(out, sagelib.attention(q, k, v, is_causal=True))
    assert torch.equal(masked, original(q, k, v, attn_mask=torch.ones(96, 96, dtype=torch.bool)))
    assert (routed.routed, routed.fallback) == (1, 1) and "attn_mask" in str(routed)
    with pytest.raises(RuntimeError, match="boom"), sagelib.sdpa_routed():
        raise RuntimeError("boom")
    assert F.scaled_dot_product_attention is original


def test_routing_without_fallback_refuses():
    q, k, v = _qkv(h=2, h_kv=2)
    with pytest.raises(ValueError, match="fallback=False.*dropout_p"), sagelib.sdpa_routed(fallback=False):
        F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)
    with pytest.raises(ValueError, match="backend"):
        with sagelib.sdpa_routed("nope"):
            pass


def test_auto_is_the_contract_on_cpu():
    assert op.resolve("auto", torch.device("cpu")) == "reference"
    assert op.resolve("cuda", torch.device("cpu")) == "cuda"


def test_a_compiled_model_with_the_op_matches_eager():
    from sagelib.studies import in_a_model

    config = in_a_model.ModelConfig(layers=1, d_model=64, heads=4, kv_heads=2, ffn=128, vocab=64)
    model, g = in_a_model.build(config, "cpu", torch.bfloat16)
    tokens = in_a_model.tokens_for(config, 1, 32, g, "cpu")
    torch._dynamo.reset()
    with torch.inference_mode(), sagelib.sdpa_routed(fallback=False) as routed:
        eager = model(tokens)
        run = torch.compile(model, fullgraph=True, backend="aot_eager")
        # more calls than dynamo's recompile limit (8): a guard that changes per call would stop fullgraph here
        outputs = [run(tokens) for _ in range(torch._dynamo.config.recompile_limit + 2)]
    torch._dynamo.reset()
    assert (routed.routed, routed.fallback) == (1, 0)  # the eager call; compiled calls are not counted
    assert all(torch.equal(eager, compiled) for compiled in outputs)


@pytest.mark.slow
def test_inductor_compiles_a_model_with_the_op():
    from sagelib.studies import in_a_model

    config = in_a_model.ModelConfig(layers=1, d_model=64, heads=4, kv_heads=2, ffn=128, vocab=64)
    model, g = in_a_model.build(config, "cpu", torch.float32)
    tokens = in_a_model.tokens_for(config, 1, 32, g, "cpu")
    torch._dynamo.reset()
    with torch.inference_mode(), sagelib.sdpa_routed(cast=torch.bfloat16, fallback=False):
        eager = model(tokens)
        compiled = torch.compile(model, fullgraph=True)(tokens)
    torch._dynamo.reset()
    assert torch.allclose(eager, compiled, rtol=1e-3, atol=1e-3)
