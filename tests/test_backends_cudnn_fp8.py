"""cudnn-fp8 (cuDNN's FP8 attention): what it refuses and why, its per-tensor quantizer; on a GPU, its output."""

import pytest
import torch

from sagelib import backends
from sagelib.backends import cudnn_fp8
from sagelib.errors import InputError, KernelUnavailable


def test_it_is_registered_as_a_quantized_peer_of_the_bench():
    from sagelib.measure import bench, bench_suites

    assert "cudnn-fp8" in backends.names() and "cudnn-fp8" in bench.PEERS
    assert "cudnn-fp8" in bench_suites.SUITE_BACKENDS
    assert backends.get("cudnn-fp8", require_available=False).quantized


def test_without_a_gpu_it_says_what_it_needs():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    reason = backends.get("cudnn-fp8", require_available=False).unavailable_reason()
    assert "CUDA GPU" in reason
    with pytest.raises(KernelUnavailable, match="cudnn-fp8"):
        backends.get("cudnn-fp8")


def test_the_per_tensor_quantizer_scales_amax_to_448_and_keeps_zero_tensors_finite():
    x = torch.tensor([[[[-3.0, 1.5], [0.75, 0.0]]]])
    q8, d = cudnn_fp8.quantize_per_tensor(x)
    assert q8.dtype == torch.float8_e4m3fn and d.shape == (1, 1, 1, 1)
    assert float(d) == pytest.approx(3.0 / 448) and float(q8.float().abs().max()) == 448.0
    assert torch.allclose(q8.float() * d, x, rtol=2 ** -3)  # e4m3 keeps 3 mantissa bits
    z8, dz = cudnn_fp8.quantize_per_tensor(torch.zeros(1, 1, 2, 2))
    assert float(dz) == 1.0 and not z8.float().any()


def test_it_refuses_what_it_cannot_take_with_the_argument_named():
    backend = cudnn_fp8.CudnnFp8()
    q = torch.zeros(1, 4, 8, 64, dtype=torch.float16)
    with pytest.raises(InputError, match="layout"):
        backend._graph_for(q, q, q, causal=False, sm_scale=None, layout="BHSD")
    with pytest.raises(InputError, match="fp16 or bf16"):
        backend._graph_for(q.float(), q.float(), q.float(), causal=False, sm_scale=None, layout="HND")
    with pytest.raises(InputError, match="CUDA device"):
        backend._graph_for(q, q, q, causal=False, sm_scale=None, layout="HND")
    with pytest.raises(InputError, match="return_lse"):
        backend.attention(q, q, q, return_lse=True)


@pytest.mark.gpu
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("layout", ["HND", "NHD"])
def test_on_a_gpu_it_computes_attention_within_fp8_error(causal, layout):
    backend = backends.get("cudnn-fp8", require_available=False)
    reason = backend.unavailable_reason()
    if reason:
        pytest.skip(reason)
    g = torch.Generator(device="cuda").manual_seed(0)
    shape = (2, 4, 384, 128) if layout == "HND" else (2, 384, 4, 128)
    q, k, v = (torch.randn(shape, device="cuda", dtype=torch.float16, generator=g) for _ in range(3))
    out = backend.attention(q, k, v, causal=causal, layout=layout)
    t = (lambda x: x.transpose(1, 2)) if layout == "NHD" else (lambda x: x)
    exact = torch.nn.functional.scaled_dot_product_attention(*(t(x).double() for x in (q, k, v)), is_causal=causal)
    rel = float((t(out).double() - exact).abs().sum() / exact.abs().sum())
    assert out.shape == q.shape and out.dtype == q.dtype and rel < 0.08, rel
    again = backend.kernel_only(q, k, v, causal=causal, layout=layout)()
    assert torch.equal(again, out)  # the same quantized operands, the same graph
    raw = backend.graph_only(q, k, v, causal=causal, layout=layout)()  # [B, H, N, D], as cuDNN wrote it
    if raw.dtype == torch.float8_e4m3fn:  # Hopper: e4m3 O / dv, widened by the backend in two passes
        _, dv = cudnn_fp8.quantize_per_tensor(t(v).contiguous())
        raw = raw.to(q.dtype).mul_(dv)
    assert torch.equal(t(raw), out)


def test_the_wheelhouse_script_adds_the_frontend_without_its_dsl_requirements():
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(["bash", str(root / "scripts" / "build_wheelhouse.sh"), "--cudnn", "--dry-run"],
                          capture_output=True, text=True, cwd=root, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "without dependencies: nvidia-cudnn-frontend" in done.stdout


def test_widening_multiplies_the_e4m3_output_back_by_vs_descale():
    o = torch.tensor([[1.0, -2.5, 448.0, 0.0]]).to(torch.float8_e4m3fn)  # O / dv as cuDNN writes it
    dv = torch.full((1, 1), 0.01)
    out = torch.empty(1, 4, dtype=torch.float16)
    cudnn_fp8.widen_e4m3(o, out, dv)
    expected = torch.tensor([[0.01, -0.025, 4.48, 0.0]])
    assert torch.allclose(out.float(), expected, rtol=1e-3, atol=0)
