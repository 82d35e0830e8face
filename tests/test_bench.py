"""The benchmark harness: counting, statistics, rotation, output checks, JSON schema, CLI errors.

Expected values here are worked out by hand or by an independent implementation (numpy's
percentile, torch's SDPA math on the CPU), never by the code under test.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics

import numpy as np
import pytest
import torch

from sagelib import inputs
from sagelib.backends import Backend
from sagelib.inputs import Shape
from sagelib.measure import bench, checks, timing
from sagelib.measure.timing import TimingConfig

CPU = torch.device("cpu")
FAST = TimingConfig(warmup=1, reps=4, min_reps=2, budget_s=5.0)


# --------------------------------------------------------------------------- counting


def test_attention_ops_counts_two_gemms_and_halves_for_causal():
    shape = Shape(batch=2, heads=3, tokens=5, head_dim=7)
    assert timing.attention_ops(shape, causal=False) == 4 * 2 * 3 * 5 * 5 * 7 == 4200
    assert timing.attention_ops(shape, causal=True) == 2100
    assert timing.attention_ops(Shape(1, 1, 3, 64, kv_tokens=11), causal=False) == 4 * 3 * 11 * 64


def test_attention_ops_matches_the_anchor_convention():
    # ANCHORS.md: B x N = 32768 tokens, 32 heads, D=128; N=16384 (B=2) is 4*2*32*16384^2*128.
    shape = inputs.parse_shape("2:32:16384:128")
    assert timing.attention_ops(shape, False) == 8_796_093_022_208


def test_tops_is_ops_per_second_in_tera():
    assert timing.tops(10**12, 1000.0) == pytest.approx(1.0)
    assert timing.tops(3 * 10**12, 2.0) == pytest.approx(1500.0)
    with pytest.raises(ValueError, match="ms must be positive"):
        timing.tops(1, 0.0)


# --------------------------------------------------------------------------- statistics


@pytest.mark.parametrize("values", [[5.0, 1.0, 4.0, 2.0, 3.0], [1.0, 2.0, 3.0, 4.0], [0.7],
                                    [2.0, 2.0, 9.0, 1.0, 1.5, 3.3, 8.0]])
def test_summarize_agrees_with_numpy_percentiles(values):
    stats = timing.summarize(values)
    q1, med, q3 = np.percentile(values, [25, 50, 75])
    assert stats.median_ms == pytest.approx(med)
    assert stats.q1_ms == pytest.approx(q1)
    assert stats.q3_ms == pytest.approx(q3)
    assert stats.iqr_ms == pytest.approx(q3 - q1)
    assert (stats.min_ms, stats.max_ms, stats.reps) == (min(values), max(values), len(values))
    assert stats.mean_ms == pytest.approx(sum(values) / len(values))


def test_summarize_worked_example():
    stats = timing.summarize([1, 2, 3, 4])
    assert (stats.median_ms, stats.q1_ms, stats.q3_ms, stats.iqr_ms) == (2.5, 1.75, 3.25, 1.5)


@pytest.mark.parametrize("bad", [[], [1.0, -2.0], [float("nan")]])
def test_summarize_refuses_empty_or_impossible_times(bad):
    with pytest.raises(ValueError, match="summarize"):
        timing.summarize(bad)


def test_timing_config_refuses_nonsense():
    with pytest.raises(ValueError, match="reps"):
        TimingConfig(reps=0)
    with pytest.raises(ValueError, match="min_reps"):
        TimingConfig(reps=3, min_reps=5)
    for bad in (-1.0, float("nan")):
        with pytest.raises(ValueError, match="TimingConfig: cooldown_s must be 0 or more seconds"):
            TimingConfig(cooldown_s=bad)


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize("text, expected", [
    ("2:32:16384:128", Shape(2, 32, 16384, 128)),
    (" 1:8:64:96:64 ", Shape(1, 8, 64, 64, kv_tokens=96)),
])
def test_parse_shape(text, expected):
    assert inputs.parse_shape(text) == expected
    assert inputs.parse_shape(expected.spec) == expected


@pytest.mark.parametrize("text", ["1:2:3", "a:b:c:d", "1:2:0:64", "1:2:3:4:5:6", "1x2x3x4", "", "1:2:-3:4"])
def test_parse_shape_names_the_syntax(text):
    with pytest.raises(ValueError, match="B:H:N:D"):
        inputs.parse_shape(text)


def test_parse_causal_and_dtype():
    assert bench.parse_causal("no,yes") == [False, True]
    assert bench.parse_causal("yes") == [True]
    with pytest.raises(ValueError, match="no, yes or no,yes"):
        bench.parse_causal("sometimes")
    assert inputs.parse_dtype("bf16") is torch.bfloat16
    with pytest.raises(ValueError, match="fp16, bf16"):
        inputs.parse_dtype("fp32")


def test_causal_with_unequal_lengths_is_refused():
    with pytest.raises(ValueError, match="N_q != N_kv"):
        bench.SweepPlan(backends=["reference"], shapes=[Shape(1, 1, 64, 64, kv_tokens=96)], causal=[True])


# --------------------------------------------------------------------------- rotation and timing


def test_buffer_count_exceeds_twice_the_l2(monkeypatch):
    monkeypatch.setattr(timing, "l2_bytes", lambda device: 60 * 2**20)
    config = TimingConfig(max_buffers=8)
    assert timing.buffer_count(30 * 2**20, CPU, config) == 4  # 4 x 30 MB = 2 x 60 MB
    assert timing.buffer_count(1 * 2**20, CPU, config) == 8  # capped
    assert timing.buffer_count(800 * 2**20, CPU, config) == 2  # never fewer than two


def test_buffer_count_without_l2_is_two():
    assert timing.buffer_count(1000, CPU, TimingConfig()) == 2


def test_time_calls_rotates_through_every_buffer():
    seen = []
    calls = [lambda i=i: seen.append(i) for i in range(3)]
    times = timing.time_calls(calls, CPU, TimingConfig(warmup=2, reps=6, min_reps=1, budget_s=100))
    assert len(times) == 6 and all(t >= 0 for t in times)
    assert seen == [0, 1] + [0, 1, 2, 0, 1, 2]  # warm-up, then timed reps in rotation


def test_time_calls_idles_for_the_cooldown_before_the_warm_up(monkeypatch):
    slept, order = [], []
    monkeypatch.setattr(timing.time, "sleep", lambda s: (slept.append(s), order.append("sleep")))
    timing.time_calls([lambda: order.append("call")], CPU, TimingConfig(warmup=1, reps=2, min_reps=1, cooldown_s=1.5))
    assert slept == [1.5] and order == ["sleep", "call", "call", "call"]
    slept.clear()
    timing.time_calls([lambda: None], CPU, TimingConfig(warmup=1, reps=2, min_reps=1))
    assert slept == []  # the default: no idle


def test_time_calls_cuts_reps_to_the_budget_but_not_below_min():
    import time

    calls = [lambda: time.sleep(0.02)]
    times = timing.time_calls(calls, CPU, TimingConfig(warmup=1, reps=50, min_reps=3, budget_s=0.01))
    assert len(times) == 3


def test_time_ms_times_exactly_reps_calls_after_the_warm_up_even_over_budget(monkeypatch):
    real, seen = timing.time_calls, {}

    def on_the_cpu(calls, device, config):  # the real loop, on the host clock, with a budget that would cut reps
        seen.update(device=device, config=config)
        seen["times"] = real(calls, CPU, dataclasses.replace(config, budget_s=1e-9))
        return seen["times"]

    monkeypatch.setattr(timing, "time_calls", on_the_cpu)
    calls = []
    ms = timing.time_ms(lambda: calls.append(1), reps=6, warmup=2)
    assert seen["device"] == torch.device("cuda")
    assert len(calls) == 2 + 6 and len(seen["times"]) == 6
    assert ms == pytest.approx(statistics.median(seen["times"]), rel=1e-12, abs=0)


@pytest.mark.parametrize("times, expected", [([4.0, 1.0, 3.0, 2.0], 2.5), ([5.0, 1.0, 3.0], 3.0)])
def test_time_ms_is_the_median_of_the_timings(monkeypatch, times, expected):
    monkeypatch.setattr(timing, "time_calls", lambda calls, device, config: list(times))
    assert timing.time_ms(lambda: None, reps=len(times)) == expected  # even: the two middle ones' mean


def test_quant_bench_re_exports_the_timer():
    from sagelib.measure import quant_bench

    assert quant_bench.time_ms is timing.time_ms


def test_random_inputs_are_fresh_and_not_zero():
    shape = Shape(1, 2, 16, 8)
    a = inputs.random_qkv(shape, torch.float16, CPU, "HND", seed=1)
    b = inputs.random_qkv(shape, torch.float16, CPU, "HND", seed=2)
    assert a[0].shape == (1, 2, 16, 8)
    assert inputs.random_qkv(shape, torch.float16, CPU, "NHD", seed=1)[0].shape == (1, 16, 2, 8)
    assert all(t.abs().sum() > 0 for t in a)
    assert not torch.equal(a[0], b[0]) and not torch.equal(a[0], a[1])


# --------------------------------------------------------------------------- output checks


def _exact(q, k, v, causal):
    return torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                                            is_causal=causal).to(q.dtype)


@pytest.mark.parametrize("causal", [False, True])
def test_check_output_accepts_correct_attention(causal):
    shape = Shape(2, 3, 40, 16)
    q, k, v = inputs.random_qkv(shape, torch.float16, CPU, "HND", seed=0)
    check = checks.check_output(_exact(q, k, v, causal), q, k, v, shape=shape, causal=causal, layout="HND")
    assert check["ok"] and check["written"] and check["rel_l1"] < 1e-2


def test_check_output_flags_unwritten_and_wrong_outputs():
    shape = Shape(1, 2, 32, 16)
    q, k, v = inputs.random_qkv(shape, torch.float16, CPU, "HND", seed=0)
    out = _exact(q, k, v, False)
    holes = out.clone()
    holes[0, 1, 31, 3] = float("nan")
    check = checks.check_output(holes, q, k, v, shape=shape, causal=False, layout="HND")
    assert not check["ok"] and not check["written"] and "unwritten" in check["problem"]
    wrong = checks.check_output(_exact(q, k, v, True), q, k, v, shape=shape, causal=False, layout="HND")
    assert not wrong["ok"] and wrong["written"] and "wrong output" in wrong["problem"]
    shaped = checks.check_output(out[:, :1], q, k, v, shape=shape, causal=False, layout="HND")
    assert not shaped["ok"] and "shape" in shaped["problem"]


# --------------------------------------------------------------------------- one case, a sweep


class ExactCpu(Backend):
    name = "exact-cpu"

    def attention(self, q, k, v, *, causal=False, sm_scale=None, layout="HND", return_lse=False):
        return _exact(q, k, v, causal)


class Quantized(ExactCpu):
    name = "fake-quantized"
    quantized = True

    def kernel_only(self, q, k, v, *, causal=False, sm_scale=None, layout="HND"):
        out = _exact(q, k, v, causal)
        return lambda: out.clone()


class Broken(ExactCpu):
    name = "broken"

    def attention(self, q, k, v, **kwargs):
        raise RuntimeError("kernel refused the inputs")


def test_bench_case_times_and_checks_end_to_end():
    shape = Shape(1, 2, 32, 16)
    (record,) = bench.bench_case(ExactCpu(), shape, causal=False, dtype=torch.float16, device=CPU, timing=FAST)
    assert record.error is None and record.check["ok"]
    assert record.mode == "end_to_end" and record.timer == "cpu-wall-clock"
    assert record.buffers >= 2 and record.bytes_per_buffer == 2 * 2 * 16 * (32 + 64)
    assert record.tops == pytest.approx(record.ops / (record.stats["median_ms"] * 1e-3) / 1e12)


def test_bench_case_adds_kernel_only_for_quantized_backends():
    records = bench.bench_case(Quantized(), Shape(1, 1, 16, 16), causal=True, dtype=torch.float16,
                               device=CPU, timing=FAST)
    assert [r.mode for r in records] == ["end_to_end", "kernel_only"]
    assert all(r.check["ok"] for r in records)
    only = bench.bench_case(Quantized(), Shape(1, 1, 16, 16), causal=True, dtype=torch.float16,
                            device=CPU, timing=FAST, kernel_only=False)
    assert [r.mode for r in only] == ["end_to_end"]


def test_bench_case_turns_a_failure_into_a_named_error_record():
    (record,) = bench.bench_case(Broken(), Shape(1, 1, 16, 16), causal=False, dtype=torch.float16,
                                 device=CPU, timing=FAST)
    assert record.stats is None and "broken on B1 H1 N16 D16" in record.error and "refused" in record.error


def test_run_sweep_document_validates_and_tables(monkeypatch):
    plan = bench.SweepPlan(backends=["reference"], shapes=[Shape(1, 2, 64, 64)], causal=[False, True],
                           timing=FAST)
    document = bench.run_sweep(plan, CPU, command="test", progress=False)
    bench.validate_document(document)
    json.dumps(document, allow_nan=False)  # strict JSON
    assert document["schema"] == bench.SCHEMA and len(document["records"]) == 2
    assert document["plan"]["shapes"] == ["1:2:64:64"]
    assert "environment" in document and document["device"]["type"] == "cpu"
    table = bench.format_table(document)
    assert "reference" in table and "CPU wall clock" in table


def _doc(records, ceilings=None):
    return {"schema": bench.SCHEMA, "created_utc": "2026-01-01T00:00:00Z", "device": {}, "environment": {},
            "plan": {}, "ceilings": ceilings or {}, "records": records}


def _record(backend, tops_value, mode="end_to_end", n=4096, causal=False):
    shape = {"batch": 8, "heads": 32, "seq_q": n, "seq_kv": n, "head_dim": 128}
    ops = timing.attention_ops(Shape.from_record(shape), causal)
    median = ops / (tops_value * 1e12) * 1e3
    return {"backend": backend, "mode": mode, "shape": shape, "causal": causal, "dtype": "fp16", "layout": "HND",
            "ops": ops, "timer": "cuda-events", "stats": {"median_ms": median, "iqr_ms": 0.01}, "tops": tops_value,
            "check": {"ok": True, "rel_l1": 0.01}, "error": None}


def test_validate_document_names_what_is_broken():
    good = _doc([_record("sdpa-flash", 300.0)])
    bench.validate_document(good)
    with pytest.raises(ValueError, match="schema"):
        bench.validate_document({**good, "schema": "other/1"})
    with pytest.raises(ValueError, match="missing key 'ceilings'"):
        bench.validate_document({k: v for k, v in good.items() if k != "ceilings"})
    bad_tops = _record("sdpa-flash", 300.0)
    bad_tops["tops"] = 999.0
    with pytest.raises(ValueError, match="disagrees"):
        bench.validate_document(_doc([bad_tops]))
    bad_mode = {**_record("x", 1.0), "mode": "warm"}
    with pytest.raises(ValueError, match="mode"):
        bench.validate_document(_doc([bad_mode]))


def test_a_parsed_shape_names_the_same_case_as_a_record_of_it():
    record = _record("cuda", 900.0, n=1024, causal=True)
    assert bench.case_key(record) == (8, 32, 1024, 1024, 128, True)
    assert bench.shape_case(inputs.parse_shape("8:32:1024:128"), True) == bench.case_key(record)
    assert bench.shape_case(inputs.parse_shape("8:32:1024:128"), False) != bench.case_key(record)
    assert bench.shape_case(inputs.parse_shape("8:32:1024:2048:128"), True) != bench.case_key(record)


def test_peer_ratios_and_ceiling_fractions():
    records = [_record("sdpa-flash", 300.0), _record("sdpa-cudnn", 600.0), _record("cuda", 900.0),
               _record("cuda", 1200.0, mode="kernel_only"), _record("cuda", 450.0, n=1024)]
    rows = {(r["backend"], r["mode"], r["shape"]["seq_q"]): r["ratio"] for r in bench.peer_ratios(records)}
    assert rows[("cuda", "end_to_end", 4096)] == {"sdpa-flash": 3.0, "sdpa-cudnn": 1.5}
    assert rows[("cuda", "kernel_only", 4096)] == {"sdpa-flash": 4.0, "sdpa-cudnn": 2.0}
    assert rows[("cuda", "end_to_end", 1024)] == {}  # no peer measured on that case
    document = _doc(records, ceilings={"int8_gemm": {"value": 900.0, "unit": "TOPS"},
                                       "copy": {"value": 4.2, "unit": "TB/s"}})
    bench.add_ceiling_fractions(document)
    assert document["records"][2]["fraction_of"] == {"int8_gemm": 1.0}
    table = bench.format_table(document)
    assert "x sdpa-flash" in table and "x sdpa-cudnn" in table and "3.00" in table


# --------------------------------------------------------------------------- ceilings on the CPU


def test_ceilings_are_measured_or_say_why_not():
    from sagelib.measure.ceilings import format_ceilings, measure_ceilings

    ceilings = measure_ceilings(CPU, gemm_size=64, copy_bytes=1 << 16,
                                timing=TimingConfig(warmup=1, reps=3, min_reps=1, budget_s=1))
    assert set(ceilings) == {"int8_gemm", "fp8_gemm", "bf16_gemm", "copy"}
    for name, c in ceilings.items():
        assert (c["value"] is not None and c["value"] > 0) or c["reason"], name
    assert ceilings["copy"]["value"] > 0 and ceilings["copy"]["unit"] == "TB/s"
    assert "copy" in format_ceilings(ceilings)


# --------------------------------------------------------------------------- the command


@pytest.mark.parametrize("argv, message", [
    (["--backends", "nope"], "--backends: unknown backend 'nope'"),
    (["--backends", ""], "--backends: expected a comma-separated list"),
    (["--shapes", "1:2:3"], "--shapes: expected B:H:N:D"),
    (["--causal", "perhaps"], "--causal: expected no, yes or no,yes"),
    (["--dtype", "fp8"], "--dtype: expected one of fp16, bf16"),
    (["--device", "tpu"], "--device: expected cuda or cpu"),
    (["--cooldown-s", "-2"], "--cooldown-s: expected 0 or more seconds, got -2.0"),
])
def test_cli_errors_are_one_line_exit_2(sagelib_cli, argv, message):
    code, out, err = sagelib_cli("bench", *argv)
    assert code == 2
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a backend this machine cannot run: sdpa-flash without a GPU")
def test_cli_backend_this_machine_cannot_run_is_one_line_exit_3(sagelib_cli):
    code, out, err = sagelib_cli("bench", "--device", "cpu", "--backends", "sdpa-flash")
    assert code == 3, "a backend the machine lacks is not a usage error"
    assert "'sdpa-flash' cannot run on this machine" in err and len(err.strip().splitlines()) == 1


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message for a machine without a GPU")
def test_cli_without_gpu_says_so(sagelib_cli):
    code, _, err = sagelib_cli("bench", "--backends", "reference")
    assert code == 2 and "no CUDA GPU is visible" in err and "--device cpu" in err


def test_cli_sage_missing_names_the_install(sagelib_cli):
    code, _, err = sagelib_cli("bench", "--backends", "sage", "--device", "cpu")
    assert code == 3 and "pip install sageattention==1.0.6" in err


def test_cli_cpu_smoke_run_writes_valid_json(sagelib_cli, tmp_path):
    out = tmp_path / "bench.json"
    code, stdout, _ = sagelib_cli("bench", "--device", "cpu", "--backends", "reference", "--shapes", "1:2:64:64",
                                  "--causal", "no,yes", "--reps", "3", "--warmup", "1", "--no-progress",
                                  "--out", str(out))
    assert code == 0, stdout
    document = json.loads(out.read_text())
    bench.validate_document(document)
    assert [r["causal"] for r in document["records"]] == [False, True]
    assert "TOPS" in stdout and "reference" in stdout
    assert document["plan"]["timing"]["cooldown_s"] == 0.0  # no idle on the CPU unless asked


def test_cli_idles_before_each_gpu_case_unless_told_otherwise():
    from sagelib.commands.bench import CUDA_COOLDOWN_S, cooldown_for

    assert CUDA_COOLDOWN_S == 2.0  # what seq 182 measured as enough on the H200
    assert cooldown_for("cuda", None) == CUDA_COOLDOWN_S
    assert cooldown_for("cpu", None) == 0.0
    assert cooldown_for("cuda", 0.0) == 0.0 and cooldown_for("cpu", 5.0) == 5.0


def test_cli_out_is_written_by_the_shared_strict_writer(sagelib_cli, tmp_path, monkeypatch):
    from sagelib.records import documents

    written, real = [], documents.write_json
    monkeypatch.setattr(documents, "write_json", lambda doc, path: written.append(path) or real(doc, path))
    out = tmp_path / "bench.json"
    code, stdout, _ = sagelib_cli("bench", "--device", "cpu", "--backends", "reference", "--shapes", "1:2:64:64",
                                  "--reps", "3", "--warmup", "1", "--no-progress", "--out", str(out))
    assert code == 0, stdout
    assert written == [out] and out.read_text().endswith("}\n")


def test_cli_list_shows_every_backend(sagelib_cli):
    code, out, _ = sagelib_cli("bench", "--list")
    assert code == 0
    for name in ("reference", "sdpa-flash", "sdpa-cudnn", "sdpa-efficient", "sage"):
        assert name in out


# --------------------------------------------------------------------------- on a GPU


@pytest.mark.gpu
def test_gpu_poisoning_catches_an_unwritten_output():
    class Lazy(Backend):
        name = "lazy"

        def attention(self, q, k, v, **kwargs):
            return torch.empty_like(q)  # allocated, never written

    device = torch.device("cuda")
    (record,) = bench.bench_case(Lazy(), Shape(2, 4, 256, 64), causal=False, dtype=torch.float16,
                                 device=device, timing=FAST)
    assert not record.check["written"] and not record.check["ok"]


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["sdpa-flash", "sdpa-cudnn", "sdpa-efficient"])
def test_gpu_sdpa_backends_time_and_pass_their_check(name):
    from sagelib import backends

    device = torch.device("cuda")
    (record,) = bench.bench_case(backends.get(name), Shape(2, 8, 1024, 128), causal=True,
                                 dtype=torch.float16, device=device, timing=FAST)
    assert record.error is None, record.error
    assert record.check["ok"] and record.check["rel_l1"] < 5e-3
    assert record.timer == "cuda-events" and record.tops > 1


@pytest.mark.gpu
def test_gpu_ceilings_measured():
    from sagelib.measure.ceilings import measure_ceilings

    ceilings = measure_ceilings(torch.device("cuda"), gemm_size=4096, copy_bytes=1 << 28,
                                timing=TimingConfig(warmup=2, reps=5, min_reps=2, budget_s=1))
    assert ceilings["copy"]["value"] > 0.1, ceilings["copy"]
    assert ceilings["bf16_gemm"]["value"] > 1, ceilings["bf16_gemm"]
    assert math.isfinite(ceilings["int8_gemm"]["value"] or 0.0)


def test_cli_refuses_an_out_path_it_cannot_write_before_timing_anything(sagelib_cli, tmp_path):
    (tmp_path / "file").write_text("")
    for out, problem in [(tmp_path, "a folder, not a file"),
                         (tmp_path / "file" / "bench.json", "is a file, not a folder")]:
        code, stdout, err = sagelib_cli("bench", "--device", "cpu", "--backends", "reference", "--shapes", "1:2:64:64",
                                        "--reps", "3", "--warmup", "1", "--no-progress", "--out", str(out))
        assert code == 2 and err.startswith(f"sagelib bench: error: --out {str(out)!r}: ") and problem in err
        assert stdout == ""  # refused before the sweep: no table, no timing lost


@pytest.mark.gpu
def test_replay_of_keeps_the_captured_inputs_alive():
    import gc
    import weakref

    x = torch.ones(1 << 20, device="cuda")
    seen = weakref.ref(x)
    out = torch.empty_like(x)
    replay = timing.replay_of(lambda x=x: torch.mul(x, 2, out=out))
    del x
    gc.collect()
    assert seen() is not None, "the input was freed while its graph can still be replayed"
    out.zero_()
    replay()
    torch.cuda.synchronize()
    assert bool((out == 2).all())
    del replay
    gc.collect()
    assert seen() is None, "the replay should be the input's last holder"


@pytest.mark.gpu
def test_gpu_time_ms_times_a_device_call():
    x = torch.ones(1 << 22, device="cuda")
    out = torch.empty_like(x)
    calls = []

    def double():
        calls.append(1)
        torch.mul(x, 2, out=out)

    ms = timing.time_ms(double, reps=7, warmup=2)
    assert len(calls) == 2 + 7 and math.isfinite(ms) and ms > 0
    assert bool((out == 2).all())


def test_synced_and_host_records_fail_only_when_they_raise():
    """synced and host rows time the calls their case's end_to_end row checked: an unchecked one is no failure
    (on the H200 every `sagelib bench` with the user view exited 1 over them), an error still is."""
    from sagelib.measure.bench import failed_records

    ok = {"ok": True}
    records = [{"mode": "end_to_end", "check": ok}, {"mode": "synced", "check": None}, {"mode": "host"},
               {"mode": "kernel_only", "check": {"ok": False, "problem": "nan"}},
               {"mode": "host", "error": "boom"}]
    assert failed_records({"records": records}) == [records[3], records[4]]
