"""scripts/microbench_softmax.py --beside: the softmax step beside another warpgroup's work (sm_90)."""

import importlib.util
from pathlib import Path

import pytest

from sagelib.cuda import ops_sm90

_PATH = Path(__file__).resolve().parents[1] / "scripts" / "microbench_softmax.py"


def _script():
    spec = importlib.util.spec_from_file_location("microbench_softmax", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.gpu
def test_beside_rows_count_the_other_warpgroups_batches():
    reason = ops_sm90.unavailable_reason()
    if reason:
        pytest.skip(reason)
    script = _script()
    rows = script.softmax_beside(iters=50)
    assert [r["kind"] for r in rows] == list(script.BESIDE_KINDS)
    assert rows[0]["batches_per_kcycle"] == 0  # nothing beside: no batch is counted
    assert all(r["batches_per_kcycle"] > 0 for r in rows[1:])  # every other kind ran beside the softmax
    assert all(r["cycles_per_step"] > 0 for r in rows) and rows[0]["over_alone"] == 1.0
