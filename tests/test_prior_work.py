"""sagelib.records.prior_work: the closed experiments as data, and the loader's errors.

The expected figures below are copied from the research log (shared/seed/experiment_log.md),
not produced by the loader.
"""

from pathlib import Path

import pytest
import yaml

from sagelib.records import prior_work
from sagelib.records.datafile import DataFileError

EXPECTED_RULES = {
    "p0-register-caps": ("never_unchanged", ("implementation_changed",)),
    "p0-scope-narrowing": ("requires_condition", ("ownership_structure_changed",)),
    "p0-score-aliasing": ("never_unchanged", ("implementation_changed",)),
    "p0-early-k-prefetch": ("requires_condition", ("producer_consumer_pipeline_changed",)),
    "p0-softmax-interleaving": ("never_unchanged", ("implementation_changed",)),
    "p0-padded-v-smem": ("requires_condition", ("staging_dataflow_changed",)),
    "p1-entry-fusion": ("requires_condition", ("inside_owned_attention_pipeline",)),
    "p2-direct-v-preparation": ("requires_condition", ("inside_owned_attention_pipeline",)),
    "p3-temporal-pairing": ("requires_condition", ("ownership_structure_changed",)),
    "hopper-wgmma-sm121a": ("requires_condition", ("isa_toolchain_supports_instruction",)),
    "sm121-umma-int8-qk": ("requires_condition", ("capability_changed",)),
}


@pytest.fixture(scope="module")
def table():
    return prior_work.load()


def test_all_eleven_closed_experiments_with_their_rules(table):
    assert {e.id: (e.rule.kind, e.rule.conditions) for e in table} == EXPECTED_RULES


def numbers(entry):
    return [(f.quantity, f.value, f.low, f.high, f.unit, f.scope) for f in entry.figures]


def test_figures_carry_the_research_log_numbers(table):
    assert numbers(table.by_id("p2-direct-v-preparation")) == [
        ("gain_percent", 39.48, None, None, "%", "isolated"),
        ("time", 4.17, None, None, "ms",
         "isolated; the log does not say whether this is the time saved or the resulting time"),
        ("gain_percent", 0.909, None, None, "%", "complete block"),
    ]
    assert numbers(table.by_id("p1-entry-fusion")) == [
        ("gain_percent", None, 20.9, 23.4, "%", "isolated"),
        ("gain_percent", None, 0.535, 0.863, "%", "complete block"),
    ]
    single = {"p0-scope-narrowing": 0.06, "p0-score-aliasing": 0.01,
              "p0-early-k-prefetch": -0.30, "p3-temporal-pairing": 0.10}
    for entry_id, gain in single.items():
        (figure,) = table.by_id(entry_id).figures
        assert (figure.quantity, figure.value, figure.approximate) == ("gain_percent", gain, True)
    assert table.by_id("p0-register-caps").figures[0].value == 168
    for entry in table:
        assert all(f.measured_on == "unknown" for f in entry.figures)  # the log never names the GPU
    for entry_id in ("p0-softmax-interleaving", "p0-padded-v-smem", "hopper-wgmma-sm121a",
                     "sm121-umma-int8-qk"):
        assert table.by_id(entry_id).figures == ()  # no number in the log, none invented
        assert table.by_id(entry_id).qualitative


def test_evidence_states_what_is_missing(table):
    assert table.by_id("p0-register-caps").evidence.missing == ("exact candidate kernel source",)
    assert table.by_id("p3-temporal-pairing").source_complete is True
    assert table.by_id("p1-entry-fusion").source_complete is False
    assert table.by_id("hopper-wgmma-sm121a").source_complete is None


