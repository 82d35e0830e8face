"""``sagelib study softmax|quant-breakdown|ceilings``: arguments, the no-GPU path, and the tables and documents."""

import json

import pytest
import torch

from sagelib import backends, cli
from sagelib.backends.kernels import sm90
from sagelib.studies import quant_breakdown, softmax_beside


def run(capsys, *argv):
    code = cli.main(["study", *argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("argv,message", [
    (["softmax", "--define", "SM90_ABLATE_PAKC=1"], "--define: no kernel source reads the macro of "
                                                    "['-DSM90_ABLATE_PAKC=1']"),
    (["softmax", "--iters", "0"], "--iters: expected at least 1 step"),
    (["softmax", "--out", "x.json"], "--out and --softmax-warpgroups go with --beside"),
    (["softmax", "--softmax-warpgroups", "2"], "go with --beside"),
    (["quant-breakdown", "--rounds", "0"], "--rounds: expected a whole number of 1 or more"),
    (["quant-breakdown", "--shapes", "2:32"], "--shapes: expected B:H:N:D"),
])
def test_bad_arguments_exit_2_naming_the_flag_before_any_gpu_work(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and message in err and out == ""


def test_an_out_that_cannot_be_written_is_refused_first(capsys, tmp_path):
    for argv in (["quant-breakdown"], ["ceilings"], ["softmax", "--beside"]):
        code, _, err = run(capsys, *argv, "--out", str(tmp_path))
        assert code == 2 and "--out" in err and "a folder, not a file" in err


def test_without_a_study_the_help_is_printed(capsys):
    code, out, _ = run(capsys)
    assert code == 2 and "softmax" in out and "quant-breakdown" in out and "ceilings" in out


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
@pytest.mark.parametrize("argv,needs", [
    (["softmax"], "the softmax microbenchmark runs one of our CUDA kernels"),
    (["softmax", "--beside"], "--beside runs an sm_90a kernel"),
    (["quant-breakdown"], "the breakdown times the cuda-sm90 and sdpa-cudnn backends"),
    (["ceilings"], "the ceilings are the GPU's"),
])
def test_without_a_gpu_each_study_exits_3_and_says_what_it_needs(capsys, argv, needs):
    code, out, err = run(capsys, *argv)
    assert code == 3 and needs in err and out == ""


def test_the_no_gpu_reason_is_the_backends_own(capsys):
    reason = backends.get("cuda", require_available=False).unavailable_reason()
    if reason is None:
        pytest.skip("the cuda backend runs here")
    code, _, err = run(capsys, "softmax")
    assert code == 3 and reason in err


def test_the_alone_table_shows_a_configuration_that_did_not_launch():
    rows = [{"warps_per_scheduler": 1, "threads": 128, "cycles_per_step": 820.0, "cycles_per_warp_step": 820.0},
            {"warps_per_scheduler": 4, "threads": 512, "error": "too many resources requested"}]
    lines = softmax_beside.format_alone(rows).splitlines()
    assert lines[0].split() == ["warps/scheduler", "threads", "cycles/step", "cycles/warp-step"]
    assert lines[1].split() == ["1", "128", "820", "820"]
    assert lines[2].split()[:2] == ["4", "512"] and "did not launch: too many resources requested" in lines[2]


def test_a_beside_document_reads_back_as_the_recordings_do(tmp_path):
    rows = [dict(beside=0, kind="nothing", cycles_per_step=800.0, batches_per_kcycle=0.0,
                 batches_per_kcycle_alone=0.0, over_alone=1.0),
            dict(beside=1, kind="Q.K^T batches", cycles_per_step=1000.0, batches_per_kcycle=2.5,
                 batches_per_kcycle_alone=3.0, over_alone=1.25)]
    document = softmax_beside.beside_document(rows, iters=10, softmax_warpgroups=1, options=("-DX=1",),
                                              command="sagelib study softmax --beside", gpu="card")
    (tmp_path / f"2030-01-01-card-{softmax_beside.STEM}.json").write_text(json.dumps(document))
    runs, read, _ = softmax_beside.latest_recording(tmp_path)
    assert runs == [rows] and read["schema"] == softmax_beside.SCHEMA and read["options"] == ["-DX=1"]
    table = softmax_beside.format_beside(rows).splitlines()
    assert table[2].startswith("Q.K^T batches") and table[2].split()[-4:] == ["1000", "1.250", "2.50", "3.00"]


@pytest.mark.gpu
def test_the_breakdown_times_every_pass_and_writes_its_rows(capsys, tmp_path):
    reason = quant_breakdown.unavailable_reason()
    if reason:
        pytest.skip(reason)
    out = tmp_path / "breakdown.json"
    code, _, _ = run(capsys, "quant-breakdown", "--shapes", "1:4:1000:128", "--rounds", "1", "--out", str(out))
    assert code == 0
    doc = json.loads(out.read_text())
    assert doc["schema"] == quant_breakdown.SCHEMA
    (row,) = doc["rows"]
    assert set(row["times_ms"]) == set(quant_breakdown.PASSES) and all(v > 0 for v in row["times_ms"].values())
    assert len(row["ceilings"]) == len(quant_breakdown.ceilings(quant_breakdown.PassTimes(**row["times_ms"])))


@pytest.mark.gpu
def test_the_beside_study_writes_a_row_per_kind(capsys, tmp_path):
    reason = sm90.unavailable_reason()
    if reason:
        pytest.skip(reason)
    out = tmp_path / "beside.json"
    code, _, _ = run(capsys, "softmax", "--beside", "--iters", "50", "--out", str(out))
    assert code == 0
    (rows,) = json.loads(out.read_text())["runs"]
    assert [r["kind"] for r in rows] == list(softmax_beside.KINDS)
