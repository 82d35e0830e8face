"""``sagelib bench --suite``: the named benches that replaced scripts/bench_cuda.py, without a GPU."""

import argparse
import json

import pytest
import torch

from sagelib import cli, inputs
from sagelib.commands import bench as bench_command
from sagelib.measure import bench, bench_suites, quant_bench, recordings, targets


def run(capsys, *argv):
    code = cli.main(["bench", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def parsed(*argv):
    parser = argparse.ArgumentParser()
    bench_command.register(parser.add_subparsers())
    return parser.parse_args(["bench", *argv])


def test_a_suite_fills_the_flags_left_out_and_the_given_ones_win():
    args = parsed("--suite", "default", "--shapes", "1:2:256:128")
    assert bench_command.apply_suite(args) is bench_suites.SUITES["default"]
    assert args.backends == ",".join(bench_suites.SUITE_BACKENDS) and args.shapes == "1:2:256:128"
    assert (args.causal, args.reps, args.budget_s, args.ceilings) == ("no,yes", 20, 1.5, "skip")
    quick = parsed("--suite", "quick", "--ceilings", "measure")
    bench_command.apply_suite(quick)
    assert (quick.reps, quick.shapes, quick.ceilings) == (10, "2:32:16384:128,32:32:1024:128", "measure")
    plain = parsed()
    assert bench_command.apply_suite(plain) is None
    assert {k: getattr(plain, k) for k in bench_command.PLAIN_DEFAULTS} == bench_command.PLAIN_DEFAULTS


def test_the_default_suite_is_the_bench_the_targets_measure():
    """Every target's case is in the default suite's grid, so its document can meet every target."""
    suite = bench_suites.SUITES["default"]
    shapes = {s.spec for s in inputs.parse_shapes(suite.shapes)}
    for target in targets.TARGETS:
        if target.kind != "copy_share":
            assert target.backend in suite.backends and target.shape in shapes, target.name
            assert target.peer in ("", *suite.backends), target.name
    assert bench.parse_causal(suite.causal) == [False, True]


@pytest.mark.parametrize("argv,message", [
    (["--suite", "nightly"], "--suite: expected one of default, quick, quant, got 'nightly'"),
    (["--no-quant"], "--no-quant: skips the quantizers of a suite; add --suite default"),
    (["--suite", "default", "--device", "cpu"], "--suite default: times our kernels on a GPU; leave out --device cpu"),
    (["--suite", "quant", "--no-quant"], "--no-quant: --suite quant measures only the quantizers"),
])
def test_bad_suite_arguments_exit_2(capsys, argv, message):
    code, out, err = run(capsys, *argv)
    assert code == 2 and message in err and out == ""


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
@pytest.mark.parametrize("name", list(bench_suites.SUITES))
def test_a_suite_without_a_gpu_exits_3(capsys, name):
    code, out, err = run(capsys, "--suite", name)
    assert code == 3 and f"--suite {name}: no CUDA GPU" in err and out == ""


def test_a_suite_adds_the_quantizers_to_the_bench_as_the_recorded_benches_hold_them(capsys, tmp_path, monkeypatch):
    """The document keeps the shape of the recorded data/results benches: targets reads its copy share."""
    recorded, path = targets.latest_document()
    assert recorded is not None and "quantizers" in recorded
    quantizers = {"schema": recordings.QUANT_SCHEMA, **recorded["quantizers"]}
    sweep_without = {k: v for k, v in recorded.items() if k != "quantizers"}
    seen = {}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(recordings, "usable_backends", lambda names: (["reference"], {n: "not here" for n in names}))
    monkeypatch.setattr(quant_bench, "measure", lambda shapes, command: seen.update(quant=(shapes, command))
                        or quantizers)
    monkeypatch.setattr(quant_bench, "format_rows", lambda rows, copy: "quantizer table")
    monkeypatch.setattr(bench, "run_sweep", lambda plan, device, **kw: seen.update(plan=plan, **kw) or sweep_without)
    monkeypatch.setattr(bench, "format_table", lambda document: "bench table")
    out = tmp_path / "bench.json"
    code, printed, err = run(capsys, "--suite", "default", "--device", "cuda", "--out", str(out))
    assert code == 0 and "backend cuda-sm90: skipped (not here)" in err and "quantizer table" in printed
    assert seen["quant"] == (quant_bench.SHAPES, "sagelib bench --suite default")  # argv is pytest's here
    assert seen["plan"].backends == ["reference"] and seen["plan"].causal == [False, True]
    assert seen["plan"].timing.reps == 20 and seen["plan"].timing.budget_s == 1.5 and seen["ceilings"] == {}
    written = json.loads(out.read_text())
    assert written["quantizers"] == recorded["quantizers"]
    assert [(s.measured, s.met) for s in targets.evaluate(written)] == \
        [(s.measured, s.met) for s in targets.evaluate(recorded)]


def test_the_quant_suite_writes_the_quantizers_document(capsys, tmp_path, monkeypatch):
    document = {"schema": recordings.QUANT_SCHEMA, "copy_tb_s": 4.0, "rows": []}
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(quant_bench, "measure", lambda shapes, command: document)
    monkeypatch.setattr(quant_bench, "format_rows", lambda rows, copy: "quantizer table")
    out = tmp_path / "quant.json"
    code, printed, _ = run(capsys, "--suite", "quant", "--out", str(out))
    assert code == 0 and json.loads(out.read_text()) == document
