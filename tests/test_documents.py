"""sagelib.records.documents: one registry of result schemas, and the one loader of data/results/."""

import json
import re

import pytest

from sagelib import paths
from sagelib.cuda import sass
from sagelib.errors import SchemaError
from sagelib.records import documents


def test_every_recorded_document_names_a_registered_schema():
    unknown = {}
    for path in sorted(paths.RESULTS_DIR.glob("*.json")):
        document = json.loads(path.read_text())
        if isinstance(document, dict) and "schema" in document and document["schema"] not in documents.REGISTRY:
            unknown[path.name] = document["schema"]
    assert not unknown, f"add these schemas to sagelib.records.documents.REGISTRY: {unknown}"


def test_every_schema_a_module_writes_is_registered_once():
    written = {}
    for path in sorted((paths.REPO_ROOT / "sagelib").rglob("*.py")):
        for name in re.findall(r'"(sagelib\.[a-z0-9_-]+/\d+)"', path.read_text()):
            written.setdefault(name, []).append(str(path.relative_to(paths.REPO_ROOT)))
    assert set(written) <= set(documents.REGISTRY), set(written) - set(documents.REGISTRY)
    literal = {name: sorted(set(files)) for name, files in written.items()
               if set(files) != {"sagelib/records/documents.py"}}
    # the loader (sagelib.cuda) sits below records and keeps its literal; a test holds it to the registry
    in_the_loader = ["sagelib/cuda/sass.py", "sagelib/records/documents.py"]
    assert literal == {sass.SCHEMA: in_the_loader, sass.FINGERPRINT_SCHEMA: in_the_loader}, literal
    assert (sass.SCHEMA, sass.FINGERPRINT_SCHEMA) == (documents.SASS_EXP_PASS.id, documents.SASS_FINGERPRINT.id)


def test_load_all_and_schema_of(tmp_path):
    documents.write_json({"schema": documents.BENCH.id, "created_utc": "2026-12-01T00:00:02Z"}, tmp_path / "a-x.json")
    documents.write_json({"schema": documents.BENCH.id, "created_utc": "2026-12-01T00:00:01Z"}, tmp_path / "b-x.json")
    documents.write_json({"schema": documents.NCU.id}, tmp_path / "c-y.json")
    (tmp_path / "d-x.json").write_text("{not json")
    found = documents.load_all(tmp_path, documents.BENCH.id)
    assert [p.name for _, p in found] == ["b-x.json", "a-x.json"]
    assert documents.latest(tmp_path, documents.NCU.id)[1].name == "c-y.json"
    assert documents.latest(tmp_path, documents.NCU.id, stem="x") == (None, None)
    assert documents.schema_of({"schema": "sagelib.run/1"}) == "sagelib.run/1"
    with pytest.raises(SchemaError, match="is this a sagelib result file"):
        documents.schema_of({"schema": "other/1"})
    with pytest.raises(SchemaError, match="add it there first"):
        documents.load_all(tmp_path, "sagelib.typo/1")


def test_finite_only_counts_what_it_replaced():
    assert documents.finite_only({"a": [1.0, float("nan")], "b": float("inf")}) == ({"a": [1.0, None], "b": None}, 2)


def test_latest_skips_runs_with_the_hopper_paths_off_unless_asked(tmp_path):
    """A `gpu-run --no-hopper` recording lacks the Hopper rows: the notebooks' recorded views keep the newest run
    with them on; asked for, the newest with them off."""
    import json

    from sagelib.records import documents

    def write(name, when, **fields):
        (tmp_path / name).write_text(json.dumps({"schema": documents.BENCH.id, "created_utc": when, **fields}))

    write("a-performance.json", "2026-12-01T00:00:00Z", command="sagelib gpu-run --record a")
    write("b-performance.json", "2026-12-02T00:00:00Z", command="sagelib gpu-run --no-hopper --record b")
    write("c-performance.json", "2026-12-03T00:00:00Z", hopper_paths="off (SAGELIB_HOPPER=off)")
    assert documents.latest(tmp_path, stem="performance")[1].name == "a-performance.json"
    assert documents.latest(tmp_path, stem="performance", hopper_off=True)[1].name == "c-performance.json"
    assert documents.latest(tmp_path, stem="performance", hopper_off=None)[1].name == "c-performance.json"
