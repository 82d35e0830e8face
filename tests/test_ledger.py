"""sagelib.records.ledger: the hash-chained experiment log, its tampering checks, locking and crashes.

Every test works on a log in a temporary folder; the committed log is only ever copied.
Expected hashes are computed here with hashlib/json, not with the code under test.
"""

import hashlib
import json
import multiprocessing
import shutil
from pathlib import Path

import pytest
from killed_writer import kill_mid_append

from sagelib.records import ledger, log_schema

REPO = Path(__file__).resolve().parents[1]


def fields(experiment="exp", status="proposed", **extra):
    base = {
        "date": "2026-11-29", "phase": "1", "status": status, "experiment": experiment,
        "technique": None, "hypothesis": "h", "actions": [], "decision": "", "measured": [],
        "projections": [], "fingerprint": None, "declarations": [],
    }
    base.update(extra)
    return base


def make_log(tmp_path, n=5):
    path = tmp_path / "log.jsonl"
    for i in range(n):
        ledger.append(fields(f"exp-{i}"), path)
    return path


def lines_of(path):
    return path.read_bytes().decode().splitlines()


def canonical(record):
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def self_hash(record):
    body = {k: v for k, v in record.items() if k != "sha256"}
    return hashlib.sha256(canonical(body).encode()).hexdigest()


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines))


def rewrite(path, index, rehash, **changes):
    """Change record ``index`` in place, recomputing its own hash when ``rehash``."""
    lines = lines_of(path)
    record = {**json.loads(lines[index]), **changes}
    if rehash:
        record["sha256"] = self_hash(record)
    lines[index] = canonical(record)
    write_lines(path, lines)


def kinds(report):
    return [(p.kind, p.line) for p in report.problems]


# ----------------------------------------------------------------------------- the chain


def test_records_chain_from_genesis_with_independent_hashes(tmp_path):
    path = make_log(tmp_path, 4)
    records = [json.loads(line) for line in lines_of(path)]
    assert [r["seq"] for r in records] == [0, 1, 2, 3]
    assert records[0]["prev_sha256"] == "0" * 64
    for before, after in zip(records, records[1:]):
        assert after["prev_sha256"] == before["sha256"]
    for line, record in zip(lines_of(path), records):
        assert line == canonical(record)  # stored in canonical form
        assert record["sha256"] == self_hash(record)


def test_fresh_log_verifies_and_view_is_written(tmp_path):
    path = make_log(tmp_path, 3)
    report = ledger.verify(path)
    assert report.ok, report.problems
    assert report.records == 3
    assert report.head_sha256 == json.loads(lines_of(path)[-1])["sha256"]
    view = tmp_path / "log.md"
    assert f"records=3 head_sha256={report.head_sha256}" in view.read_text()
    assert report.warnings == []


def test_append_returns_record_and_leaves_callers_dict_alone(tmp_path):
    given = fields("a", actions=["x"])
    snapshot = json.loads(json.dumps(given))
    record = ledger.append(given, tmp_path / "log.jsonl")
    assert given == snapshot
    assert record["seq"] == 0 and record["actions"] == ["x"]


@pytest.mark.parametrize("change, message", [
    ({"status": "done"}, "unknown status 'done'"),
    ({"date": "29/11/2026"}, "expected YYYY-MM-DD"),
    ({"actions": "one"}, "field 'actions'"),
    ({"measured": [{"quantity": "tops", "value": 1.0, "unit": "TOPS", "artifacts": []}]}, "unbacked"),
    ({"projections": [{"quantity": "tops", "value": 1.0, "unit": "TOPS"}]}, "basis"),
    ({"declarations": [{"condition": "capability_changed", "evidence": " "}]}, "non-empty evidence"),
    ({"colour": "red"}, "unknown field"),
    ({"seq": 4}, "filled in by append"),
])
def test_append_rejects_bad_fields_and_writes_nothing(tmp_path, change, message):
    path = make_log(tmp_path, 2)
    before = path.read_bytes()
    with pytest.raises(ValueError, match=message):
        ledger.append({**fields(), **change}, path)
    assert path.read_bytes() == before


