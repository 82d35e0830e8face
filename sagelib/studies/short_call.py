"""The short-sequence call (N=1024, B=32): where its time goes, from recorded GPU files.

At N=1024 the Hopper kernel alone beats cuDNN's whole call, and the separate quantizers lose
it again. Two recorded experiments asked whether that time can be hidden: the quantizers run
beside the kernel on SMs it leaves free (log seq 74), and Q quantized inside the kernel by the
producer warpgroup (seq 75-76). This module reads their files for notebook 04:

* ``...-quant-beside-attention.txt``: lines printed by the premise driver, one header line per
  shape (cuDNN, quantization alone, the sequential call) and one line per attention grid size;
* ``...-sm90-entry-fusion-producer.json``: one row per shape with kernel and end-to-end times of
  the unfused and fused builds, cuDNN's, and the ablations.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

from sagelib.errors import InputError
from sagelib.records.documents import RESULTS_DIR, newest_file

BESIDE_STEM = "quant-beside-attention"
FUSION_STEM = "sm90-entry-fusion-producer"

_SHAPE = re.compile(r"^(B\d+ H\d+ N\d+ D\d+): cudnn ([\d.]+) ms .*quant ([\d.]+), sequential ([\d.]+) ")
_GRID = re.compile(r"^\s+grid\s+(\d+): attention ([\d.]+) ms, with quantization beside ([\d.]+) ms")


@dataclass(frozen=True)
class BesideRow:
    """One grid size of the premise (times in ms, medians of one call)."""

    shape: str
    grid: int             #: CTAs of the attention kernel
    attention_ms: float   #: the kernel alone on ``grid`` CTAs
    beside_ms: float      #: the kernel plus the next input's quantizers on a side stream
    sequential_ms: float  #: quantizers then the kernel on every SM (the call as it is)
    quant_ms: float       #: the quantizers alone
    cudnn_ms: float       #: cuDNN's fp16 call, same process


def parse_beside(text: str) -> list[BesideRow]:
    """Rows of a quant-beside-attention file; comment lines (#) are skipped, any other unknown line refused."""
    rows, shape = [], None
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.startswith("#"):
            continue
        if head := _SHAPE.match(line):
            shape = (head.group(1), float(head.group(2)), float(head.group(3)), float(head.group(4)))
        elif (grid := _GRID.match(line)) and shape is not None:
            name, cudnn, quant, sequential = shape
            rows.append(BesideRow(name, int(grid.group(1)), float(grid.group(2)), float(grid.group(3)), sequential,
                                  quant, cudnn))
        else:
            raise InputError(f"line {number}: expected a shape line ('B.. H.. N.. D..: cudnn ...') or a grid line "
                             f"after one ('  grid G: attention ...'), got {line!r}")
    return rows


def load_beside(directory: str | Path = RESULTS_DIR) -> tuple[list[BesideRow], Path | None]:
    """The newest recorded premise file's rows (and its path), or ([], None)."""
    path = newest_file(BESIDE_STEM, ".txt", directory)
    return (parse_beside(path.read_text()), path) if path else ([], None)


def load_fusion(directory: str | Path = RESULTS_DIR) -> tuple[list[dict], Path | None]:
    """The newest recorded entry-fusion A/B's rows (and its path), or ([], None)."""
    path = newest_file(FUSION_STEM, ".json", directory)
    return (json.loads(path.read_text())["rows"], path) if path else ([], None)


def call_breakdown(beside: list[BesideRow], fusion: list[dict], shape: str) -> dict[str, float]:
    """ms of each way to make the call at ``shape`` ('B32 H32 N1024 D128'), recorded; cuDNN's last.

    Each value comes from one file, and each file timed its own variants in one process; the two
    files' figures are close (same tree, same card) but not from the same call.
    """
    grids = [r for r in beside if r.shape == shape]
    fused = next((r for r in fusion if r["shape"] == shape), None)
    if not grids or fused is None:
        known = sorted({r.shape for r in beside} | {r["shape"] for r in fusion})
        raise InputError(f"shape: expected one recorded in both files ({known}), got {shape!r}")
    best = min(grids, key=lambda r: r.beside_ms)
    return {
        "kernel alone (inputs quantized)": fused["kernel_ms"],
        "quantizers, then the kernel (today's call)": fused["e2e_ms"],
        f"quantizers beside the kernel (best of {len(grids)} grids: {best.grid} CTAs)": best.beside_ms,
        "Q quantized in the kernel (producer warps)": fused["e2e_fused_ms"],
        "cuDNN fp16": fused["cudnn_ms"],
    }
