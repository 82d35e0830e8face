"""sagelib.records.reopening: proposals checked against closed work, fingerprints, declarations."""

import hashlib
import json

import pytest

from sagelib.records import ledger, reopening
from sagelib.records.reopening import Declaration


@pytest.fixture
def repo(tmp_path):
    """A scratch repository root with two kernel sources and an empty log beside it."""
    root = tmp_path / "repo"
    (root / "kernels").mkdir(parents=True)
    (root / "kernels" / "attn.cu").write_text("// attention v1\n")
    (root / "kernels" / "quant.cu").write_text("// quantizer v1\n")
    return root


def propose(repo, technique, declarations=(), config=None, experiment="e1", sources=None):
    return reopening.propose(
        technique, sources or ["kernels/attn.cu"], config or {"blkq": 64}, list(declarations),
        experiment=experiment, hypothesis="could be faster", phase="2", date="2026-11-29",
        path=repo / "log.jsonl", root=repo)


def log_lines(repo):
    path = repo / "log.jsonl"
    return path.read_text().splitlines() if path.exists() else []


def test_matching_closed_technique_is_refused_with_result_and_rule(repo):
    decision = propose(repo, "Early K prefetch")
    assert not decision.permitted
    assert [c.id for c in decision.matched] == ["p0-early-k-prefetch"]
    text = decision.report()
    assert text.startswith("REFUSED")
    assert "-0.3 %" in text and "producer_consumer_pipeline_changed" in text
    assert "--declare producer_consumer_pipeline_changed" in text
    assert log_lines(repo) == []  # nothing recorded for a refusal


def test_declared_condition_permits_and_is_recorded(repo):
    evidence = "loads move to a TMA producer warp with mbarrier hand-off"
    decision = propose(repo, "early k prefetch",
                       [Declaration("producer_consumer_pipeline_changed", evidence)])
    assert decision.permitted, decision.report()
    (line,) = log_lines(repo)
    record = json.loads(line)
    assert record["status"] == "proposed" and record["technique"] == "early_k_prefetch"
    assert record["declarations"] == [{"condition": "producer_consumer_pipeline_changed",
                                       "evidence": evidence, "reopens": ["p0-early-k-prefetch"]}]
    assert record["fingerprint"]["sources"][0]["path"] == "kernels/attn.cu"
    assert ledger.verify(repo / "log.jsonl").ok


def test_declaring_a_different_condition_does_not_reopen(repo):
    decision = propose(repo, "temporal pairing", [Declaration("capability_changed", "sm_121 gained it")])
    assert not decision.permitted
    assert "--declare ownership_structure_changed" in decision.report()


def test_never_unchanged_prior_work_needs_a_stated_change(repo):
    assert not propose(repo, "score aliasing").permitted
    decision = propose(repo, "score aliasing",
                       [Declaration("implementation_changed", "scores alias the P fragment now")])
    assert decision.permitted


def test_bad_declarations_are_input_errors(repo):
    with pytest.raises(ValueError, match="unknown condition"):
        propose(repo, "score aliasing", [Declaration("stars_aligned", "x")])
    with pytest.raises(ValueError, match="evidence is empty"):
        propose(repo, "score aliasing", [Declaration("implementation_changed", "  ")])


def test_unrelated_technique_opens_without_declarations(repo):
    decision = propose(repo, "fused quantizer at roofline")
    assert decision.permitted and decision.matched == []
    assert json.loads(log_lines(repo)[0])["technique"] == "fused_quantizer_at_roofline"


def test_identical_fingerprint_of_a_closed_experiment_is_refused_outright(repo):
    assert propose(repo, "fused quantizer", experiment="fq-1").permitted
    ledger.append({"date": "2026-11-29", "phase": "2", "status": "closed", "experiment": "fq-1",
                   "technique": None, "hypothesis": "h", "actions": [], "decision": "no gain",
                   "measured": [], "projections": [], "fingerprint": None, "declarations": []},
                  repo / "log.jsonl")
    declared = [Declaration("implementation_changed", "claims a change it does not have")]
    decision = propose(repo, "Fused Quantizer", declared, experiment="fq-2")
    assert not decision.permitted
    assert "fingerprint equals closed experiment fq-1" in decision.report()

    changed = propose(repo, "fused quantizer", declared, config={"blkq": 128}, experiment="fq-3")
    assert changed.permitted, changed.report()
    without = propose(repo, "fused quantizer", config={"blkq": 256}, experiment="fq-4")
    assert not without.permitted  # a closed log experiment defaults to never_unchanged


def test_experiment_ids_are_not_reused(repo):
    assert propose(repo, "fused quantizer", experiment="same").permitted
    with pytest.raises(ValueError, match="already in the log"):
        propose(repo, "other idea", experiment="same")
    with pytest.raises(ValueError, match="already in the log or the prior work"):
        propose(repo, "other idea", experiment="p0-register-caps")


def test_fingerprint_hashes_contents_not_order_or_names(repo):
    first = reopening.fingerprint("X", ["kernels/attn.cu", "kernels/quant.cu"], {"a": 1}, repo)
    swapped = reopening.fingerprint("x", ["kernels/quant.cu", "kernels/attn.cu"], {"a": 1}, repo)
    (repo / "kernels" / "renamed.cu").write_text("// attention v1\n")
    renamed = reopening.fingerprint("x", ["kernels/renamed.cu", "kernels/quant.cu"], {"a": 1}, repo)
    keys = ("technique", "source_sha256", "config_sha256")
    assert [first[k] for k in keys] == [swapped[k] for k in keys] == [renamed[k] for k in keys]
    digests = sorted(hashlib.sha256(t).hexdigest() for t in (b"// attention v1\n", b"// quantizer v1\n"))
    expected = hashlib.sha256(json.dumps(digests, separators=(",", ":")).encode()).hexdigest()
    assert first["source_sha256"] == expected
    assert first["config_sha256"] == hashlib.sha256(b'{"a":1}').hexdigest()
    (repo / "kernels" / "attn.cu").write_text("// attention v2\n")
    edited = reopening.fingerprint("x", ["kernels/attn.cu", "kernels/quant.cu"], {"a": 1}, repo)
    assert edited["source_sha256"] != first["source_sha256"]


def test_fingerprint_input_errors(repo, tmp_path):
    with pytest.raises(ValueError, match="at least one kernel source"):
        reopening.fingerprint("x", [], {}, repo)
    with pytest.raises(ValueError, match="outside the repository"):
        reopening.fingerprint("x", [str(tmp_path / "elsewhere.cu")], {}, repo)
    with pytest.raises(ValueError, match="no such file"):
        reopening.fingerprint("x", ["kernels/missing.cu"], {}, repo)


def test_parse_config():
    assert reopening.parse_config(["blkq=64", "causal=true", "name=sm90", "scale=0.5"]) == {
        "blkq": 64, "causal": True, "name": "sm90", "scale": 0.5}
    with pytest.raises(ValueError, match="expected KEY=VALUE"):
        reopening.parse_config(["blkq"])
    with pytest.raises(ValueError, match="given twice"):
        reopening.parse_config(["a=1", "a=2"])


def test_import_prior_work_is_idempotent(repo):
    path = repo / "log.jsonl"
    first = reopening.import_prior_work("2026-08-26", path)
    assert len(first) == 11 and {r["status"] for r in first} == {"closed"}
    assert all(f["artifacts"] == [] and f["unbacked"] for r in first for f in r["measured"])
    assert reopening.import_prior_work("2026-08-26", path) == []
    assert ledger.verify(path).ok
