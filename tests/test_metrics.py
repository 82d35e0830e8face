"""Error metrics on hand-computed cases."""

import math

import pytest
import torch

from sagelib.contract import metrics


def test_hand_computed_values():
    ref = torch.tensor([[1.0, -2.0], [3.0, 4.0]])
    out = torch.tensor([[1.0, -1.0], [3.0, 6.0]])
    assert metrics.relative_l1(out, ref) == pytest.approx(3.0 / 10.0)
    assert metrics.rmse(out, ref) == pytest.approx(math.sqrt((1 + 4) / 4))
    assert metrics.max_abs(out, ref) == pytest.approx(2.0)
    dot = 1 + 2 + 9 + 24
    assert metrics.cosine(out, ref) == pytest.approx(dot / (math.sqrt(30) * math.sqrt(1 + 1 + 9 + 36)))


def test_per_row_and_per_channel_views():
    ref = torch.ones(1, 1, 3, 2)
    out = ref.clone()
    out[0, 0, 1, 0] = 3.0
    assert metrics.per_row(out, ref).tolist() == [0.0, 1.0, 0.0]
    assert metrics.per_channel(out, ref).tolist() == pytest.approx([2.0 / 3.0, 0.0])


def test_compare_reports_nonfinite_outputs_as_failures():
    report = metrics.compare(torch.tensor([float("nan"), 1.0]), torch.tensor([1.0, 1.0]))
    assert math.isnan(report.cosine) and math.isinf(report.relative_l1)


def test_shape_mismatch_is_named():
    with pytest.raises(ValueError, match=r"out: expected the shape of ref \(2,\), got \(3,\)"):
        metrics.relative_l1(torch.zeros(3), torch.zeros(2))
