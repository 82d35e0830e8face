"""The backend registry: names, auto, clear errors, and the reference backend = the contract."""

import pytest
import torch

from sagelib import backends, contract, errors


def test_reference_backend_is_the_contract():
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(1, 2, 40, 64, generator=g).half() for _ in range(3))
    out, lse = backends.get("reference").attention(q, k, v, causal=True, return_lse=True)
    want, want_lse = contract.attention(q, k, v, causal=True, return_lse=True)
    assert torch.equal(out, want) and torch.equal(lse, want_lse)


def test_unknown_backend_names_the_choices():
    with pytest.raises(ValueError, match=r"backend: unknown backend 'flash4'; expected one of .*reference"):
        backends.get("flash4")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU fallback of auto")
def test_auto_is_reference_without_a_gpu():
    assert backends.get("auto").name == "reference"


def test_availability_lists_every_backend_with_a_reason_or_none():
    table = backends.availability()
    assert table["reference"] is None
    assert set(table) == set(backends.names()) - {"auto"}
    for name, reason in table.items():
        assert reason is None or isinstance(reason, str) and reason


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU message")
def test_gpu_backends_refuse_clearly_without_a_gpu():
    for name in backends.names():
        if name in ("reference", "auto"):
            continue
        reason = backends.availability()[name]
        assert reason, f"{name} claims to be usable on a machine without a GPU"
        with pytest.raises(errors.KernelUnavailable, match=rf"backend: '{name}' cannot run on this machine"):
            backends.get(name)