def test_append_rejects_missing_field(tmp_path):
    broken = fields()
    del broken["decision"]
    with pytest.raises(ValueError, match="missing field 'decision'"):
        ledger.append(broken, tmp_path / "log.jsonl")


def test_figure_hashes_artifacts_and_refuses_outside_paths(tmp_path):
    artifact = tmp_path / "results.json"
    artifact.write_text('{"tops": 812}')
    item = log_schema.figure("tops", 812.0, "TOPS", artifacts=["results.json"], root=tmp_path)
    assert item["artifacts"] == [{"path": "results.json",
                                  "sha256": hashlib.sha256(b'{"tops": 812}').hexdigest()}]
    with pytest.raises(ValueError, match="outside the repository"):
        log_schema.figure("tops", 812.0, "TOPS", artifacts=[str(REPO / "pyproject.toml")], root=tmp_path)


# ----------------------------------------------------------------------------- tampering


def test_edited_record_is_named(tmp_path):
    path = make_log(tmp_path)
    rewrite(path, 2, rehash=False, decision="rewritten after the fact")
    report = ledger.verify(path)
    assert kinds(report) == [("edited", 3)]
    assert report.problems[0].seq == 2


def test_edit_with_recomputed_hash_breaks_the_next_link(tmp_path):
    path = make_log(tmp_path)
    rewrite(path, 1, rehash=True, hypothesis="changed")
    report = ledger.verify(path)
    assert kinds(report) == [("chain", 3)]
    assert "seq 1 (line 2)" in report.problems[0].message


def test_edited_last_record_is_caught_by_the_view_anchor(tmp_path):
    path = make_log(tmp_path)
    rewrite(path, -1, rehash=True, decision="changed")
    assert kinds(ledger.verify(path)) == [("anchor", 5)]


def test_deleted_record_is_named(tmp_path):
    path = make_log(tmp_path)
    lines = lines_of(path)
    del lines[2]
    write_lines(path, lines)
    report = ledger.verify(path)
    assert [p.kind for p in report.problems] == ["deleted"]
    assert "seq 2" in report.problems[0].message and report.problems[0].line == 3


def test_reordered_records_are_named_without_blaming_the_rest(tmp_path):
    path = make_log(tmp_path)
    lines = lines_of(path)
    lines[1], lines[2] = lines[2], lines[1]
    write_lines(path, lines)
    report = ledger.verify(path)
    assert kinds(report) == [("reordered", 2), ("reordered", 3)]
    assert {p.seq for p in report.problems} == {1, 2}


def test_truncated_log_is_caught_by_the_view_anchor(tmp_path):
    path = make_log(tmp_path)
    write_lines(path, lines_of(path)[:3])
    report = ledger.verify(path)
    assert [p.kind for p in report.problems] == ["truncated"]
    assert "seq 3..4" in report.problems[0].message


def test_without_a_view_verify_fails_and_names_the_fix(tmp_path):
    path = make_log(tmp_path)
    (tmp_path / "log.md").unlink()
    report = ledger.verify(path)
    assert [p.kind for p in report.problems] == ["view_missing"]
    assert "sagelib log render" in report.problems[0].fix


def test_a_view_without_an_anchor_is_a_stated_blind_spot(tmp_path):
    path = make_log(tmp_path)
    (tmp_path / "log.md").write_text("# a view written by hand, no anchor\n")
    report = ledger.verify(path)
    assert report.ok
    assert any("cannot be detected" in w for w in report.warnings)


def test_malformed_and_hand_formatted_lines_are_named(tmp_path):
    path = make_log(tmp_path)
    lines = lines_of(path)
    lines[1] = json.dumps(json.loads(lines[1]), indent=None)  # same content, spaces added
    lines[3] = "{not json"
    write_lines(path, lines)
    found = kinds(ledger.verify(path))
    assert ("not_canonical", 2) in found and ("malformed", 4) in found


