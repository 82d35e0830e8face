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


def test_pages_split_evenly_and_keep_every_item():
    assert plots.pages(list(range(45))) == [list(range(0, 15)), list(range(15, 30)), list(range(30, 45))]
    assert plots.pages(list(range(20))) == [list(range(20))]
    assert [len(p) for p in plots.pages(range(32))] == [16, 16]
    assert plots.pages([]) == []


def test_a_chart_of_more_than_twenty_groups_is_refused_with_the_way_out():
    import pytest

    from sagelib.errors import InputError

    labels = [f"v{i}" for i in range(plots.MAX_GROUPS + 1)]
    with pytest.raises(InputError, match=r"21 groups, expected at most 20.*plots.pages"):
        plots.speedup_bars(labels, {"a": [1.0] * len(labels)})
    with pytest.raises(InputError, match="grouped_bars"):
        plots.grouped_bars(labels, {"a": [1.0] * len(labels)}, ylabel="y")
    plots.grouped_bars(labels[:-1], {"a": [1.0] * (len(labels) - 1)}, ylabel="y")  # twenty draw


def test_pass_fail_grid_has_a_fixed_scale_and_a_mark_per_cell():
    import math

    grid = [[1.0, 1.0], [1.0, 0.0], [math.nan, math.nan]]
    fig = plots.pass_fail_grid(grid, ["#1", "#2", "#3"], ["qk_bit_exact", "lse"], title="t")
    ax = fig.axes[0]
    assert len(fig.axes) == 1  # a legend, no colour bar stretched over whatever the values span
    image = ax.get_images()[0]
    assert image.get_clim() == (0, 2)  # fail, pass, not run: the same colours whatever the grid holds
    assert [t.get_text() for t in ax.texts] == ["✓", "✓", "✓", "✗", "", ""]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["pass", "fail", "not run"]
    assert [t.get_text() for t in ax.get_xticklabels()] == ["qk bit exact", "lse"]


def test_heatmap_counts_heads_and_blocks_in_whole_numbers():
    fig = plots.heatmap([[0.1, 0.2, 0.3]] * 4, xlabel="query block", ylabel="head")
    ticks = fig.axes[0].get_yticks()
    assert all(float(t).is_integer() for t in ticks)
