"""The peer backends (sagelib/backends/sdpa.py, sage.py): registration, reasons, no mutation."""

from __future__ import annotations

import pytest
import torch

from sagelib import backends, errors
from sagelib.backends.sage import SageBackend
from sagelib.backends.sdpa import SdpaBackend


def test_peers_are_registered():
    for name in ("sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sage"):
        assert name in backends.names()
        assert backends.get(name, require_available=False).name == name


def test_sdpa_refuses_unknown_kind():
    with pytest.raises(ValueError, match="sdpa-flash, sdpa-cudnn, sdpa-efficient"):
        SdpaBackend("sdpa-math")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the reasons given on a machine without a GPU")
def test_reasons_without_a_gpu_name_the_fix():
    assert "needs a CUDA GPU" in backends.get("sdpa-cudnn", require_available=False).unavailable_reason()
    reason = SageBackend().unavailable_reason()
    assert "pip install sageattention==1.0.6" in reason
    with pytest.raises(errors.KernelUnavailable, match="cannot run on this machine"):
        backends.get("sdpa-flash")


def test_sage_checks_its_inputs_before_importing_anything():
    q = torch.zeros(1, 1, 8, 80, dtype=torch.float16)
    with pytest.raises(ValueError, match="head_dim: sageattention supports 64, 96 or 128, got 80"):
        SageBackend().attention(q, q, q)
    with pytest.raises(ValueError, match="layout"):
        SageBackend().attention(q[..., :64], q[..., :64], q[..., :64], layout="BHND")
    with pytest.raises(ValueError, match="return_lse"):
        SageBackend().attention(q, q, q, return_lse=True)


def test_sdpa_refuses_lse():
    q = torch.zeros(1, 1, 8, 64, dtype=torch.float16)
    with pytest.raises(ValueError, match="return_lse"):
        SdpaBackend("sdpa-flash").attention(q, q, q, return_lse=True)


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sage"])
@pytest.mark.parametrize("layout", ["HND", "NHD"])
def test_gpu_peers_match_exact_attention_and_leave_inputs_alone(name, layout):
    backend = backends.get(name, require_available=False)
    if backend.unavailable_reason():
        pytest.skip(backend.unavailable_reason())
    g = torch.Generator(device="cuda").manual_seed(0)
    shape = (2, 4, 256, 64) if layout == "HND" else (2, 256, 4, 64)
    q, k, v = (torch.randn(shape, generator=g, device="cuda").half() for _ in range(3))
    k = k + 3.0  # a channel bias: smoothing must not change the caller's k
    before = k.clone()
    out = backend.attention(q, k, v, causal=True, layout=layout)
    assert torch.equal(k, before)
    t = (lambda x: x) if layout == "HND" else (lambda x: x.transpose(1, 2))
    exact = torch.nn.functional.scaled_dot_product_attention(t(q).float(), t(k).float(), t(v).float(), is_causal=True)
    err = (t(out).float() - exact).abs().sum() / exact.abs().sum()
    assert err < (0.05 if name == "sage" else 1e-3)
