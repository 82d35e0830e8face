"""The setting that switches the Hopper paths off (SAGELIB_HOPPER=off, `sagelib run --no-hopper`).

On a CPU the Hopper backends are unavailable anyway; these tests check that with the setting off each Hopper path
names the setting as its reason, that the portable paths are left alone, and (the GPU test) that on an sm_90 card
`auto` then picks the portable kernel and it runs.
"""

from __future__ import annotations

import pytest
import torch

from sagelib import backends
from sagelib.cli import main
from sagelib.cuda import features
from sagelib.errors import UsageError

HOPPER_BACKENDS = ("cuda-sm90", "cuda-sm90-k64")


@pytest.mark.parametrize("value,off", [("off", True), ("OFF", True), ("0", True), ("false", True), ("no", True),
                                       ("on", False), ("auto", False), ("1", False), ("", False)])
def test_the_setting_reads_its_values(value, off):
    assert features.hopper_switched_off({features.HOPPER_SETTING: value}) is off


def test_unset_leaves_the_hopper_paths_on():
    assert features.hopper_switched_off({}) is False
    assert features.switched_off_reason({}) is None


def test_a_malformed_value_is_refused_naming_the_values():
    with pytest.raises(UsageError, match=r"SAGELIB_HOPPER: expected one of .*'off'.*got 'of'"):
        features.hopper_switched_off({features.HOPPER_SETTING: "of"})


def test_switched_off_on_an_sm90_card_names_the_setting(monkeypatch):
    monkeypatch.delenv(features.HOPPER_SETTING, raising=False)
    assert features.hopper_unavailable_reason((9, 0)) is None
    assert "sm_120" in features.hopper_unavailable_reason((12, 0))
    monkeypatch.setenv(features.HOPPER_SETTING, "off")
    reason = features.hopper_unavailable_reason((9, 0))
    assert reason is not None and "SAGELIB_HOPPER=off" in reason


def test_the_registry_removes_the_hopper_backends_and_keeps_the_portable_ones(monkeypatch):
    monkeypatch.setenv(features.HOPPER_SETTING, "off")
    found = backends.availability()
    for name in HOPPER_BACKENDS:
        assert found[name] is not None and "SAGELIB_HOPPER=off" in found[name], found[name]
        with pytest.raises(Exception, match="SAGELIB_HOPPER=off"):
            backends.get(name)
    for name in ("cuda", "cuda-per-warp-fp16", "reference"):
        assert found[name] is None or "SAGELIB_HOPPER" not in found[name]
    monkeypatch.delenv(features.HOPPER_SETTING)
    assert all("SAGELIB_HOPPER" not in (backends.availability()[n] or "") for n in HOPPER_BACKENDS)


def test_the_microbenchmarks_leave_out_wgmma_when_switched_off(monkeypatch):
    from sagelib.measure import microbench

    monkeypatch.setenv(features.HOPPER_SETTING, "off")
    monkeypatch.setattr(microbench, "unavailable_reason", lambda: None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))

    class Props:
        multi_processor_count = 132

    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *a: Props())
    measured = []
    monkeypatch.setattr(microbench, "_measure", lambda micro, *a: measured.append(micro.key) or 1.0)
    rates = {r.key: r for r in microbench.run(repeats=1)}
    assert "wgmma_s8" not in measured and "wgmma_e4m3" not in measured
    assert "SAGELIB_HOPPER=off" in rates["wgmma_s8"].reason
    assert {"mma_sync_s8", "mma_sync_e4m3", "ex2"} <= set(measured)  # the units a card without wgmma has


def test_run_no_hopper_sets_the_setting_for_the_notebooks(monkeypatch, tmp_path):
    from sagelib.run import runner

    seen = {}

    def plan_run(profile, **options):
        seen["setting"] = features.hopper_switched_off()
        raise ValueError("stop here")

    monkeypatch.delenv(features.HOPPER_SETTING, raising=False)
    monkeypatch.setattr(runner, "plan_run", plan_run)
    import os

    try:
        assert main(["run", "--profile", "tiny", "--no-hopper", "--out", str(tmp_path / "r")]) == 2
        assert seen["setting"] is True
    finally:
        os.environ.pop(features.HOPPER_SETTING, None)


def test_a_malformed_setting_is_refused_before_a_run(monkeypatch, tmp_path, capsys):
    from sagelib.run import runner

    monkeypatch.setenv(features.HOPPER_SETTING, "maybe")
    monkeypatch.setattr(runner, "plan_run", lambda *a, **k: pytest.fail("planned with a malformed setting"))
    assert main(["run", "--profile", "tiny", "--out", str(tmp_path / "r")]) == 2
    assert "SAGELIB_HOPPER: expected one of" in capsys.readouterr().err


def test_every_notebook_runs_with_the_hopper_paths_off(tiny_run):
    """The shared tiny run has SAGELIB_HOPPER=off (tests/conftest.py): every notebook finishes, and the run says the
    paths were off."""
    import json

    for name, (folder, summary, code, stderr) in tiny_run.items():
        assert code == 0, f"{name} failed with the Hopper paths off:\n{stderr}"
        environment = json.loads((folder / "environment.json").read_text())
        assert environment["hopper_paths"] == "off (SAGELIB_HOPPER=off)"
        assert "SAGELIB_HOPPER=off" in (folder / "index.html").read_text()
    # notebook 02 asks for its live wgmma study (measure is on in the tiny profile) and says why it did not run
    folder = tiny_run["02_experiments"][0]
    experiments = json.loads((folder / "02_experiments" / "results.json").read_text())
    assert "SAGELIB_HOPPER=off" in experiments["values"]["softmax beside tensor work not measured because"]


@pytest.mark.gpu
def test_on_a_gpu_with_the_hopper_paths_off_auto_runs_the_portable_kernel(monkeypatch):
    """On the H200: `auto` gives the portable kernel, the Hopper backends refuse, and the portable kernel's output
    matches the contract's sm89 preset within the parity tolerance."""
    from sagelib import contract
    from sagelib.measure.parity import ATTN_REL_L1

    monkeypatch.setenv(features.HOPPER_SETTING, "off")
    assert backends.resolve_auto() == "cuda"
    for name in HOPPER_BACKENDS:
        assert "SAGELIB_HOPPER=off" in backends.get(name, require_available=False).unavailable_reason()
    torch.manual_seed(0)
    q, k, v = (torch.randn(1, 2, 1000, 128, device="cuda", dtype=torch.float16) for _ in range(3))
    for name, gran, accum in (("cuda", "per_thread", "fp32+fp32"), ("cuda-per-warp-fp16", "per_warp", "fp32+fp16")):
        out = backends.get(name).attention(q, k, v, causal=True)
        want = contract.attention(q, k, v, causal=True, preset="sm89", granularity=gran, pv_accum=accum)
        rel = ((out.float() - want.float()).abs().sum() / want.float().abs().sum()).item()
        assert rel < ATTN_REL_L1, (name, rel)
