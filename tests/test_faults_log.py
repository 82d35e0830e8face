"""Faults against the experiment log: each tamper kind, CRLF, a missing view, a killed writer, concurrent appends,
repeated repairs. Each gets a clear message and a non-zero `sagelib log verify`, or cannot happen.

The logs live in temporary git repositories (the committed log is never touched); expected hashes are computed
here with hashlib, and the tampering is done the way a careful forger would: every later hash recomputed and the
view re-rendered, so that only the committed version can tell.
"""

import hashlib
import json
import multiprocessing
import subprocess

import pytest
from killed_writer import kill_mid_append

from sagelib.records import ledger, log_view

GIT = ["git", "-c", "user.name=test", "-c", "user.email=test@example.com", "-c", "commit.gpgsign=false"]


def fields(experiment):
    return {"date": "2026-12-01", "phase": "1", "status": "proposed", "experiment": experiment, "technique": None,
            "hypothesis": "h", "actions": [], "decision": "", "measured": [], "projections": [],
            "fingerprint": None, "declarations": []}


def canonical(record):
    return json.dumps(record, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def self_hash(record):
    return hashlib.sha256(canonical({k: v for k, v in record.items() if k != "sha256"}).encode()).hexdigest()


def lines_of(path):
    return path.read_text().splitlines()


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines))


def rechain(records):
    """Recompute every seq, prev_sha256 and sha256, as a forger who knows the scheme would."""
    prev = "0" * 64
    for seq, record in enumerate(records):
        record.update(seq=seq, prev_sha256=prev)
        record["sha256"] = prev = self_hash(record)
    return [canonical(r) for r in records]


def rerender(log):
    """Write a fresh view with a matching anchor, bypassing render's refusal, as a forger would."""
    log_view.write_view(log.read_bytes(), log, log.with_suffix(".md"))


@pytest.fixture
def repo(tmp_path):
    """A git checkout holding a 5-record log and its view, committed; returns (log, commit)."""
    if subprocess.run(["git", "--version"], capture_output=True).returncode != 0:
        pytest.skip("needs git")
    subprocess.run([*GIT, "init", "-q", str(tmp_path)], check=True)
    log = tmp_path / "log.jsonl"
    for i in range(5):
        ledger.append(fields(f"exp-{i}"), log)
    subprocess.run([*GIT, "-C", str(tmp_path), "add", "."], check=True)
    subprocess.run([*GIT, "-C", str(tmp_path), "commit", "-qm", "five records"], check=True)
    commit = subprocess.run(["git", "-C", str(tmp_path), "rev-parse", "HEAD"], capture_output=True,
                            text=True, check=True).stdout.strip()
    return log, commit


def verify_cli(sagelib_cli, log, *extra):
    code, out, err = sagelib_cli("log", "verify", "--log", str(log), *extra)
    return code, out + err


def test_an_untouched_log_names_the_commit_it_was_checked_against(repo, sagelib_cli):
    log, commit = repo
    code, text = verify_cli(sagelib_cli, log)
    assert code == 0 and f"committed in {commit[:12]}" in text and "unchanged" in text


def test_a_record_rewritten_with_every_later_hash_recomputed_and_the_view_rerendered(repo, sagelib_cli):
    log, commit = repo
    records = [json.loads(line) for line in lines_of(log)]
    records[2]["decision"] = "a different decision"
    write_lines(log, rechain(records))
    rerender(log)  # the chain and the anchor agree again
    assert ledger.verify(log, committed=False).ok  # consistent with itself ...
    report = ledger.verify(log)  # ... not with its commit
    assert [(p.kind, p.line, p.seq) for p in report.problems] == [("uncommitted_change", 3, 2)]
    assert commit[:12] in report.problems[0].message and "git show" in report.problems[0].fix
    code, text = verify_cli(sagelib_cli, log)
    assert code == 1 and "uncommitted_change" in text


def test_the_last_record_deleted_and_the_view_rerendered(repo, sagelib_cli):
    log, commit = repo
    write_lines(log, lines_of(log)[:-1])
    rerender(log)
    report = ledger.verify(log)
    assert [(p.kind, p.seq) for p in report.problems] == [("uncommitted_removal", 4)]
    assert "seq 4..4" in report.problems[0].message and commit[:12] in report.problems[0].message
    assert verify_cli(sagelib_cli, log)[0] == 1


def test_a_middle_record_deleted_and_rechained_is_named_at_its_line(repo):
    log, _ = repo
    records = [json.loads(line) for line in lines_of(log)]
    del records[1]
    write_lines(log, rechain(records))
    rerender(log)
    (problem,) = ledger.verify(log).problems
    assert problem.kind == "uncommitted_change" and problem.line == 2 and "later committed line(s) differ" in problem.message


@pytest.mark.parametrize("re_render", [False, True])
def test_a_forged_append_with_valid_hashes_is_named_as_not_yet_committed(repo, re_render):
    """What cannot be caught: a well-formed append after the last commit. It is named for review instead."""
    log, commit = repo
    records = [json.loads(line) for line in lines_of(log)]
    forged = {**fields("forged"), "seq": 5, "prev_sha256": records[-1]["sha256"], "recorded_utc": "2026-12-01T00:00:00+00:00"}
    forged["sha256"] = self_hash(forged)
    with open(log, "a") as f:
        f.write(canonical(forged) + "\n")
    if re_render:
        rerender(log)
    report = ledger.verify(log)
    assert all(p.kind not in ("uncommitted_change", "uncommitted_removal") for p in report.problems)
    (note,) = report.notes
    assert "1 record(s) after it (seq 5..5) are not committed yet" in note and "git diff" in note
    assert commit[:12] in note and report.uncommitted == 1
    # once the forgery is committed it is history: the check then vouches only for what review let in


