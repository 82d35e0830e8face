"""Measure the card's ceilings, and the int8 GEMM with a row-major B for comparison (it runs ~7.7x slower).

Run on a GPU host from the repository root: ``python3 scripts/gpu_ceilings_check.py OUT.json``.
"""

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run as a script from scripts/

from sagelib.measure.ceilings import _rand, format_ceilings, measure_ceilings
from sagelib.measure.timing import TimingConfig, summarize, time_calls

device = torch.device("cuda")
ceilings = measure_ceilings(device)
print(format_ceilings(ceilings))
g = torch.Generator(device=device)
g.manual_seed(1)
a, b = _rand((8192, 8192), torch.int8, device, g), _rand((8192, 8192), torch.int8, device, g)
stats = summarize(time_calls([lambda: torch._int_mm(a, b)], device,
                             TimingConfig(warmup=3, reps=20, min_reps=5, budget_s=1)))
row_major = 2 * 8192**3 / (stats.median_ms * 1e-3) / 1e12
print(f"int8 torch._int_mm with row-major B: {row_major:.1f} TOPS (median {stats.median_ms:.3f} ms)")
with open(sys.argv[1], "w") as f:
    json.dump({"ceilings": ceilings, "int8_row_major_b_tops": row_major, "int8_row_major_b_stats": stats.__dict__},
              f, indent=1)
