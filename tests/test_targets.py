"""sagelib.measure.targets and `sagelib targets`: the issues' speed targets against a bench document."""

import json

import pytest

from sagelib import cli, inputs
from sagelib.measure import bench, targets


def _record(backend, mode, spec, causal, tops):
    shape = inputs.parse_shape(spec)
    return {"backend": backend, "mode": mode, "shape": {"batch": shape.batch, "heads": shape.heads,
                                                        "seq_q": shape.seq_q, "seq_kv": shape.seq_kv,
                                                        "head_dim": shape.head_dim},
            "causal": causal, "dtype": "fp16", "tops": tops, "error": None}


def _document(created="2026-11-30T00:00:00Z", **tops):
    """A bench document with the targets' cases at the TOPS given (defaults below), quantizers at 3.0 of 4.0 TB/s."""
    figures = {"portable": 400.0, "d128": 1010.0, "causal": 850.0, "d64": 640.0, "n1024": 500.0, "cudnn1024": 600.0,
               "kernel": 900.0, **tops}
    records = [_record("cuda-per-warp-fp16", "end_to_end", "2:32:16384:128", False, figures["portable"]),
               _record("cuda-sm90", "end_to_end", "2:32:16384:128", False, figures["d128"]),
               _record("cuda-sm90", "end_to_end", "2:32:16384:128", True, figures["causal"]),
               _record("cuda-sm90", "end_to_end", "2:32:16384:64", False, figures["d64"]),
               _record("cuda-sm90", "end_to_end", "32:32:1024:128", False, figures["n1024"]),
               _record("sdpa-cudnn", "end_to_end", "32:32:1024:128", False, figures["cudnn1024"]),
               _record("cuda-sm90", "kernel_only", "2:32:16384:128", False, figures["kernel"])]
    return {"schema": bench.SCHEMA, "created_utc": created, "device": {"name": "Test GPU"},
            "environment": {"git_commit": "abc1234"}, "records": records,
            "quantizers": {"copy_tb_s": 4.0, "rows": [{"shape": "2:32:16384:128", "what": "all quantization (prepare)",
                                                       "tb_s": 3.0, "gpu_tb_s": 3.2}]}}


def test_each_target_reads_its_own_case():
    got = {s.target.name: s for s in targets.evaluate(_document())}
    portable = got["portable kernel, D128 N16384, end to end"]
    assert (portable.measured, portable.goal, portable.met) == (400.0, 550.0, False)
    assert portable.shortfall == pytest.approx(1 - 400 / 550)
    assert got["Hopper kernel, D128 N16384, end to end"].met is True
    assert got["Hopper kernel, D128 N16384, end to end"].shortfall == 0.0
    assert got["Hopper kernel, D128 N16384 causal, end to end"].measured == 850.0  # the causal record, not the other
    assert got["Hopper kernel, D64 N16384, end to end"].met is False
    n1024 = got["Hopper kernel, N1024 B32 D128, end to end"]
    assert (n1024.measured, n1024.goal, n1024.met) == (500.0, 600.0, False)  # the peer's figure is the goal
    quant = got["quantizers together, D128 N16384"]
    # their GPU time (replayed from a CUDA graph) is the figure; the Python calls' share is the note
    assert quant.measured == pytest.approx(0.8) and quant.met and "75.0% timed as Python calls" in quant.note
    older = _document()
    del older["quantizers"]["rows"][0]["gpu_tb_s"]  # a document from before the graph figure: the calls' share
    quant = next(s for s in targets.evaluate(older) if s.target.kind == "copy_share")
    assert quant.measured == pytest.approx(0.75) and quant.note == ""


def test_the_kernel_only_bar_must_be_passed_not_equalled():
    equal = targets.evaluate(_document(kernel=targets.SAGE2_SM90_KERNEL_ONLY_TOPS))
    assert next(s for s in equal if s.target.mode == "kernel_only").met is False


def test_a_near_miss_never_reads_as_the_goal():
    document = _document(d64=649.96)
    document["quantizers"]["rows"][0]["gpu_tb_s"] = 0.69964 * 4.0  # 69.96% of the copy: rounds to 70.0%
    text = targets.format_table(targets.evaluate(document))
    quant = next(line for line in text.splitlines() if "quantizers" in line)
    assert "69.96%" in quant and "70.0%" in quant and "missed, 0.05% short" in quant
    d64 = next(line for line in text.splitlines() if "D64" in line)
    assert "649.96" in d64 and "650.0" in d64 and "missed, 0.01% short" in d64
    assert "400.0" in text and "missed, 27% short" in text  # far misses keep one decimal and whole percents