@pytest.mark.parametrize("name, expected", [
    ("Register Caps", "p0-register-caps"),
    ("register-caps", "p0-register-caps"),
    ("early K prefetch", "p0-early-k-prefetch"),
    ("wgmma sm_121a", "hopper-wgmma-sm121a"),
    ("TCGEN05 INT8 SM121", "sm121-umma-int8-qk"),
    ("wgmma_sm90a", None),
    ("fused quantizers at the memory roofline", None),
])
def test_technique_matching(table, name, expected):
    assert [e.id for e in table.matching(name)] == ([expected] if expected else [])


def test_table_rows_for_the_notebook(table):
    rows = table.table_rows()
    assert len(rows) == 11
    assert set(rows[0]) == {"id", "technique", "phase", "result", "evidence retained",
                            "evidence missing", "rule", "reopen when"}
    row = next(r for r in rows if r["id"] == "p2-direct-v-preparation")
    assert "39.48" in row["result"] and "0.909" in row["result"]
    assert row["reopen when"] == prior_work.CONDITIONS["inside_owned_attention_pipeline"]


def test_by_id_names_the_known_ids(table):
    with pytest.raises(KeyError, match="p0-register-caps"):
        table.by_id("nope")


# ----------------------------------------------------------------------------- loader errors


def variant(tmp_path, edit) -> Path:
    data = yaml.safe_load(prior_work.DEFAULT_PATH.read_text())
    edit(data)
    path = tmp_path / "prior_work.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


def line_of(path, needle):
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def test_malformed_yaml_names_the_line(tmp_path):
    path = tmp_path / "prior_work.yaml"
    path.write_text("schema: 1\nentries:\n  - id: a\n    technique: [unclosed\n")
    with pytest.raises(DataFileError) as caught:
        prior_work.load(path)
    assert caught.value.line is not None and str(path) in str(caught.value)
    assert "Fix:" in str(caught.value)


def test_unknown_rule_kind_names_file_line_entry_and_fix(tmp_path):
    path = variant(tmp_path, lambda d: d["entries"][3]["rule"].update(kind="sometimes"))
    with pytest.raises(DataFileError) as caught:
        prior_work.load(path)
    message = str(caught.value)
    assert "entry 4 (p0-early-k-prefetch)" in message and "'sometimes'" in message
    assert "never_unchanged, requires_condition" in message
    assert caught.value.line == line_of(path, "kind: sometimes")


def test_unknown_condition_is_refused(tmp_path):
    path = variant(tmp_path, lambda d: d["entries"][0]["rule"].update(conditions=["vibes_changed"]))
    with pytest.raises(DataFileError, match="unknown condition 'vibes_changed'"):
        prior_work.load(path)


def test_missing_field_is_named(tmp_path):
    path = variant(tmp_path, lambda d: d["entries"][5].pop("evidence"))
    with pytest.raises(DataFileError, match="entry 6 \\(p0-padded-v-smem\\): missing field 'evidence'"):
        prior_work.load(path)


def test_wrong_type_names_the_field(tmp_path):
    path = variant(tmp_path, lambda d: d["entries"][1]["result"]["figures"][0].update(value=True))
    with pytest.raises(DataFileError) as caught:
        prior_work.load(path)
    assert "field 'result.figures.0.value': expected int or float, got bool True" in str(caught.value)
    assert caught.value.line == line_of(path, "value: true")


def test_duplicate_ids_and_shared_aliases_are_refused(tmp_path):
    path = variant(tmp_path, lambda d: d["entries"][1].update(id="p0-register-caps"))
    with pytest.raises(DataFileError, match="duplicate id"):
        prior_work.load(path)
    path = variant(tmp_path, lambda d: d["entries"][1]["technique"]["aliases"].append("register cap"))
    with pytest.raises(DataFileError, match="also names p0-register-caps"):
        prior_work.load(path)


def test_never_unchanged_must_list_implementation_changed(tmp_path):
    path = variant(tmp_path, lambda d: d["entries"][0]["rule"].update(conditions=["capability_changed"]))
    with pytest.raises(DataFileError, match="without implementation_changed"):
        prior_work.load(path)
