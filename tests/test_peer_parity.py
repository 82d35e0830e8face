"""The SageAttention2 peer: its backends say why they cannot run, and the parity grid and its summary hold
together (the GPU run itself is `sagelib parity --against sage2`, recorded in data/results)."""

import sys
import types

import pytest

from sagelib import backends, cli
from sagelib.backends import sage2
from sagelib.measure import peer_parity


def test_every_peer_configuration_is_a_registered_backend_with_a_reason_here():
    for name in sage2.CONFIGS:
        backend = backends.get(name, require_available=False)
        assert backend.quantized
        if not __import__("torch").cuda.is_available():
            assert "needs a CUDA GPU" in backend.unavailable_reason()


def test_the_pypi_sageattention_1_is_not_taken_for_the_peer(monkeypatch, tmp_path):
    monkeypatch.setenv("SAGELIB_PEER_DIR", str(tmp_path))
    monkeypatch.setitem(sys.modules, "sageattention", types.SimpleNamespace(__file__="sa1/__init__.py",
                                                                              sageattn=lambda *a: None))
    with pytest.raises(ImportError, match="is not SageAttention 2"):
        sage2.package()


def test_the_contract_twin_uses_the_peers_conventions():
    options = sage2.contract_options(sage2.CONFIGS["sage2-sm89-per-warp-fp16"])
    assert options == {"preset": "sm89", "granularity": "per_warp", "pv_accum": "fp32+fp16",
                       "causal_alignment": "top_left", "lse_correction": "input_dtype"}


def test_the_grid_covers_every_factor_the_comparison_needs():
    grid = peer_parity.default_grid()
    assert {c.head_dim for c in grid} >= {32, 64, 80, 96, 112, 128}
    assert {c.n_q for c in grid} >= {1, 17, 777, 1000}
    assert any(c.n_q % 64 and c.n_q % 128 and c.n_q > 64 for c in grid)
    assert {c.dtype for c in grid} == {"fp16", "bf16"} and {c.layout for c in grid} == {"HND", "NHD"}
    assert {c.causal for c in grid} == {True, False} and {c.k_bias > 0 for c in grid} == {True, False}
    assert any(c.heads_q != c.heads_kv for c in grid)
    assert len(peer_parity.default_grid(quick=True)) == 8


def _row(config, contract, ours, passed=True):
    return {"config": config, "contract_to_real": contract, "ours_to_real": ours, "contract_lse_to_real": 1e-3,
            "ours_lse_to_real": 2e-3, "q_int8_exact": True, "k_int8_exact": True, "v_bytes_differ": 3,
            "contract_passed": passed, "ours_passed": True, "q_int8_differ": 2, "k_int8_differ": 1,
            **{f"qk_int8_differ_{form}": 0 for form in (*peer_parity.APPROXIMATE_FORMS, "peer_division")},
            "q_scale_exact": True, "k_scale_exact": True, "qk_scale_exact_peer_division": True,
            "contract_peer_division_to_real": contract / 2}


def test_the_qk_stage_passes_when_the_codes_agree_once_the_contract_divides_as_the_gpu_does():
    row = _row("sage2-sm89-per-warp-fp16", 5e-4, 5e-4)  # 3 codes differ with the exact division, 0 with the GPU's
    assert peer_parity.qk_exact_with_gpu_division(row)
    assert not peer_parity.qk_exact_with_gpu_division({**row, "qk_int8_differ_peer_division": 1})
    assert not peer_parity.qk_exact_with_gpu_division({**row, "k_scale_exact": False})
    assert not peer_parity.qk_exact_with_gpu_division({**row, "qk_scale_exact_peer_division": False})
    older = {k: v for k, v in row.items() if k != "qk_scale_exact_peer_division"}  # recorded before the column
    assert not peer_parity.qk_exact_with_gpu_division(older)