def test_a_case_the_document_lacks_is_not_measured_not_missed():
    document = _document()
    document["records"] = [r for r in document["records"] if r["backend"] != "sdpa-cudnn"]
    del document["quantizers"]
    got = {s.target.name: s for s in targets.evaluate(document)}
    n1024 = got["Hopper kernel, N1024 B32 D128, end to end"]
    assert n1024.met is None and n1024.shortfall is None
    assert n1024.missing == "no sdpa-cudnn end_to_end 32:32:1024:128 record"
    assert got["quantizers together, D128 N16384"].met is None
    text = targets.format_table(list(got.values()))
    assert "not measured: no sdpa-cudnn end_to_end 32:32:1024:128 record" in text and "missed, 27% short" in text


def test_an_unknown_target_kind_is_refused():
    odd = targets.Target(6, "odd", "cuda-sm90", "end_to_end", "2:32:16384:128", False, "median")
    with pytest.raises(ValueError, match="kind must be tops, above_tops, peer or copy_share, got 'median'"):
        targets.evaluate(_document(), (odd,))


def test_the_latest_document_is_the_newest_that_measured_the_most(tmp_path):
    full, partial = _document("2026-11-01T00:00:00Z"), _document("2026-11-02T00:00:00Z")
    partial["records"] = partial["records"][1:2]  # newer, but only the D128 case
    for name, doc in (("2026-11-01-x-bench-a.json", full), ("2026-11-02-x-bench-b.json", partial)):
        (tmp_path / name).write_text(json.dumps(doc))
    document, path = targets.latest_document(tmp_path)
    assert path.name == "2026-11-01-x-bench-a.json"
    assert targets.latest_document(tmp_path / "empty") == (None, None)


def test_the_committed_recordings_give_every_target_a_figure():
    document, path = targets.latest_document()
    assert path is not None
    assert all(s.met is not None for s in targets.evaluate(document))


def test_the_command_prints_the_table_and_strict_fails_on_a_miss(tmp_path, capsys):
    source = tmp_path / "bench.json"
    source.write_text(json.dumps(_document()))
    assert cli.main(["targets", "--from", str(source)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{source} (Test GPU, 2026-11-30T00:00:00Z, tree abc1234)")
    assert "missed, 27% short" in out and out.count("\n") == 2 + len(targets.TARGETS)
    assert cli.main(["targets", "--from", str(source), "--strict"]) == 1
    met = tmp_path / "met.json"
    met.write_text(json.dumps(_document(portable=560.0, causal=900.0, d64=650.0, n1024=600.0)))
    assert cli.main(["targets", "--from", str(met), "--strict"]) == 0
    capsys.readouterr()
    unnamed = _document()
    del unnamed["environment"]["git_commit"]
    source.write_text(json.dumps(unnamed))
    assert cli.main(["targets", "--from", str(source)]) == 0
    assert capsys.readouterr().out.startswith(f"{source} (Test GPU, 2026-11-30T00:00:00Z, tree unknown)")


def test_the_command_refuses_a_file_that_is_not_a_bench_document(tmp_path, capsys):
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"schema": "sagelib.quant_breakdown/1", "rows": []}))
    assert cli.main(["targets", "--from", str(other)]) == 2
    assert "expected a sagelib.bench/1 document" in capsys.readouterr().err
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    assert cli.main(["targets", "--from", str(broken)]) == 2
    assert "is not JSON" in capsys.readouterr().err


