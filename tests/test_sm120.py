"""Phase 1 for sm_120/sm_121: the candidates' fit on GB10 and their unit bounds (arithmetic checked by hand)."""

import re

import pytest

from sagelib.cuda import check
from sagelib.errors import InputError
from sagelib.measure.hardware import GB10
from sagelib.studies import sm120, sm120_evidence

#: ptxas for sm_121a as `sagelib kernels check` reported it (nvcc 13.0) before the lean D128 key loop: a fixture
#: with spills, for how fit() reports them; registers, spill-store bytes
PTXAS = {"attn_mma_kernel<128, false>": {"registers": 255, "spill_stores": 20},
         "attn_mma_kernel<128, true>": {"registers": 255, "spill_stores": 8},
         "attn_mma_kernel<64, false>": {"registers": 255, "spill_stores": 0},
         "attn_mma_kernel<64, true>": {"registers": 231, "spill_stores": 0}}


def test_shared_memory_of_each_candidate_fits_gb10():
    mono, producer, pingpong = (sm120.candidate(k) for k in ("monolithic", "producer", "pingpong"))
    assert mono.smem_bytes(128) == 128 * 128 + 2 * 2 * 64 * 128 == 48 * 1024  # the built kernel's AttnSmem<128>
    assert producer.smem_bytes(128) == 48 * 1024 + 2 * 16  # plus two stages' mbarriers (full, empty)
    assert pingpong.smem_bytes(128) == 256 * 128 + 2 * 2 * 64 * 128 == 64 * 1024
    for c in sm120.CANDIDATES:
        for d in (64, 128):
            assert c.smem_bytes(d) <= 99 * 1024


def test_register_caps_follow_the_register_file_and_setmaxnreg():
    mono, producer, pingpong = (sm120.candidate(k) for k in ("monolithic", "producer", "pingpong"))
    assert sm120.register_cap(mono, 2) == 255  # 65536 / 256 threads = 256, the ISA's 255
    assert sm120.register_cap(mono, 3) == 168  # 65536 / 384 = 170.7, steps of 8
    # 160 threads at 2 CTAs: 200 each at launch; the producer keeps 24, its 176 x 32 go to 128 consumer threads
    assert sm120.register_cap(producer, 2) == (200 * 160 - 24 * 32) // 128 // 8 * 8 == 240
    assert sm120.register_cap(pingpong, 1) == 255


def test_occupancy_keeps_the_built_kernels_registers_where_it_can():
    fit = sm120.fit(sm120.candidate("monolithic"), 128, "fp32+fp16", PTXAS)
    assert (fit["CTAs per SM"], fit["math warps per scheduler"], fit["register cap"]) == (2, 2.0, 255)
    assert fit["spills"] == "yes" and fit["spill bytes (ptxas)"] == 8  # ptxas' own few bytes at D128
    producer = sm120.fit(sm120.candidate("producer"), 128, "fp32+fp16", PTXAS)
    assert (producer["CTAs per SM"], producer["register cap at 8 math warps per SM"]) == (1, 240)
    assert sm120.fit(sm120.candidate("producer"), 64, "fp32+fp16", PTXAS)["CTAs per SM"] == 2  # 231 fits 240
    pingpong = sm120.fit(sm120.candidate("pingpong"), 128, "fp32+fp32", PTXAS)
    assert (pingpong["CTAs per SM"], pingpong["math warps per scheduler"]) == (1, 2.0)
    unknown = sm120.fit(sm120.candidate("monolithic"), 128, "fp32+fp32", {})
    assert unknown["spills"] == "unknown" and unknown["CTAs per SM"] == 2