def test_the_summary_takes_the_worst_case_of_each_configuration():
    rows = [_row("sage2-sm90", 1e-4, 2e-5), _row("sage2-sm90", 2.5e-4, 3e-5, passed=False),
            _row("sage2-sm89", 5e-5, 6e-5)]
    s = peer_parity.summary(rows)
    assert s["sage2-sm90"]["contract_to_real_max"] == 2.5e-4 and s["sage2-sm90"]["contract_passed"] == 1
    assert s["sage2-sm89"]["cases"] == 1
    text = peer_parity.format_summary({"summary": s, "mask_probe": [{"leak": 1.0, "finite": True}]})
    assert "sage2-sm90" in text and "1 of 1" in text
    assert s["sage2-sm90"]["qk_differ_max"] == 3 and s["sage2-sm90"]["qk_differ_fast_math_max"] == 0
    assert "peer_division 0" in text
    assert s["sage2-sm90"]["qk_exact"] and s["sage2-sm90"]["qk_exact_gpu_division"] and "yes/yes" in text
    older = {name: {k: v for k, v in c.items() if k != "qk_exact_gpu_division"} for name, c in s.items()}
    assert "yes/?" in peer_parity.format_summary({"summary": older, "mask_probe": []})


def test_the_command_without_the_peer_exits_3_and_names_the_build(capsys):
    if __import__("torch").cuda.is_available():
        pytest.skip("a GPU machine may have the peer")
    assert cli.main(["parity", "--against", "sage2"]) == 3
    captured = capsys.readouterr()
    assert "docs/design/peers.md" in captured.out and "no SageAttention2 configuration" in captured.err
    assert cli.main(["parity", "--against", "sage2", "--config", "sage3"]) == 2


@pytest.mark.gpu
def test_the_gpu_divisions_stay_within_two_ulp_and_the_ieee_one_is_torchs():
    import torch

    from sagelib.measure import gpu_division

    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    g = torch.Generator(device="cuda").manual_seed(0)
    a = torch.rand(1 << 16, device="cuda", generator=g) * 100 + 1e-3
    b = torch.rand(1 << 16, device="cuda", generator=g) * 10 + 1e-3
    exact = a / b
    assert torch.equal(gpu_division.divider("ieee")(a, b), exact)
    for form in ("fast_math", "div_full", "div_approx"):
        got = gpu_division.divider(form)(a, b)
        ulps = (got.view(torch.int32) - exact.view(torch.int32)).abs().max().item()
        assert ulps <= 2, form
    with pytest.raises(ValueError, match="float32 CUDA"):
        gpu_division.divider("div_full")(a.double(), b.double())


def test_recordings_of_one_configuration_each_merge_into_one_grid(tmp_path):
    import json

    from sagelib.studies import peer_views

    def document(when, names):
        return {"schema": "sagelib.peer-parity/1", "created_utc": when, "device": {"name": "H200"},
                "rows": [_row(n, 1e-4, 1e-4) for n in names], "summary": peer_parity.summary(
                    [_row(n, 1e-4, 1e-4) for n in names]),
                "mask_probe": [{"config": n, "leak": 0.0, "finite": True} for n in names]}

    (tmp_path / "a.json").write_text(json.dumps(document("2026-12-01T00:00:00Z", ["sage2-sm90", "sage2-sm89"])))
    (tmp_path / "b.json").write_text(json.dumps(document("2026-12-02T00:00:00Z", ["sage2-sm90"])))
    merged, where = peer_views.recorded_per_config(tmp_path)
    assert list(merged["summary"]) == ["sage2-sm90", "sage2-sm89"] and len(merged["rows"]) == 2
    assert "`a.json`" in where and "`b.json`" in where
    (tmp_path / "empty").mkdir()
    assert peer_views.recorded_per_config(tmp_path / "empty") == (None, None)


def test_the_summary_text_reads_recordings_made_before_a_form_was_added():
    """A recording from before a division form existed lacks its columns: the text shows what it has."""
    s = peer_parity.summary([_row("sage2-sm90", 1e-4, 2e-5)])
    older = {name: {k: v for k, v in values.items() if "ieee" not in k and "scales_exact" not in k}
             for name, values in s.items()}
    text = peer_parity.format_summary({"summary": older, "mask_probe": []})
    assert "fast_math 0" in text and "ieee" not in text
