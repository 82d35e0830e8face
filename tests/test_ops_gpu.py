"""On a CUDA GPU: plans give the general path's output bit for bit; sagelib.attention is SDPA within the contract's
error, compiles (fullgraph) and is captured and replayed by CUDA graphs with eager's output.

Run: pytest -m gpu tests/test_ops_gpu.py
"""

import pytest
import torch
import torch.nn.functional as F

import sagelib
from sagelib import backends as registry
from sagelib.contract.metrics import relative_l1

pytestmark = pytest.mark.gpu

OURS = ["cuda-sm90", "cuda-sm90-k64", "cuda-sm90-fp16-inner", "cuda", "cuda-per-warp-fp16"]


def _backend(name):
    backend = registry.get(name, require_available=False)
    reason = backend.unavailable_reason()
    if reason:
        pytest.skip(f"{name}: {reason}")
    return backend


def _qkv(b=2, h=8, h_kv=2, n_q=1000, n_kv=1000, d=128, dtype=torch.float16, layout="HND", seed=0):
    g = torch.Generator(device="cuda").manual_seed(seed)

    def make(heads, n):
        shape = (b, heads, n, d) if layout == "HND" else (b, n, heads, d)
        return torch.randn(shape, generator=g, device="cuda", dtype=dtype)
    return make(h, n_q), make(h_kv, n_kv), make(h_kv, n_kv)


def _no_general_path(*args, **kwargs):
    raise AssertionError("the call took the general path, not its plan")


CASES = [dict(), dict(layout="NHD"), dict(d=64, dtype=torch.bfloat16), dict(n_q=300, n_kv=777, h_kv=8),
         dict(b=1, h=4, h_kv=4, n_q=64, n_kv=64)]


@pytest.mark.parametrize("name", OURS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("case", CASES, ids=lambda c: ",".join(f"{k}={v}" for k, v in c.items()) or "base")
def test_a_plan_computes_what_the_general_path_computes(name, causal, case):
    backend = _backend(name)
    layout = case.get("layout", "HND")
    for seed in (0, 1):  # the second call rewrites the inputs' and output's addresses in the packed arguments
        q, k, v = _qkv(seed=seed, **case)
        backend.general_attention = _no_general_path  # the call must be the plan's
        try:
            fast = backend.attention(q, k, v, causal=causal, layout=layout)
        finally:
            del backend.general_attention
        general = backend.general_attention(q, k, v, causal=causal, layout=layout)
        assert torch.equal(fast, general), (name, causal, case, seed)


@pytest.mark.parametrize("name", ["cuda-sm90", "cuda"])
def test_a_plan_on_another_stream_is_its_own(name):
    backend = _backend(name)
    q, k, v = _qkv()
    expected = backend.general_attention(q, k, v)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        out = backend.attention(q, k, v)
    torch.cuda.current_stream().wait_stream(stream)
    assert torch.equal(out, expected)


@pytest.mark.parametrize("causal", [False, True])
def test_the_op_is_sdpa_within_the_contracts_error(causal):
    q, k, v = _qkv(n_q=512, n_kv=1024)
    out = sagelib.attention(q, k, v, is_causal=causal, enable_gqa=True)
    exact = F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal, enable_gqa=True)
    assert out.dtype == q.dtype and relative_l1(out, exact) < 0.06


def test_cuda_graph_replay_gives_eager_output():
    q, k, v = _qkv()
    static = [x.clone() for x in (q, k, v)]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm-up on the capture stream: the plan is made outside the capture
        for _ in range(2):
            sagelib.attention(*static, is_causal=True, enable_gqa=True)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, stream=stream):
        captured = sagelib.attention(*static, is_causal=True, enable_gqa=True)
    fresh = _qkv(seed=5)
    for x, y in zip(static, fresh):
        x.copy_(y)
    graph.replay()
    torch.cuda.synchronize()
    eager = sagelib.attention(*fresh, is_causal=True, enable_gqa=True)
    assert torch.equal(captured, eager)


def test_cuda_graph_capture_without_warm_up():
    q, k, v = _qkv(n_q=256, n_kv=256, seed=3)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = sagelib.attention(q, k, v, enable_gqa=True)
    graph.replay()
    torch.cuda.synchronize()
    assert torch.equal(captured, sagelib.attention(q, k, v, enable_gqa=True))


def test_compiled_op_matches_eager_bit_for_bit():
    q, k, v = _qkv()
    torch._dynamo.reset()
    compiled = torch.compile(lambda a, b, c: sagelib.attention(a, b, c, is_causal=True, enable_gqa=True) * 2,
                             fullgraph=True)
    assert torch.equal(compiled(q, k, v), sagelib.attention(q, k, v, is_causal=True, enable_gqa=True) * 2)
    torch._dynamo.reset()


def test_a_compiled_model_routed_to_ours_agrees_with_eager():
    from sagelib.studies import in_a_model

    config = in_a_model.ModelConfig(layers=2, d_model=512, heads=4, kv_heads=2, ffn=1024, vocab=512)
    model, g = in_a_model.build(config, "cuda")
    tokens = in_a_model.tokens_for(config, 2, 256, g, "cuda")
    torch._dynamo.reset()
    with torch.inference_mode(), sagelib.sdpa_routed(fallback=False) as routed:
        eager = model(tokens)
        run = torch.compile(model, fullgraph=True)
        # past dynamo's recompile limit (8): notebook 07 times the compiled model over many calls
        compiled = [run(tokens) for _ in range(torch._dynamo.config.recompile_limit + 2)]
    torch._dynamo.reset()
    assert routed.routed == config.layers  # the eager pass; compiled calls are not counted
    assert all(relative_l1(c, eager) < 1e-2 for c in compiled)
