"""sagelib.cuda.sass: reading cuobjdump's SASS, finding the exp pass, counting it; `sagelib kernels sass`.

The parser is checked on a listing written here by hand. The counts of the real kernels need nvcc and
cuobjdump (no GPU): where either is missing those tests skip with the reason.
"""

import json

import pytest

from sagelib import cli
from sagelib.cuda import instances, sass

# Two functions. In `kern`: a prologue, a masked exp block (two compare-and-selects, two exp2), a branch
# target with the unmasked exp block (two exp2, no select), and a loop back to it.
LISTING = """
	code for sm_90a
		Function : _Z4kernv
	.headerflags	@"EF_CUDA_SM90"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                           /* 0x00000a00ff017b82 */
                                                                                    /* 0x000e240000000800 */
        /*0010*/               @P0 BRA 0x80 ;                                       /* 0x0000000000000947 */
        /*0020*/                   ISETP.GE.AND P1, PT, R2, R3, PT ;                /* 0x0000000302007c0c */
        /*0030*/                   FSEL R4, R4, -5e+06, !P1 ;                       /* 0x0000000302007c0c */
        /*0040*/                   ISETP.GE.AND P2, PT, R5, R3, PT ;                /* 0x0000000302007c0c */
        /*0050*/                   MUFU.EX2 R6, R4 ;                                /* 0x0000000302007c0c */
        /*0060*/                   MUFU.EX2 R7, R5 ;                                /* 0x0000000302007c0c */
        /*0070*/                   BRA 0xd0 ;                                       /* 0x0000000302007c0c */
        /*0080*/                   VIADD R8, R8, 0x4b400000 ;                       /* 0x0000000302007c0c */
        /*0090*/                   FFMA R9, R8, R10, -R11 ;                         /* 0x0000000302007c0c */
        /*00a0*/                   MUFU.EX2 R9, R9 ;                                /* 0x0000000302007c0c */
        /*00b0*/                   MUFU.EX2 R12, R12 ;                              /* 0x0000000302007c0c */
        /*00c0*/                   F2FP.SATFINITE.E4M3.F32.PACK_AB_MERGE_C R13, R12, R9, R13 ;
        /*00d0*/              @!P3 BRA 0x80 ;                                       /* 0x0000000302007c0c */
        /*00e0*/                   EXIT ;                                           /* 0x0000000302007c0c */
		..........
		Function : _Z5otherv
        /*0000*/                   IMAD.MOV.U32 R1, RZ, RZ, 0x1 ;                   /* 0x0000000302007c0c */
        /*0010*/                   EXIT ;                                           /* 0x0000000302007c0c */
"""


def test_parse_sass_reads_functions_predicates_opcodes_and_operands():
    functions = sass.parse_sass(LISTING)
    assert list(functions) == ["_Z4kernv", "_Z5otherv"]
    kern = functions["_Z4kernv"]
    assert [i.address for i in kern] == list(range(0, 0xF0, 0x10))
    assert kern[1] == sass.Instruction(0x10, "BRA", "@P0", "0x80")
    assert kern[13] == sass.Instruction(0xD0, "BRA", "@!P3", "0x80")
    assert kern[12].opcode == "F2FP.SATFINITE.E4M3.F32.PACK_AB_MERGE_C" and kern[12].operands.startswith("R13, R12")
    assert functions["_Z5otherv"][0].operands == "R1, RZ, RZ, 0x1"


def test_basic_blocks_split_at_branches_and_their_targets():
    blocks = sass.basic_blocks(sass.parse_sass(LISTING)["_Z4kernv"])
    assert [(b[0].address, b[-1].address) for b in blocks] == [(0x0, 0x10), (0x20, 0x70), (0x80, 0xD0), (0xE0, 0xE0)]