def test_unit_times_by_hand():
    ops = 4.0 * 2 * 32 * 16384 ** 2 * 128
    per_s_8bit = 2048 * 48 * 2.1e9
    t32 = sm120.unit_times(sm120.candidate("monolithic"), 128, "fp32+fp32", 2, 32, 16384)
    t16 = sm120.unit_times(sm120.candidate("monolithic"), 128, "fp32+fp16", 2, 32, 16384)
    assert t32["qk_s"] == pytest.approx(ops / 2 / per_s_8bit)
    assert t32["pv_s"] == pytest.approx(2 * ops / 2 / per_s_8bit)  # e4m3 with fp32 accumulation: half rate
    assert t16["pv_s"] == pytest.approx(ops / 2 / per_s_8bit)
    assert t16["exp2_s"] == pytest.approx(2 * 32 * 16384 ** 2 / (16 * 48 * 2.1e9))
    assert t16["memory_s"] == pytest.approx(2 * 32 * 16384 * 128 * 5 / 273e9)
    # 128 CTAs per head each read the head's K and V (16384 x 128 x 2 bytes) in the tensor time
    assert t16["l2_kv_gb_s_at_floor"] == pytest.approx(2 * 32 * 128 * 16384 * 128 * 2 / t16["tensor_s"] / 1e9)
    ping = sm120.unit_times(sm120.candidate("pingpong"), 128, "fp32+fp16", 2, 32, 16384)
    assert ping["l2_kv_gb_s_at_floor"] == pytest.approx(t16["l2_kv_gb_s_at_floor"] / 2)


def test_bad_names_are_refused():
    with pytest.raises(InputError, match="pv_accum: expected one of"):
        sm120.fit(sm120.candidate("monolithic"), 128, "fp16", PTXAS)
    with pytest.raises(InputError, match="candidate: expected one of"):
        sm120.candidate("wgmma")


def test_the_recommendations_figures_are_the_models():
    rows = {(r["candidate"], r["head_dim"], r["pv_accum"]): r for r in sm120.bound_rows([128], 2, 32, 16384, PTXAS)}
    f16, f32 = rows[("monolithic", 128, "fp32+fp16")], rows[("monolithic", 128, "fp32+fp32")]
    text = sm120_evidence.RECOMMENDATION
    assert f"{f16['tensor ms']:.1f} ms of mma.sync" in text and f"{f16['exp2 ms']:.1f} ms of exp2" in text
    gap = f16["floor TOPS (projection)"] / f16["serial TOPS (projection)"]
    assert f"at most the serial-to-floor gap ({gap:.2f}x" in text
    assert f"buys {f16['floor TOPS (projection)'] / f32['floor TOPS (projection)']:.1f}x" in text
    short = 255 - rows[("producer", 128, "fp32+fp16")]["register cap at 8 math warps per SM"]
    assert f"costs {short} registers" in text
    assert round(f16["tensor ms"] / f16["exp2 ms"]) == 4 and "about 4x" in text


def test_the_committed_ptxas_report_holds_the_built_kernel_for_sm121a():
    import json

    table = sm120_evidence.ptxas_from_report(json.loads(sm120_evidence.PTXAS_RECORDING.read_text()))
    assert set(table) == set(PTXAS)
    for name, row in table.items():
        assert row["smem"] <= 99 * 1024 and row["registers"] <= 255
        assert row["smem"] == 3 * 128 * int(re.search(r"<(\d+),", name)[1])  # Q + 2 K + 2 V^T stages


def test_gb10_figures_name_their_sources():
    assert (GB10.sms, GB10.max_smem_per_cta_bytes, GB10.memory_bytes_per_s) == (48, 99 * 1024, 273e9)
    for figure in ("sms", "clock_ghz", "smem_per_sm_bytes", "mma_sync_8bit_ops_per_clk", "mma_sync_pv_ops_per_clk",
                   "mufu_per_clk", "memory_bytes_per_s"):
        assert GB10.source.get(figure), figure


def test_card_rates_without_a_gpu_keep_the_projections(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    rows, card, note = sm120_evidence.card_rates(True)
    assert card is GB10 and "no CUDA GPU" in note
    assert {r["unit"]: r["projected (GB10, per clock per SM)"] for r in rows} == {
        "mma_sync_s8": 2048, "mma_sync_e4m3": 1024, "mma_sync_e4m3_f16acc": 2048, "ex2": 16}
    assert all(r["measured"] is None for r in rows)


@pytest.mark.skipif(check.nvcc_path() is None, reason="needs nvcc (the CUDA toolkit)")
def test_the_isa_probes_give_what_the_study_states():
    found = {p.key: sm120_evidence.probe(p) for p in sm120_evidence.PROBES}
    assert found == {p.key: p.expected for p in sm120_evidence.PROBES}
    assert found["wgmma"] == "refused" and found["tma"] == found["setmaxnreg"] == "accepted"