def test_strict_verify_refuses_any_record_after_the_last_commit(repo, sagelib_cli):
    log, _ = repo
    assert verify_cli(sagelib_cli, log, "--strict")[0] == 0  # everything committed
    records = [json.loads(line) for line in lines_of(log)]
    forged = {**fields("forged"), "seq": 5, "prev_sha256": records[-1]["sha256"], "recorded_utc": "2026-12-01T00:00:00+00:00"}
    forged["sha256"] = self_hash(forged)
    with open(log, "a") as f:
        f.write(canonical(forged) + "\n")
    rerender(log)
    assert verify_cli(sagelib_cli, log)[0] == 0  # a plain verify names it and passes (work in progress)
    code, text = verify_cli(sagelib_cli, log, "--strict")
    assert code == 1 and "1 record(s) are not committed" in text


@pytest.mark.parametrize("tamper, kind", [
    (lambda lines: lines[:2] + [lines[2].replace('"exp-2"', '"exp-X"')] + lines[3:], "edited"),
    (lambda lines: lines[:1] + lines[2:], "deleted"),
    (lambda lines: [lines[0], lines[2], lines[1], *lines[3:]], "reordered"),
    (lambda lines: lines + [lines[-1]], "duplicated"),
    (lambda lines: lines[:2] + ["{not json"] + lines[3:], "malformed"),
    (lambda lines: lines[:3], "truncated"),
])
def test_tampering_by_hand_is_caught_by_the_chain_and_by_the_commit(repo, tamper, kind):
    log, _ = repo
    write_lines(log, tamper(lines_of(log)))
    report = ledger.verify(log)
    assert kind in [p.kind for p in report.problems]
    assert not report.ok


def test_crlf_line_endings_are_one_problem_named_as_such(repo, sagelib_cli):
    log, _ = repo
    log.write_bytes(log.read_bytes().replace(b"\n", b"\r\n"))
    report = ledger.verify(log)
    assert [p.kind for p in report.problems] == ["crlf"]
    assert "5 of 5 line(s) end in CRLF" in report.problems[0].message and "LF" in report.problems[0].fix
    code, text = verify_cli(sagelib_cli, log)
    assert code == 1 and text.count("CRLF") == 1


def test_a_missing_view_is_an_error_with_the_fix(repo, sagelib_cli):
    log, _ = repo
    log.with_suffix(".md").unlink()
    report = ledger.verify(log)
    assert [p.kind for p in report.problems] == ["view_missing"]
    assert "sagelib log render" in report.problems[0].fix
    assert verify_cli(sagelib_cli, log)[0] == 1
    ledger.render_file(log)  # the fix works on a log that verifies otherwise
    assert ledger.verify(log).ok


def test_outside_a_git_checkout_the_check_says_plainly_it_was_not_made(tmp_path, sagelib_cli, monkeypatch):
    log = tmp_path / "log.jsonl"
    ledger.append(fields("a"), log)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))  # no repository above tmp_path
    report = ledger.verify(log)
    assert report.ok
    (note,) = report.notes
    assert note.startswith("committed version: not checked") and "not inside a git checkout" in note


def test_repairs_in_one_second_keep_every_torn_line(tmp_path):
    log = tmp_path / "log.jsonl"
    ledger.append(fields("a"), log)
    asides = []
    for torn in (b'{"first torn', b'{"second torn', b'{"third torn'):
        with open(log, "ab") as f:
            f.write(torn)
        asides.append((ledger.repair(log), torn))
    assert len({path for path, _ in asides}) == 3
    for path, torn in asides:
        assert path.read_bytes() == torn
    assert ledger.verify(log).ok


def test_a_killed_writer_leaves_a_log_that_says_so_and_repairs(tmp_path):
    log = tmp_path / "log.jsonl"
    ledger.append(fields("a"), log)
    code = ("import sys, json; from sagelib.records import ledger; "
            "ledger.append(json.loads(sys.argv[2]), sys.argv[1])")
    kill_mid_append(code, [str(log), json.dumps(fields("doomed"))], log, cwd=ledger.REPO_ROOT, wait_s=60)
    report = ledger.verify(log)
    assert [p.kind for p in report.problems] == ["torn"]
    with pytest.raises(ledger.LedgerError, match="refusing to append"):
        ledger.append(fields("b"), log)
    assert ledger.repair(log) is not None and ledger.verify(log).ok
    assert ledger.append(fields("b"), log)["seq"] == 1


def _append_many(log, worker):
    for i in range(8):
        ledger.append(fields(f"w{worker}-{i}"), log)


def test_concurrent_appends_lose_nothing(tmp_path):
    log = tmp_path / "log.jsonl"
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_append_many, args=(log, w)) for w in range(4)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
        assert worker.exitcode == 0
    report = ledger.verify(log)
    assert report.ok and report.records == 32
    assert sorted(json.loads(line)["experiment"] for line in lines_of(log)) == sorted(
        f"w{w}-{i}" for w in range(4) for i in range(8))
