"""NUMERICAL_CONTRACT.md and sagelib.contract say the same thing."""

import re
from pathlib import Path

import pytest

from sagelib.contract import presets as P

DOC = (Path(__file__).resolve().parent.parent / "NUMERICAL_CONTRACT.md").read_text()


def table_after(heading: str) -> list[list[str]]:
    """Rows (cells stripped) of the first markdown table after ``heading``."""
    section = DOC[DOC.index(heading):]
    rows = []
    for line in section.splitlines()[1:]:
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if not set("".join(cells)) <= set("-: "):
                rows.append(cells)
        elif rows:
            break
    return rows[1:]  # drop the header


def test_every_constant_in_the_doc_matches_the_code():
    rows = table_after("## Constants")
    assert len(rows) >= 9
    for name, value, _ in rows:
        assert getattr(P, name.strip("`")) == pytest.approx(float(value), rel=0, abs=0), name


def test_presets_table_matches_the_code():
    rows = {r[0].strip("`"): r for r in table_after("## Geometry presets")}
    assert set(rows) == set(P.PRESETS)
    for name, preset in P.PRESETS.items():
        blkq, warpq, blkk, warpk, cta_k, permuted = rows[name][1:7]
        assert (int(blkq), int(warpq), int(blkk), int(warpk), int(cta_k)) == (
            preset.blkq, preset.warpq, preset.blkk, preset.warpk, preset.cta_k)
        assert (permuted == "yes") == preset.permute_v


def test_v_scale_max_table_matches_the_code():
    rows = table_after("## Stage 5")
    assert {r[0].strip("`"): float(r[1]) for r in rows} == P.V_SCALE_MAX


def test_v_permutation_matches_the_code():
    (row,) = table_after("Position j of every 16")
    assert tuple(int(t) for t in row[0].split(",")) == P.SM89_V_PERMUTATION


def test_documented_names_exist():
    from sagelib import contract

    for name in ("attention", "quantize_qk", "quantize_v", "reference_attention", "error_budget"):
        assert f"{name}(" in DOC and hasattr(contract, name)
    for stage in contract.Exact.stage_names():
        assert f"`{stage}`" in DOC
    for option in ("causal_alignment=\"top_left\"", "lse_correction=\"input_dtype\""):
        assert option in DOC
    assert re.search(r"supported width \(64, 128, 256\)", DOC) and P.SUPPORTED_HEAD_DIMS == (64, 128, 256)
