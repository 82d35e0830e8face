"""The unit microbenchmarks: measured rates in place of stated ones, recordings, no-GPU reasons."""

import json

from sagelib.measure import microbench
from sagelib.measure.hardware import H200


def test_measured_rates_replace_stated_ones_and_say_so():
    hw = H200.with_measured(mufu_per_clk=15.5)
    assert hw.mufu_per_clk == 15.5 and hw.source["mufu_per_clk"].startswith("measured")
    assert H200.mufu_per_clk == 16.0


def test_microbench_without_a_gpu_reports_why_for_every_rate(monkeypatch):
    monkeypatch.setattr(microbench.torch.cuda, "is_available", lambda: False)
    rates = microbench.run()
    assert len(rates) == len(microbench.MICROBENCHES)
    assert all(r.value is None and "no CUDA GPU" in r.reason for r in rates)
    assert microbench.measured_hardware(rates) is H200


def test_the_recorded_h200_microbenchmarks_load_as_rates():
    rates, document, path = microbench.latest_recording()
    assert path is not None and document["schema"] == microbench.SCHEMA
    # the recording predates the e4m3 f16-accumulator bench (added for sm_120/sm_121, not yet run on a card)
    assert {m.key for m in microbench.MICROBENCHES} - {r.key for r in rates} <= {"mma_sync_e4m3_f16acc"}
    assert {r.key for r in rates} <= {m.key for m in microbench.MICROBENCHES}
    assert all(r.value and r.value > 0 for r in rates)


def test_a_microbenchmark_document_reads_back_as_the_rates_it_holds():
    rates = [microbench.Rate("ex2", "exp2", "results/clk/SM", 15.9, "mufu_per_clk"),
             microbench.Rate("mma_sync_f16", "f16 mma", "ops/clk/SM", 2683.0, "mma_sync_pv_ops_per_clk")]
    doc = json.loads(json.dumps(microbench.document(rates, "python3 -m sagelib.measure.microbench")))
    assert doc["schema"] == microbench.SCHEMA and doc["command"] == "python3 -m sagelib.measure.microbench"
    fields = set(microbench.Rate.__dataclass_fields__)
    assert [microbench.Rate(**{k: v for k, v in r.items() if k in fields}) for r in doc["rates"]] == rates
    hw = microbench.measured_hardware(rates)
    assert hw.mma_sync_pv_ops_per_clk == 2683.0 and hw.source["mma_sync_pv_ops_per_clk"].startswith("measured")
