"""The register projection of an fp16 inner accumulator in the Hopper consumer, checked by hand."""

from sagelib.studies import fp16_inner


def rows(head_dim=128):
    return {r["structure"]: r for r in fp16_inner.register_budget(head_dim)}


def test_fp16_inner_frees_32_registers_a_thread_and_32_kb_an_sm_at_d128():
    # 64 rows over a 128-thread warpgroup: O 128 channels x 0.5 = 64 fp32; inner 64 fp32 or 32 (two fp16 a
    # register); S 128 keys x 0.5 = 64; row state 2 rows x 3 = 6; addresses, loop, k scales 24
    built, half = (rows()[k] for k in ("one score buffer, fp32 inner (the built kernel)", "one score buffer, fp16 inner"))
    assert built["registers needed"] == 64 + 64 + 64 + 6 + 24 == 222 and built["fits"]
    assert half["registers needed"] == 64 + 32 + 64 + 6 + 24 == 190 and half["spare (+) or short (-)"] == 50
    # per SM: 2 consumers x 128 threads x 4 bytes = 1 KB per register a thread; producer 128 x 24 x 4 = 12 KB
    assert (built["O (KB per SM)"], built["inner (KB per SM)"], built["scores (KB per SM)"]) == (64, 64, 64)
    assert half["inner (KB per SM)"] == 32 and half["producer (KB per SM)"] == 12
    assert half["total (KB per SM)"] == 64 + 32 + 64 + 30 + 12


def test_two_full_score_buffers_do_not_fit_240_even_with_fp16_inner_but_a_64_key_second_buffer_does():
    r = rows()
    two = r["two score buffers, fp16 inner"]
    assert two["registers needed"] == 64 + 32 + 2 * 64 + 30 == 254 and not two["fits"]
    assert two["spare (+) or short (-)"] == -14 and two["total (KB per SM)"] == 266  # past the 256 KB file
    assert r["two score buffers, fp32 inner"]["registers needed"] == 286
    half_buffer = r["a 64-key second buffer (next block's first half), fp16 inner"]
    assert half_buffer["registers needed"] == 64 + 32 + 64 + 32 + 30 == 222 and half_buffer["fits"]


def test_head_dim_64_halves_o_and_the_inner_accumulator():
    r = rows(64)["two score buffers, fp16 inner"]
    assert r["O (KB per SM)"] == 32 and r["inner (KB per SM)"] == 16 and r["registers needed"] == 32 + 16 + 128 + 30
