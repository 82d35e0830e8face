"""sagelib.studies.sweep_records: variant speed against the baseline of the same recorded sweep."""

import json
import math

import pytest

from sagelib.studies import sweep_records


def _row(variant, shape, ms, stages=4, diff=0.0, **extra):
    return {"shape": shape, "variant": variant, "stages": stages, "ms": ms, "tops": 1.0 / ms,
            "rel_l1_to_default": diff, **extra}


def test_ratios_use_the_deepest_default_ring_and_skip_ablations():
    rows = [_row("default", "S", 10.0, stages=2), _row("default", "S", 8.0, stages=4),
            _row("fast", "S", 4.0), _row("ablate: no exp2", "S", 1.0, diff=0.5)]
    found = {r.variant: r for r in sweep_records.ratios({"rows": rows}, "exp")}
    assert set(found) == {"default, 2 stages", "fast"}
    assert found["fast"].speedup == 2.0 and found["fast"].same_output
    assert found["default, 2 stages"].speedup == 0.8


def test_repeats_are_averaged_within_their_own_call():
    rows = [_row("default", "S", 10.0, repeat=1), _row("v", "S", 5.0, repeat=1),
            _row("default", "S", 20.0, repeat=2), _row("v", "S", 20.0, repeat=2)]
    (ratio,) = sweep_records.ratios({"rows": rows}, "exp")
    assert (ratio.low, ratio.high, ratio.repeats) == (1.0, 2.0, 2)
    assert ratio.speedup == 1.5


def test_a_variant_whose_output_differs_is_flagged():
    rows = [_row("default", "S", 10.0), _row("nan", "S", 5.0, diff=None, invalid="NaN outputs"),
            _row("off", "S", 5.0, diff=1e-2), _row("nan2", "S", 5.0, diff=math.nan)]
    flags = {r.variant: r.same_output for r in sweep_records.ratios({"rows": rows}, "exp")}
    assert flags == {"nan": False, "off": False, "nan2": False}


def test_former_default_is_the_baseline_when_no_default_is_named():
    rows = [_row("old (former default)", "S", 10.0), _row("new", "S", 8.0)]
    (ratio,) = sweep_records.ratios({"rows": rows}, "exp")
    assert ratio.variant == "new" and ratio.speedup == 1.25
    with pytest.raises(ValueError, match="expected a 'default' or a '\\(former default\\)' variant"):
        sweep_records.ratios({"rows": [_row("a", "S", 1.0), _row("b", "S", 2.0)]}, "exp")


def test_load_ratios_names_each_experiment_by_its_file(tmp_path):
    document = {"schema": sweep_records.SCHEMA, "rows": [_row("default", "S", 2.0), _row("v", "S", 1.0)]}
    (tmp_path / "2026-11-29-nvidia-h200-sm90-sweep-demo.json").write_text(json.dumps(document))
    (tmp_path / "other.json").write_text(json.dumps({"schema": "sagelib.bench/1"}))
    (ratio,) = sweep_records.load_ratios(tmp_path)
    assert (ratio.experiment, ratio.variant, ratio.speedup) == ("sm90-sweep-demo", "v", 2.0)


def test_a_shape_listed_twice_in_one_call_is_a_second_pass():
    rows = [_row("default", "S", 10.0), _row("v", "S", 5.0), _row("default", "S", 20.0), _row("v", "S", 10.0)]
    (ratio,) = sweep_records.ratios({"rows": rows}, "exp")
    assert (ratio.variant, ratio.speedup, ratio.repeats) == ("v", 2.0, 2)


def test_best_per_experiment_keeps_each_files_best_same_output_variant():
    found = [sweep_records.VariantRatio("a", "slow", "S", 0.9, 0.9, 0.9, 1, True),
             sweep_records.VariantRatio("a", "slow", "T", 0.9, 0.9, 0.9, 1, True),
             sweep_records.VariantRatio("a", "fast", "S", 1.2, 1.2, 1.2, 1, True),
             sweep_records.VariantRatio("a", "fast", "T", 1.0, 1.0, 1.0, 1, True),
             sweep_records.VariantRatio("a", "wrong", "S", 9.0, 9.0, 9.0, 1, False),
             sweep_records.VariantRatio("b", "only", "U", 1.5, 1.5, 1.5, 1, True),
             sweep_records.VariantRatio("b", "only", "S", 0.7, 0.7, 0.7, 1, True)]
    best = sweep_records.best_per_experiment(found, ["S", "T"])
    assert [(b.experiment, b.variant, b.variants, b.speedup) for b in best] == [
        ("a", "fast", 2, {"S": 1.2, "T": 1.0}), ("b", "only", 1, {"S": 0.7})]


