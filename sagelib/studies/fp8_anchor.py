"""Views of the FP8 anchor's recordings (``scripts/fp8_anchor.py``): cuDNN's FP8 attention beside ours.

:func:`speed_rows` pairs, per case, cuDNN's fused FP8 graph alone with our Hopper kernel's kernel-only call from
the same run; :func:`accuracy_rows` puts each backend's error against float64 side by side per canonical input.
"""

from __future__ import annotations

ANCHOR = "cudnn-fp8 graph alone"
OURS = "cuda-sm90 kernel only"


def device_name(document: dict) -> str:
    """The card a recording names (an early one wrote the name alone)."""
    device = document.get("device")
    return device.get("name", "?") if isinstance(device, dict) else str(device)


def speed_rows(document: dict) -> list[dict]:
    """One row per (shape, causal) timed for both kernels: their TOPS and ours as a fraction of the anchor's."""
    by_case: dict[tuple, dict] = {}
    for row in document.get("graph_only", []):
        by_case.setdefault((row["shape"], row["causal"]), {})[row.get("kernel", ANCHOR)] = row["tops"]
    rows = []
    for (shape, causal), tops in by_case.items():
        if ANCHOR in tops and OURS in tops:
            batch, heads, tokens, head_dim = shape.split(":")
            rows.append({"case": f"B{batch} H{heads} N{tokens} D{head_dim}" + (" causal" if causal else ""),
                         "cuDNN FP8 graph (TOPS)": round(tops[ANCHOR], 1), "cuda-sm90 (TOPS)": round(tops[OURS], 1),
                         "ours / cuDNN FP8": round(tops[OURS] / tops[ANCHOR], 3)})
    return rows


def accuracy_rows(document: dict) -> list[dict]:
    """One row per canonical input: each backend's relative L1 against float64."""
    table: dict[str, dict] = {}
    for row in document.get("rows", []):
        table.setdefault(row["input"], {"input": row["input"]})[row["backend"]] = round(row["rel_l1"], 5)
    return list(table.values())
