"""sagelib.studies.plots helpers that notebooks share."""

import matplotlib

matplotlib.use("Agg")

from sagelib.studies import plots


def test_stacked_bars_draws_every_stack_however_many():
    stacks = {f"s{i}": [1.0, 2.0] for i in range(25)}  # more than tab20 has colours
    fig = plots.stacked_bars(["a", "b"], stacks, ylabel="y", limits={"floor": 4.5})
    ax = fig.axes[0]
    assert len(ax.containers) == 25
    assert [c.get_label() for c in ax.containers] == list(stacks)
    tops = [patch.get_y() + patch.get_height() for patch in ax.containers[-1].patches]
    assert tops == [25.0, 50.0]