def test_label_names_the_experiment_from_its_file_and_the_first_sweep_by_default():
    assert sweep_records.label("sm90-sweep-defer-pv", "pv late") == "defer-pv: pv late"
    assert sweep_records.label("sm90-sweep", "default") == "first sweep: default"


def test_three_consumer_rows_divide_by_the_two_consumer_build_of_the_same_shape():
    rows = [_row("former default (two consumers)", "A", 10.0, bit_identical_to_default=True),
            _row("former default (two consumers)", "B", 20.0, bit_identical_to_default=True),
            _row("three consumers, 6 stages", "A", 8.0, stages=6, bit_identical_to_default=True),
            _row("three consumers, 6 stages", "B", 25.0, stages=6, bit_identical_to_default=False),
            _row("three consumers, 4 stages", "A", 1.0, bit_identical_to_default=True)]
    found = {r["shape"]: r for r in sweep_records.three_consumer_rows({"rows": rows})}
    assert set(found) == {"A", "B"}  # only the named variant
    assert found["A"]["three / two"] == pytest.approx(10.0 / 8.0) and found["A"]["ring stages"] == 6
    assert found["B"]["three / two"] == pytest.approx(20.0 / 25.0) and not found["B"]["same bits"]


def test_tile_change_rows_take_the_last_call_only():
    rows = [_row("former default", "S", 10.0, repeat=1, bit_identical_to_default=True),
            _row("d7ce787 early tile", "S", 1.0, repeat=1, bit_identical_to_default=True),
            _row("former default", "S", 10.0, repeat=2, bit_identical_to_default=True),
            _row("d7ce787 early tile", "S", 8.0, repeat=2, bit_identical_to_default=True),
            _row("other", "S", 2.0, repeat=2, bit_identical_to_default=True)]
    (row,), before, after = sweep_records.tile_change_rows({"rows": rows})
    assert (before, after) == ("former default", "d7ce787 early tile")
    assert row["after / before"] == pytest.approx(10.0 / 8.0)  # repeat 1's 10x is not the final build's


def test_role_split_rows_name_the_default_as_the_kernel():
    rows = [{"shape": "S", "variant": "default", "tops": 800.0, "vs_preset": 1.0, "bit_identical": True},
            {"shape": "S", "variant": "split", "tops": 500.0, "vs_preset": 0.625, "bit_identical": True}]
    found = sweep_records.role_split_rows({"rows": rows})
    assert [r["variant"] for r in found] == ["two consumers (the kernel)", "split"]
    assert found[1]["against the kernel"] == 0.625


def test_the_recorded_ab_files_read_as_rows():
    from sagelib.records import documents

    d64, _ = documents.latest(schema=sweep_records.SCHEMA, stem="sm90-sweep-d64-three-consumers")
    tile, _ = documents.latest(schema=sweep_records.SCHEMA, stem="sm90-sweep-tile-change")
    assert d64 is not None and tile is not None
    d64_rows = sweep_records.three_consumer_rows(d64)
    assert d64_rows and all(r["three / two"] > 0 for r in d64_rows)
    tile_rows, before, after = sweep_records.tile_change_rows(tile)
    assert tile_rows and "former default" in before and after.startswith("d7ce787")


def test_variant_table_has_every_same_output_variant_once_with_its_speedup_per_shape():
    found = [sweep_records.VariantRatio("sm90-sweep-a", "fast", "S", 1.2, 1.2, 1.2, 1, True),
             sweep_records.VariantRatio("sm90-sweep-a", "fast", "T", 0.95, 0.95, 0.95, 1, True),
             sweep_records.VariantRatio("sm90-sweep-a", "wrong", "S", 9.0, 9.0, 9.0, 1, False),
             sweep_records.VariantRatio("sm90-sweep-b", "only", "U", 1.5, 1.5, 1.5, 1, True),
             sweep_records.VariantRatio("sm90-sweep-b", "only", "S", 0.7, 0.7, 0.7, 1, True)]
    assert sweep_records.variant_table(found, ["S", "T"]) == [
        {"sweep": "a", "variant": "fast", "S": "1.200x", "T": "0.950x"},
        {"sweep": "b", "variant": "only", "S": "0.700x", "T": ""}]
