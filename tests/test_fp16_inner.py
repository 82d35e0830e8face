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


# ---- the measured section: synthetic recordings, so every figure below is computed by hand ----

def _record(backend, mode, head_dim, causal, tops, error=None):
    shape = {"batch": 2, "heads": 32, "seq_q": 16384, "seq_kv": 16384, "head_dim": head_dim}
    return {"backend": backend, "mode": mode, "shape": shape, "causal": causal, "tops": tops, "error": error}


def test_speed_rows_pair_the_option_with_the_default_and_the_peers_per_case():
    doc = {"records": [
        _record("cuda-sm90-fp16-inner", "end_to_end", 128, False, 700.0),
        _record("cuda-sm90-fp16-inner", "kernel_only", 128, False, 750.0),
        _record("cuda-sm90", "end_to_end", 128, False, 800.0),
        _record("cuda-sm90", "kernel_only", 128, False, 860.0),
        _record("sage2-sm90", "end_to_end", 128, False, 720.0),
        _record("cudnn-fp8", "end_to_end", 128, False, 650.0),
        _record("cuda-sm90-fp16-inner", "end_to_end", 64, True, 500.0),
        _record("cuda-sm90", "end_to_end", 64, True, 0.0, error="failed"),  # a failed row is left out
        _record("cuda-sm90", "end_to_end", 64, False, 600.0),  # no option row at D64 non-causal: no case
    ]}
    rows = fp16_inner.speed_rows(doc)
    assert [r["case"] for r in rows] == ["D128", "D64 causal"]
    d128, d64 = rows
    assert (d128["fp32+fp16 end to end"], d128["fp32+fp16 kernel only"]) == (700.0, 750.0)
    assert (d128["fp32+fp32 end to end"], d128["fp32+fp32 kernel only"]) == (800.0, 860.0)
    assert d128["fp32+fp16 / fp32+fp32"] == 0.875 and d128["target (end to end)"] == 1000.0
    assert (d128["sage2-sm90"], d128["cudnn-fp8"]) == (720.0, 650.0)
    assert d64["fp32+fp32 end to end"] is None and d64["fp32+fp16 / fp32+fp32"] is None
    assert d64["target (end to end)"] is None  # issue 37 set none for D64 causal
    assert fp16_inner.speed_rows({"records": [_record("cuda-sm90", "end_to_end", 128, False, 1.0)]}) == []


def test_block_periods_read_each_builds_section_of_a_trace_recording():
    text = ("# trace\n## default build\nsome rows\nmedian block period, warp 0: 2291 cycles\n"
            "tile walk\n## --define SM90_PV_F16=1 (the level)\nmedian block period, warp 0: 2614 cycles\n")
    assert fp16_inner.block_periods(text) == {"fp32+fp32": 2291, "fp32+fp16": 2614}
    assert fp16_inner.block_periods("## default build\nno period here\n") == {}


def test_warp_instructions_come_from_the_first_kernel_of_an_ncu_recording():
    assert fp16_inner.warp_instructions({"kernels": [{"metrics": {"inst_executed": {"value": 155166894}}}]}) == 155166894
    assert fp16_inner.warp_instructions({"kernels": []}) is None


def test_period_bound_scales_tops_by_period_from_the_default():
    rows = {r["structure"]: r for r in fp16_inner.period_bound(900.0, {"fp32+fp32": 2000, "fp32+fp16": 2300},
                                                               target_tops=1000.0, side_by_side=1500)}
    assert rows["one score buffer, fp32 inner (built)"]["kernel-only TOPS"] == 900.0
    assert rows["one score buffer, fp16 inner (built)"]["kernel-only TOPS"] == round(900 * 2000 / 2300, 1)
    best = rows["two score buffers, fp16 inner, at best"]
    assert best["block period (cycles)"] == 1500 + 300 and best["kernel-only TOPS"] == 1000.0
    assert best["period from"] == "projection"
    assert rows["what 1000 TOPS kernel only needs"]["block period (cycles)"] == 1800


def test_find_recordings_takes_the_newest_of_each_kind_that_holds_the_option(tmp_path):
    import json

    from sagelib.records import documents

    def bench(name, created, backend):
        doc = {"schema": documents.BENCH.id, "created_utc": created,
               "records": [_record(backend, "end_to_end", 128, False, 1.0)]}
        (tmp_path / name).write_text(json.dumps(doc))

    bench("2026-12-01-a.json", "2026-12-01T00:00:00", "cuda-sm90-fp16-inner")
    bench("2026-12-03-b.json", "2026-12-03T00:00:00", "cuda-sm90")  # newer, but without the option
    (tmp_path / "2026-12-02-x-fp16-inner-traces-aaa.txt").write_text("## default build\n")
    for name in ("default", "f16"):
        (tmp_path / f"2026-12-02-x-fp16-inner-ncu-{name}-aaa.json").write_text(json.dumps({"kernels": []}))
    found = fp16_inner.find_recordings(tmp_path)
    assert found.bench_path.name == "2026-12-01-a.json" and found.accuracy is None
    assert found.trace_text == "## default build\n"
    assert set(found.ncu) == {"fp32+fp32", "fp32+fp16"}
    assert fp16_inner.find_recordings(tmp_path / "missing").bench is None
