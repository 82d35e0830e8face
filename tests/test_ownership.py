"""Phase 1 model: register, shared-memory and occupancy arithmetic checked by hand."""

from dataclasses import replace

import pytest

from sagelib.studies import ownership


def test_wgmma_warpgroup_registers_by_hand():
    # 64 rows over 128 threads: half a row each. D=128: O = 64, inner fp32 = 64; S = 0.5 * 128 keys = 64;
    # P (aliases S) = 16; row state 2 rows x 3 = 6; overhead 24 -> 64 + 64 + 64 + 6 + 24 = 222
    arch = ownership.candidate("wgmma_1wg")
    regs = arch.registers(128)
    assert regs["O accumulator (fp32)"] == 64 and regs["S fragment (int32 -> fp32)"] == 64
    assert regs[ownership.P_ALIASES_S] == 16
    assert arch.total_registers(128) == 222
    assert arch.total_registers(128, inner_accumulator="fp16") == 222 - 32


def test_mma_sync_portable_kernel_cannot_hold_two_level_state_at_d128():
    # a warp owns 32 rows: O = 128, inner = 128, S = 64, Q = 32, row state = 4 rows x 3, overhead 24
    fit = ownership.fit(ownership.candidate("mma_sync_4warp"), 128)
    assert fit.registers_needed == 128 + 128 + 64 + 32 + 12 + 24
    assert fit.spills


def test_three_consumer_rotation_fits_with_p_v_in_64_channel_passes_and_puts_three_softmax_warps_on_a_scheduler():
    # 160 registers: D=64 needs O 32 + inner 32 + S 32 (64-key steps) + row state 6 + overhead 24 = 126;
    # D=128 needs 64 + 32 (P.V in two 64-channel passes) + 32 + 6 + 24 = 158; one pass would need 190
    arch = ownership.candidate("three_consumer_rotation")
    d64, d128 = ownership.fit(arch, 64), ownership.fit(arch, 128)
    assert d64.registers_needed == 126 and not d64.spills
    assert d128.registers_needed == 158 and not d128.spills
    assert ownership.fit(replace(arch, inner_channels=None), 128).registers_needed == 190
    assert d64.ctas_per_sm == 1 and d64.consumer_warps_per_sm == 12  # 3 per scheduler, against fa3_pingpong's 2
    assert ownership.fit(ownership.candidate("fa3_pingpong"), 64).consumer_warps_per_sm == 8


def test_three_consumers_fit_the_preset_128_key_step_at_d64_only():
    # 160 registers: D=64 needs O 32 + inner 32 + S 64 + row state 6 + overhead 24 = 158; D=128 needs 222
    arch = ownership.candidate("three_consumer_preset")
    d64, d128 = ownership.fit(arch, 64), ownership.fit(arch, 128)
    assert d64.registers_needed == 158 and not d64.spills and d64.consumer_warps_per_sm == 12
    assert d128.registers_needed == 222 and d128.spills


def test_pingpong_fits_240_but_not_with_a_second_s_buffer_at_d128():
    assert not ownership.fit(ownership.candidate("fa3_pingpong"), 128).spills
    assert ownership.fit(ownership.candidate("fa3_pingpong_overlap"), 128).spills
    assert not ownership.fit(ownership.candidate("fa3_pingpong_overlap"), 64).spills
    # 2 consumer warpgroups x 128 x 240 + 128 producer threads x 24 registers: one CTA per SM
    assert ownership.fit(ownership.candidate("fa3_pingpong"), 128).ctas_per_sm == 1


def test_reopening_review_keeps_sm121_work_closed_and_opens_prefetch_for_pingpong():
    rows = {r["closed experiment"]: r for r in ownership.reopening_review(ownership.candidate("fa3_pingpong"))}
    assert rows["p0-early-k-prefetch"]["verdict"].startswith("may be reopened")
    assert rows["hopper-wgmma-sm121a"]["verdict"] == "stays closed"
    baseline = {r["closed experiment"]: r for r in ownership.reopening_review(ownership.candidate("mma_sync_4warp"))}
    assert all(r["verdict"] == "stays closed" for r in baseline.values())


def test_unknown_structure_is_named():
    with pytest.raises(ValueError, match="key: expected one of"):
        ownership.candidate("warp_specialised_v9")


def test_o_in_shared_memory_frees_the_registers_of_a_second_s_buffer_at_d128():
    # 240 registers: O as one 16-register chunk + inner 64 + two S buffers 128 + row state 6 + overhead 24 = 238
    arch = ownership.candidate("o_in_smem_overlap")
    f = ownership.fit(arch, 128)
    assert f.registers_needed == 238 and not f.spills and f.ctas_per_sm == 1
    # shared memory gains O in fp32 for both consumers: 2 x 64 rows x 128 channels x 4 bytes
    plain = replace(arch, o_in_shared_memory=False)
    assert arch.smem_bytes(128) - plain.smem_bytes(128) == 2 * 64 * 128 * 4
    assert ownership.fit(plain, 128).spills  # the same structure with O in registers is fa3_pingpong_overlap's