def test_the_exp_pass_is_the_unmasked_block_and_is_counted_by_family():
    kern = sass.parse_sass(LISTING)["_Z4kernv"]
    block = sass.exp_pass(kern)
    assert block[0].address == 0x80  # the masked block has as many exp2, but selects
    mix = sass.mix_of("kern", "sm_90a", kern)
    assert (mix.instructions, mix.exp2) == (6, 2)
    assert {k: v for k, v in mix.counts.items() if v} == {"exp2": 2, "ffma": 1, "iadd": 1, "pack": 1, "other": 1}
    assert mix.per_exp2("iadd") == 0.5 and mix.per_exp2() == 3.0
    other = sass.mix_of("other", "sm_90a", sass.parse_sass(LISTING)["_Z5otherv"])
    assert sass.exp_pass(sass.parse_sass(LISTING)["_Z5otherv"]) == [] and other.instructions == 0
    row_kern, row_other = sass.rows([mix, other])
    assert row_kern["all per exp2"] == 3.0 and row_kern["iadd per exp2"] == 0.5 and row_kern["exp2"] == 2
    assert row_other["all per exp2"] is None and row_other["exp2"] == 0


def test_the_change_table_shows_each_familys_move_per_exp2():
    base = sass.ExpPassMix("k<1>", "sm_90a", {"exp2": 4, "ffma": 4, "i2f": 4, "iadd": 0, "other": 2})
    switched = sass.ExpPassMix("k<1>", "sm_90a", {"exp2": 4, "ffma": 4, "i2f": 0, "iadd": 4, "fadd": 4, "other": 2})
    without_exp2 = sass.ExpPassMix("k<2>", "sm_90", {"exp2": 0, "other": 5})
    only_before = sass.ExpPassMix("k<3>", "sm_90a", {"exp2": 1})
    table = sass.format_change([base, without_exp2, only_before], [switched, without_exp2], ("-DX=1",))
    header, columns, row, row_without = table.splitlines()
    assert header.startswith("-DX=1 against the default build")
    assert row.split()[2] == "14->18"

    def cell(name):  # the 6 characters under the column's right-aligned heading
        end = columns.index(f" {name}") + 1 + len(name)
        return row[end - 6:end].strip()

    assert {name: cell(name) for name in ("ffma", "fadd", "iadd", "i2f", "other", "all")} == \
        {"ffma": "", "fadd": "+1.00", "iadd": "+1.00", "i2f": "-1.00", "other": "", "all": "+1.00"}
    assert "n/a" in row_without and "k<3>" not in table
    assert all(line == line.rstrip() for line in table.splitlines())
    unchanged = sass.format_change([base], [base], ("-DTYPO=1",))
    assert unchanged.splitlines()[-1].startswith("no exp pass changed: check the macro's name")
    assert "no exp pass changed" not in table


@pytest.mark.parametrize("opcode, family", [
    ("MUFU.EX2", "exp2"), ("MUFU.RCP", "other"), ("FFMA.FTZ", "ffma"), ("I2FP.F32.S32", "i2f"), ("IADD3", "iadd"),
    ("VIMNMX3", "max"), ("FMNMX", "max"), ("QGMMA.64x64x32.F32.E4M3.E4M3", "mma"), ("LDSM.16.M88.4", "smem"),
    ("FADD", "fadd"), ("IMAD.IADD", "iadd"), ("IMAD.MOV.U32", "other"), ("FSEL", "sel")])
def test_family(opcode, family):
    assert sass.family(opcode) == family


@pytest.mark.parametrize("argv, message", [
    (["--kernel", "quant_kv.cu"], "--kernel: expected one of ['attn_mma.cu', 'attn_sm90.cu'], got 'quant_kv.cu'"),
    (["--arch", "sm_75"], "--arch: expected one of"),
    (["--kernel", "attn_sm90.cu", "--arch", "sm_89"], "--arch: none of ['sm_89'] builds ['attn_sm90.cu']"),
    (["--option", "SM90_ABLATE_CVT=1"], "--option: expected -DNAME[=VALUE] or -UNAME words, got ['SM90_ABLATE_CVT=1']"),
    (["--jobs", "0"], "--jobs: expected a positive number, got 0"),
    (["--compare"], "--compare: compares a build with --option against the default one"),
    (["--option=-DSM90_CVT_BAIS=1"], "--option: no kernel source reads the macro of ['-DSM90_CVT_BAIS=1']")])
def test_the_command_names_the_bad_argument(argv, message, capsys):
    assert cli.main(["kernels", "sass", *argv]) == 2
    assert message in capsys.readouterr().err


needs_tools = pytest.mark.skipif(sass.unavailable_reason() is not None,
                                 reason=f"the SASS table {sass.unavailable_reason()}")


