"""``sagelib sweep``: the Hopper kernel's schedule variants; arguments, the variant list, the no-GPU path."""

import pytest

from sagelib import cli
from sagelib.backends.kernels import sm90
from sagelib.measure import sm90_schedules, sweep_sm90


def run(capsys, *argv):
    code = cli.main(["sweep", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_variants_select_schedules():
    schedules = {**sm90_schedules.SCHEDULES, "no-pack": ("-DSM90_ABLATE_PACK=1",), "d64-no-cvt": ("-DSM90_ABLATE_CVT=1",)}
    everything = list(sweep_sm90.variants(128, schedules=schedules))
    assert [name for name, _, _ in everything].count("default") == len(sm90_schedules.STAGES[128])  # one per depth
    assert not any(name.startswith("d64") for name, _, _ in everything)
    assert any(name == "d64-no-cvt" for name, _, _ in sweep_sm90.variants(64, schedules=schedules))
    chosen = list(sweep_sm90.variants(128, only=("default", "no-pack"), schedules=schedules))
    assert [(name, stages) for name, stages, _ in chosen] == [("default", None), ("no-pack", None)]
    k64 = [(name, stages) for name, stages, _ in sweep_sm90.variants(64, cta_k=64) if name == "default"]
    assert k64 == [("default", s) for s in sm90_schedules.STAGES_K64[64]]
    ablations = [name for name, _, _ in sweep_sm90.variants(128, ablate=True)]
    assert ablations == ["default", *sm90_schedules.ABLATIONS]


def test_every_schedule_macro_is_one_a_kernel_reads():
    """A switch removed from the kernels must leave the table too: a stale name would build the default."""
    from sagelib.cuda.build import macro_options

    for name, options in {**sm90_schedules.SCHEDULES, **sm90_schedules.ABLATIONS}.items():
        assert macro_options(options, name, "") == options


def test_an_extra_schedule_is_parsed_and_added():
    assert sweep_sm90.parse_schedule("no pack=-DSM90_ABLATE_PACK=1 -USM90_TRACE") == (
        "no pack", ("-DSM90_ABLATE_PACK=1", "-USM90_TRACE"))
    extra = sweep_sm90.schedule_table(["no pack=-DSM90_ABLATE_PACK=1"])
    assert list(extra)[:-1] == list(sm90_schedules.SCHEDULES) and extra["no pack"] == ("-DSM90_ABLATE_PACK=1",)
    assert [o for n, _, o in sweep_sm90.variants(128, only=("no pack",), schedules=extra)] == [("-DSM90_ABLATE_PACK=1",)]


def test_shapes_parse_with_the_causal_suffix():
    assert sweep_sm90.parse_shapes("2:32:16384:128,1:2:256:64:causal") == [(2, 32, 16384, 128, False),
                                                                            (1, 2, 256, 64, True)]


@pytest.mark.parametrize("argv,message", [
    (["--build-only", "--variants", "default,no-such-schedule"], "--variants: unknown schedule(s) ['no-such-schedule']"),
    (["--build-only", "--schedule", "no-equals"], "--schedule: expected NAME=-DMACRO"),
    (["--build-only", "--schedule", "=-DX=1"], "--schedule: expected NAME=-DMACRO"),
    (["--build-only", "--schedule", "x=--use_fast_math"],
     "--schedule: expected -DNAME[=VALUE] or -UNAME words, got ['--use_fast_math']"),
    (["--build-only", "--schedule", "default=-DSM90_TRACE=1"], "--schedule: 'default' is already a schedule"),
    (["--build-only", "--cta-k", "32"], "--cta-k: expected 64"),
    (["--rounds", "0"], "--rounds: expected a whole number of 1 or more"),
    (["--sustain", "1"], "--sustain/--idle-s: expected more than 1.5 s"),
    (["--shapes", "2:32:16384"], "--shapes: expected B:H:N:D or B:H:N:D:causal"),
    (["--shapes", "2:32:1024:96"], "--shapes: head_dim 96"),
])
def test_bad_arguments_exit_2_naming_the_flag(capsys, argv, message):
    code, _, err = run(capsys, *argv)
    assert code == 2 and message in err


def test_an_out_in_a_missing_file_folder_is_refused_before_any_work(capsys, tmp_path):
    (tmp_path / "f").write_text("")
    code, _, err = run(capsys, "--out", str(tmp_path / "f" / "x.json"))
    assert code == 2 and "--out" in err


def test_without_an_sm90_gpu_the_sweep_exits_3_and_says_why(capsys):
    reason = sm90.unavailable_reason()
    if reason is None:
        pytest.skip("this machine has an sm_90 GPU")
    code, out, err = run(capsys, "--variants", "default")
    assert code == 3 and reason in err and "--build-only" in err and out == ""


def test_format_row_marks_the_output_check():
    row = {"shape": "B1 H1 N128 D128", "variant": "x", "stages": 2, "ms": 2.0, "tops": 1.0,
           "rel_l1_to_default": 0.0, "bit_identical_to_default": True}
    assert sweep_sm90.format_row(row, 1.0).endswith("0.500 same bits")
    assert sweep_sm90.format_row({**row, "bit_identical_to_default": False, "rel_l1_to_default": 1e-3}, 2.0) \
        .endswith("1.000 ok")
    assert "differs 5.0e-02" in sweep_sm90.format_row({**row, "bit_identical_to_default": False,
                                                       "rel_l1_to_default": 0.05}, 2.0)


def test_build_only_without_nvrtc_exits_3_naming_the_install(capsys):
    from sagelib.cuda.build import nvrtc_version

    if nvrtc_version() is not None:
        pytest.skip("NVRTC is installed here")
    code, _, err = run(capsys, "--build-only", "--variants", "default")
    assert code == 3 and "NVRTC" in err and ".[cuda13]" in err