def test_the_command_names_from_and_the_fix_for_a_path_it_cannot_read(tmp_path, capsys):
    binary = tmp_path / "binary.json"
    binary.write_bytes(b"\xff\xfe{")
    listed = tmp_path / "list.json"
    listed.write_text("[1, 2]")
    for given, found in [(tmp_path / "absent.json", "no such file"), (tmp_path, "a folder, not a file"),
                         (binary, "is not JSON"), (listed, "got a JSON list")]:
        assert cli.main(["targets", "--from", str(given)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("sagelib targets: error: --from") and found in err, err
        assert "sagelib bench --out" in err and err.count("\n") == 1


def test_the_chart_labels_a_near_miss_with_the_digits_that_tell_it_from_the_goal():
    """notebook 04's chart follows the table's rule: a missed target never reads 1.00x or 1000 of 1000."""
    import matplotlib

    matplotlib.use("Agg")
    from sagelib.studies import bench_plots

    assert targets.distinct(0.9986, 1.0, False, 2) == "0.999"
    assert targets.distinct(0.85, 1.0, False, 2) == "0.85"
    assert targets.distinct(999.6, 1000.0, False, 0) == "999.6"
    assert targets.distinct(0.6996, 0.70, True, 1) == "69.96%"
    statuses = targets.evaluate(_document(d128=999.6))
    fig = bench_plots.target_bars(statuses, "test")
    texts = [t.get_text() for t in fig.axes[0].texts]
    assert "0.9996x (999.6 of 1000)" in texts
    assert "0.98x (640 of 650)" in texts  # a clear miss keeps two decimals and whole TOPS
    labels = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert labels == [t.name for t in targets.TARGETS] and not any("issue" in label for label in labels)



def _recordings(tmp_path):
    """Two documents in a results folder, named against their time order, and one that measured no target's case."""
    older = _document("2026-11-01T09:00:00Z", portable=440.0)
    newer = _document("2026-11-02T10:30:00Z", d128=1010.0)
    newer["environment"]["git_commit"] = "def5678ffffffffff"
    del newer["records"][0]  # the portable case not measured
    unrelated = _document("2026-11-03T00:00:00Z")
    unrelated["records"], unrelated["quantizers"] = [], {}
    for name, doc in (("b-bench-old.json", older), ("a-bench-new.json", newer),
                      ("c-bench-none.json", unrelated)):
        (tmp_path / name).write_text(json.dumps(doc))
    return targets.history(tmp_path)


def test_the_history_lists_each_recording_that_measured_a_target_oldest_first(tmp_path):
    recordings = _recordings(tmp_path)
    assert [r.path.name for r in recordings] == ["b-bench-old.json", "a-bench-new.json"]
    assert [r.tree for r in recordings] == ["abc1234", "def5678fffff"]
    portable = [r.statuses[0] for r in recordings]
    assert (portable[0].measured, portable[1].met) == (440.0, None)
    lines = targets.format_history(recordings).splitlines()
    assert lines[1].split()[:4] == ["recorded", "(UTC)", "tree", "portable"] and lines[1].endswith("file")
    # portable 440 of 550 is 80.0%, missed; the quantizers 3.2 of 4.0 TB/s are 80% of the copy, 114.3% of 70%
    assert lines[2].split()[:5] == ["2026-11-01", "09:00", "abc1234", "80.0%", "114.3%*"]
    assert lines[3].split()[:5] == ["2026-11-02", "10:30", "def5678fffff", "-", "114.3%*"]
    assert "101.0%*" in lines[3] and lines[3].endswith("a-bench-new.json")
    # the newer document lacks the portable case: one target fewer, which its row says
    assert recordings[1].measured == recordings[0].measured - 1
    assert lines[2].split()[-2] == f"{recordings[0].measured}/{len(targets.TARGETS)}"
    assert lines[3].split()[-2] == f"{recordings[1].measured}/{len(targets.TARGETS)}"
    assert targets.format_history([]) == "no recorded bench document measured a target's case"


def test_the_history_chart_draws_a_line_per_target_filled_where_met(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from sagelib.studies import bench_plots

    recordings = _recordings(tmp_path)
    ax = bench_plots.target_history(recordings, "test").axes[0]
    lines = [line for line in ax.get_lines() if line.get_linestyle() == "-"]
    assert [line.get_label() for line in lines] == [t.name for t in targets.TARGETS]  # what each measures
    assert list(lines[0].get_xdata()) == [0]  # the portable case: only the older recording measured it
    d128, d64 = ax.collections[2], ax.collections[4]  # markers: D128 met in both (1010), D64 missed (640)
    assert [tuple(c) for c in d128.get_facecolors()] == [tuple(d128.get_edgecolors()[0])] * 2
    assert [tuple(c) for c in d64.get_facecolors()] == [(1.0, 1.0, 1.0, 1.0)] * 2
    # the x labels: each recording's date; the y label a few words (the title and the table say the rest)
    assert [t.get_text() for t in ax.get_xticklabels()] == ["2026-11-01", "2026-11-02"]
    assert ax.get_ylabel() == "measured / goal"


def test_the_history_chart_labels_at_most_a_dozen_of_fifty_recordings(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    from sagelib.studies import bench_plots

    recordings = _recordings(tmp_path)
    many = [recordings[i % 2] for i in range(50)]
    ticks = bench_plots.target_history(many, "test").axes[0].get_xticks()
    assert 1 < len(ticks) <= 12 and ticks[0] == 0


def test_the_command_prints_the_history_and_refuses_a_single_document_flag(capsys):
    assert cli.main(["targets", "--history"]) == 0
    out = capsys.readouterr().out
    assert "2026-11-30-nvidia-h200-bench-6457603.json" in out  # a committed recording
    for extra in (["--from", "x.json"], ["--strict"]):
        assert cli.main(["targets", "--history", *extra]) == 2
        assert "--history reads every recording" in capsys.readouterr().err


def test_sage2_ratios_read_both_records_from_the_same_document():
    shape = {"batch": 2, "heads": 32, "seq_q": 16384, "seq_kv": 16384, "head_dim": 128}

    def record(backend, tops):
        return {"backend": backend, "mode": "end_to_end", "tops": tops, "dtype": "fp16", "causal": False,
                "shape": shape, "layout": "HND"}

    document = {"records": [record("cuda-sm90", 858.6), record("sage2-sm90", 752.4)]}
    statuses = targets.evaluate(document)
    lines = targets.sage2_ratios(document, statuses)
    d128 = [line for line in lines if line.startswith("Hopper kernel, D128 N16384, end to end")]
    assert d128 and "1.141x" in d128[0] and "752.4" in d128[0]
    assert any("no cuda-sm90 end_to_end record" in line for line in lines if "causal" in line)
    assert targets.sage2_ratios({"records": [document["records"][0]]}, statuses) == []