@needs_tools
@pytest.mark.slow
def test_the_hopper_exp_pass_issues_the_contracts_instructions_per_score_and_little_more(tmp_path, capsys):
    """Each 128-key block gives a thread 64 scores (32 at 64 keys): one exp2 each (plus the two row halves'
    alpha), one conversion each and one e4m3 pack per two. The whole pass stays within the contract's four and
    a half instructions per score (conversion, FFMA, exp2, row-sum FADD, half a pack) plus 32 for the alphas
    and the rest of the row state (24-27 today)."""
    out = tmp_path / "sass.json"
    assert cli.main(["kernels", "sass", "--kernel", "attn_sm90.cu", "--json", str(out)]) == 0
    assert "instructions per exp2" in capsys.readouterr().out
    document = json.loads(out.read_text())
    assert document["schema"] == sass.SCHEMA and document["options"] == []
    kernels = {k["kernel"]: k for k in document["kernels"]}
    assert set(kernels) == set(sass.check.INSTANCES["attn_sm90.cu"])
    for name, k in kernels.items():
        block_keys = int(name[name.index("<") + 1:-1].split(", ")[3])  # <D, STAGES, CONSUMERS, BLOCK_KEYS, ...>
        scores = block_keys // 2  # a thread's share of a 64-row block (128 threads)
        assert scores + 2 >= k["exp2"] >= scores, name
        assert k["counts"]["pack"] == scores // 2, name
        assert k["instructions"] <= 4.5 * scores + 32, name
        conversions = k["counts"]["iadd"] + k["counts"]["i2f"]
        assert scores <= conversions <= scores + 2, name