def test_unknown_status_in_the_file_is_a_schema_problem(tmp_path):
    path = make_log(tmp_path, 2)
    rewrite(path, 1, rehash=True, status="finished")
    report = ledger.verify(path, view=None)
    assert kinds(report) == [("schema", 2)]
    assert "unknown status 'finished'" in report.problems[0].message


def test_append_and_render_refuse_a_broken_log(tmp_path):

    path = make_log(tmp_path)
    lines = lines_of(path)
    del lines[1]
    write_lines(path, lines)
    before = path.read_bytes()
    with pytest.raises(ledger.LedgerError, match="deleted"):
        ledger.append(fields("late"), path)
    with pytest.raises(ledger.LedgerError, match="does not verify"):
        ledger.render_file(path)
    assert path.read_bytes() == before


# ----------------------------------------------------------------------------- crashes


def test_torn_last_line_is_reported_refused_and_repaired(tmp_path):
    path = make_log(tmp_path, 3)
    intact = path.read_bytes()
    with open(path, "ab") as handle:
        handle.write(b'{"seq":3,"date":"2026-')
    report = ledger.verify(path)
    assert kinds(report) == [("torn", 4)]
    assert report.records == 3
    with pytest.raises(ledger.LedgerError, match="torn"):
        ledger.append(fields("after-crash"), path)
    aside = ledger.repair(path)
    assert aside.read_bytes() == b'{"seq":3,"date":"2026-'
    assert path.read_bytes() == intact
    assert ledger.repair(path) is None
    assert ledger.append(fields("after-repair"), path)["seq"] == 3
    assert ledger.verify(path).ok


def test_killed_writer_leaves_a_verifiable_log(tmp_path):
    path = make_log(tmp_path, 3)
    code = ("import sys; from sagelib.records import ledger; "
            "sys.path.insert(0, sys.argv[2]); from test_ledger import fields; "
            "ledger.append(fields('doomed'), sys.argv[1])")
    kill_mid_append(code, [str(path), str(Path(__file__).parent)], path, cwd=REPO, wait_s=30)
    report = ledger.verify(path)
    assert kinds(report) == [("torn", 4)]
    assert report.records == 3
    assert "sagelib log repair" in report.problems[0].fix
    ledger.repair(path)
    assert ledger.verify(path).ok


def _append_many(path, worker, count):
    for i in range(count):
        ledger.append(fields(f"w{worker}-{i}"), path)


def test_concurrent_appends_lose_nothing(tmp_path):
    path = tmp_path / "log.jsonl"
    ledger.append(fields("genesis"), path)
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_append_many, args=(path, w, 25)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
        assert worker.exitcode == 0
    report = ledger.verify(path)
    assert report.ok, report.problems
    assert report.records == 101
    experiments = [json.loads(line)["experiment"] for line in lines_of(path)]
    assert sorted(experiments[1:]) == sorted(f"w{w}-{i}" for w in range(4) for i in range(25))


# ----------------------------------------------------------------------------- the committed log


def test_committed_log_verifies_and_holds_the_prior_work(tmp_path):
    from sagelib.records import prior_work

    shutil.copy(REPO / "data" / "experiment_log.jsonl", tmp_path / "log.jsonl")
    shutil.copy(REPO / "EXPERIMENT_LOG.md", tmp_path / "log.md")
    report = ledger.verify(tmp_path / "log.jsonl")
    assert report.ok, [p.text() for p in report.problems]
    records = ledger.read(tmp_path / "log.jsonl")
    genesis = records[0]
    assert genesis["prev_sha256"] == "0" * 64 and genesis["date"] == "2026-08-26"
    closed = {r["prior_work_id"] for r in records if r["status"] == "closed" and "prior_work_id" in r}
    assert closed == {entry.id for entry in prior_work.load()}
