"""The short-sequence call's recorded files: the premise's printed lines and the entry-fusion A/B."""

import matplotlib
import pytest

from sagelib.studies import bench_plots, short_call

matplotlib.use("Agg")

SAMPLE = """# a comment
B2 H4 N64 D64: cudnn 0.5000 ms (1.0 TOPS), quant 0.2000, sequential 0.9000 (1.0 TOPS)
  grid  132: attention 0.7000 ms, with quantization beside 0.9100 ms (1.0 TOPS, 0.549x cudnn; sequential 0.556x)
  grid  100: attention 0.8000 ms, with quantization beside 0.8500 ms (1.0 TOPS, 0.588x cudnn; sequential 0.556x)
"""


def test_premise_lines_become_rows_under_their_shape():
    rows = short_call.parse_beside(SAMPLE)
    assert [(r.shape, r.grid, r.attention_ms, r.beside_ms) for r in rows] == [
        ("B2 H4 N64 D64", 132, 0.7, 0.91), ("B2 H4 N64 D64", 100, 0.8, 0.85)]
    assert {(r.sequential_ms, r.quant_ms, r.cudnn_ms) for r in rows} == {(0.9, 0.2, 0.5)}


def test_a_line_that_is_neither_is_refused_with_its_number():
    with pytest.raises(ValueError, match=r"line 2: expected a shape line"):
        short_call.parse_beside("# header\nsomething else\n")
    with pytest.raises(ValueError, match=r"line 1: expected a shape line .* or a grid line after one"):
        short_call.parse_beside("  grid  132: attention 0.7 ms, with quantization beside 0.9 ms\n")


def test_recorded_files_give_the_breakdown_and_its_figure():
    beside, beside_path = short_call.load_beside()
    fusion, fusion_path = short_call.load_fusion()
    assert beside_path is not None and fusion_path is not None, "the recorded files of log seq 74 and 76 are missing"
    shape = "B32 H32 N1024 D128"
    breakdown = short_call.call_breakdown(beside, fusion, shape)
    assert list(breakdown)[-1] == "cuDNN fp16" and all(v > 0 for v in breakdown.values())
    fig = bench_plots.short_call(breakdown, [r for r in beside if r.shape == shape], shape=shape, title="test")
    assert len(fig.axes) == 2
    with pytest.raises(ValueError, match=r"shape: expected one recorded in both files"):
        short_call.call_breakdown(beside, fusion, "B1 H1 N1 D1")