@needs_tools
@pytest.mark.slow
def test_an_option_reaches_the_compile(tmp_path, capsys):
    """SM90_ABLATE_CVT=1 reinterprets the scores as floats instead of converting them: the head_dim-128 exp pass
    loses its I2FP per score and gains no other conversion; --compare builds both and shows that move."""
    out = tmp_path / "ablate_cvt.json"
    assert cli.main(["kernels", "sass", "--kernel", "attn_sm90.cu", "--option=-DSM90_ABLATE_CVT=1", "--compare",
                     "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    document = json.loads(out.read_text())
    assert document["options"] == ["-DSM90_ABLATE_CVT=1"] and document["command"].endswith("--compare")
    name = "attn_sm90_kernel<128, 4, 2, 128, false>"
    ablated, = [k["counts"] for k in document["kernels"] if k["kernel"] == name]
    default, = [k["counts"] for k in document["baseline_kernels"] if k["kernel"] == name]
    assert default["i2f"] >= 64 and ablated["i2f"] <= 2
    assert ablated["iadd"] <= default["iadd"] and ablated["exp2"] == default["exp2"]
    row, = [line for line in printed.split("against the default build")[1].splitlines() if line.startswith(name)]
    assert "-0.9" in row


def test_a_fingerprint_drops_addresses_and_keeps_every_encoding_word():
    listing = sass.function_listings(LISTING)
    assert list(listing) == ["_Z4kernv", "_Z5otherv"]
    assert listing["_Z4kernv"][0] == "LDC R1, c[0x0][0x28] | 0x00000a00ff017b82 0x000e240000000800"
    assert listing["_Z4kernv"][1] == "@P0 BRA 0x80 | 0x0000000000000947"
    moved = LISTING.replace("/*0000*/", "/*0100*/").replace("  LDC R1", "      LDC R1")
    assert sass.function_listings(moved) == listing  # addresses and spacing are not the code
    control = LISTING.replace("0x000e240000000800", "0x000fe40000000800")  # only the scheduling bits differ
    text = LISTING.replace("c[0x0][0x28]", "c[0x0][0x30]")  # only a constant-bank offset differs
    base = sass.fingerprint(listing["_Z4kernv"])
    for changed in (control, text):
        assert sass.fingerprint(sass.function_listings(changed)["_Z4kernv"]) != base
    assert sass.fingerprint(sass.function_listings(control)["_Z5otherv"]) == sass.fingerprint(listing["_Z5otherv"])


def test_the_fingerprint_comparison_names_every_change():
    before = {"a.cu: k<1>@sm_89": "x", "a.cu: k<2>@sm_89": "y", "a.cu: k<3>@sm_89": "z"}
    table, ok = sass.compare_fingerprints(before, dict(before))
    assert ok and "3 of 3 instance x arch builds identical" in table
    table, ok = sass.compare_fingerprints(before, {"a.cu: k<1>@sm_89": "x", "a.cu: k<2>@sm_89": "w",
                                                   "a.cu: k<4>@sm_89": "v"})
    assert not ok
    rows = dict(line.rsplit("  ", 1) for line in table.splitlines()[2:6])
    assert {k.strip(): v for k, v in rows.items()} == {
        "a.cu: k<1>@sm_89": "identical", "a.cu: k<2>@sm_89": "DIFFERENT",
        "a.cu: k<3>@sm_89": "only in the baseline", "a.cu: k<4>@sm_89": "new (not in the baseline)"}


def test_fingerprint_against_a_file_it_cannot_read_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "bad.json").write_text("{}")
    assert cli.main(["kernels", "fingerprint", "--against", str(tmp_path / "bad.json")]) == 2
    assert "--against: expected a file written by `sagelib kernels fingerprint --json`" in capsys.readouterr().err


@needs_tools
@pytest.mark.slow
def test_fingerprints_are_reproducible_and_a_changed_one_is_named(tmp_path, capsys, monkeypatch):
    """Every instance of the Hopper attention kernel is fingerprinted (its build is the one the session's other
    tests make, through the kernel cache). Two builds of the same source hash alike: the Hopper building blocks
    (hopper_smoke.cu, four small sm_90a kernels, so the second nvcc run costs seconds, not the attention kernel's
    half minute) built again in an empty cache; the file compared against itself is all identical, and a build
    whose code differs (here: another file's fingerprints under the same keys) is not."""
    out = tmp_path / "attn.json"
    assert cli.main(["kernels", "fingerprint", "--kernel", "attn_sm90.cu", "--json", str(out)]) == 0
    found = json.loads(out.read_text())["fingerprints"]
    builds = instances.builds("attn_sm90.cu")  # the default, and the fp32+fp16 inner level
    assert set(found) == {f"attn_sm90.cu: {name}{sass.check.variant_suffix(options)}@sm_90a"
                          for options in builds for name in sass.check.INSTANCES["attn_sm90.cu"]}
    for options in builds:  # within a build every instance is its own code
        mine = [h for key, h in found.items() if key.endswith(f"{sass.check.variant_suffix(options)}@sm_90a")
                and (options or "[" not in key)]
        assert len(set(mine)) == len(mine) == len(sass.check.INSTANCES["attn_sm90.cu"])
    # the fp16 inner level leaves the geometry with two channel passes (three consumers at head_dim 128) as it is
    rotation = "attn_sm90.cu: attn_sm90_kernel<128, 6, 3, 64, false>"
    fp16 = sass.check.variant_suffix(instances.SM90_FP16_INNER_OPTIONS)
    assert found[f"{rotation}{fp16}@sm_90a"] == found[f"{rotation}@sm_90a"]
    assert found[f"attn_sm90.cu: attn_sm90_kernel<128, 4, 2, 128, false>{fp16}@sm_90a"] != \
        found["attn_sm90.cu: attn_sm90_kernel<128, 4, 2, 128, false>@sm_90a"]
    out = tmp_path / "fp.json"
    argv = ["kernels", "fingerprint", "--kernel", "hopper_smoke.cu"]
    assert cli.main([*argv, "--json", str(out)]) == 0
    found = json.loads(out.read_text())["fingerprints"]
    assert set(found) == {f"hopper_smoke.cu: {name}@sm_90a" for name in sass.check.INSTANCES["hopper_smoke.cu"]}
    assert len(set(found.values())) == len(found)  # the swap below changes every entry
    capsys.readouterr()
    monkeypatch.setenv("SAGELIB_KERNEL_CACHE", str(tmp_path / "fresh-cache"))  # the second build runs nvcc again
    assert cli.main([*argv, "--against", str(out)]) == 0
    assert f"{len(found)} of {len(found)} instance x arch builds identical" in capsys.readouterr().out
    assert list((tmp_path / "fresh-cache" / "nvcc").glob("*.cubin"))  # it did build afresh
    swapped = dict(zip(found, reversed(list(found.values()))))
    (tmp_path / "swapped.json").write_text(json.dumps({"fingerprints": swapped}))
    assert cli.main([*argv, "--against", str(tmp_path / "swapped.json")]) == 1
    assert "DIFFERENT" in capsys.readouterr().out
