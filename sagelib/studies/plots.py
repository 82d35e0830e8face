"""The figures the notebooks share. Each function draws on a new (or given) axes and returns the figure."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
from matplotlib.ticker import MaxNLocator

from sagelib.errors import InputError

#: the most groups (bars, rows of bars) one chart shows; more are split over charts (:func:`pages`) or aggregated
MAX_GROUPS = 20


def pages(items: Sequence, limit: int = MAX_GROUPS) -> list[list]:
    """``items`` in consecutive pieces of at most ``limit``, as even as possible (45 -> 15, 15, 15): one chart each."""
    items = list(items)
    count = max(1, -(-len(items) // limit))
    size = -(-len(items) // count) if items else 0
    return [items[i:i + size] for i in range(0, len(items), size)] if items else []


def _check_groups(count: int, chart: str) -> None:
    """A chart of more than MAX_GROUPS groups is unreadable at a screen's size: refused, with the way out."""
    if count > MAX_GROUPS:
        raise InputError(f"plots.{chart}: {count} groups, expected at most {MAX_GROUPS} per chart; split them over "
                         "charts with plots.pages(...) or show them as a table (plots.table)")


def _axes(ax=None, size=(7, 4)):
    if ax is None:
        fig, ax = plt.subplots(figsize=size, constrained_layout=True)
    return ax.figure, ax


def error_budget_bars(rows_by_config: Mapping[str, Sequence], metric: str = "relative_l1", ax=None, title=None):
    """Grouped bars: one group per stage, one bar per configuration (log scale).

    rows_by_config: label -> list of sagelib.contract.StageError.
    """
    fig, ax = _axes(ax, (9, 4.5))
    labels = list(rows_by_config)
    stages = [r.label for r in next(iter(rows_by_config.values()))]
    width = 0.8 / max(1, len(labels))
    for i, label in enumerate(labels):
        values = [max(getattr(r.error, metric), 1e-12) for r in rows_by_config[label]]
        xs = [j + (i - (len(labels) - 1) / 2) * width for j in range(len(stages))]
        bars = ax.bar(xs, values, width, label=label)
        ax.bar_label(bars, fmt="%.1e", fontsize=7, rotation=90, padding=2)
    ax.set_xticks(range(len(stages)), stages, rotation=20, ha="right")
    ax.set_yscale("log")
    ax.set_ylabel(metric.replace("_", " ") + " vs float64")
    ax.set_title(title or "Error each stage adds on its own (others exact)")
    low, high = ax.get_ylim()
    ax.set_ylim(low, high * 30)  # room for the value labels
    ax.legend(loc="upper left", fontsize=8)
    return fig


def lines(x: Sequence, series: Mapping[str, Sequence], xlabel: str, ylabel: str, title: str = "",
          logx: bool = False, logy: bool = False, ax=None, markers: bool = True):
    """One line per series over a shared x."""
    fig, ax = _axes(ax)
    for label, ys in series.items():
        ax.plot(list(x), list(ys), marker="o" if markers else None, label=label)
    if logx:
        ax.set_xscale("log", base=2)
    if logy:
        ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    return fig


def heatmap(matrix, xlabel: str, ylabel: str, title: str = "", ax=None, cmap="viridis", colorbar_label=""):
    """A 2-d array as an image with a colour bar (e.g. error over query block x key block)."""
    fig, ax = _axes(ax, (6, 5))
    data = matrix.detach().cpu().numpy() if hasattr(matrix, "detach") else matrix
    im = ax.imshow(data, aspect="auto", origin="upper", cmap=cmap)
    fig.colorbar(im, ax=ax, label=colorbar_label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # blocks and heads are counted, not measured
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    return fig


def pass_fail_grid(grid, rows: Sequence[str], columns: Sequence[str], title: str = "", ax=None):
    """Cases x checks on a fixed scale: green pass (1), red fail (0), grey not run (NaN), a tick or a cross in each
    cell and a legend, so an all-pass grid reads as all green rather than as one pale colour-bar extreme."""
    import math

    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Patch

    fig, ax = _axes(ax, (1.2 + 1.1 * len(columns), 1.2 + 0.32 * len(rows)))
    data = grid.tolist() if hasattr(grid, "tolist") else [list(r) for r in grid]
    coded = [[2 if isinstance(v, float) and math.isnan(v) else int(v) for v in r] for r in data]
    colours = ["#d9534f", "#5cb85c", "#d0d4da"]  # fail, pass, not run
    ax.imshow(coded, cmap=ListedColormap(colours), vmin=0, vmax=2, aspect="auto")
    for i, r in enumerate(coded):
        for j, v in enumerate(r):
            ax.text(j, i, ("✗", "✓", "")[v], ha="center", va="center", color="white", fontsize=9)
    ax.set_xticks(range(len(columns)), [c.replace("_", " ") for c in columns], rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(rows)), rows, fontsize=8)
    ax.set_title(title)
    ax.legend(handles=[Patch(color=colours[1], label="pass"), Patch(color=colours[0], label="fail"),
                       Patch(color=colours[2], label="not run")],
              loc="upper left", bbox_to_anchor=(1.01, 1), fontsize=8, frameon=False)
    return fig


def table(rows: Sequence[Mapping], columns: Sequence[str] | None = None):
    """A list of dicts as a pandas-free HTML table (rendered by Jupyter through IPython.display.HTML)."""
    from html import escape

    columns = list(columns or (rows[0].keys() if rows else []))
    head = "".join(f"<th>{escape(str(c))}</th>" for c in columns)
    body = "".join(
        "<tr>" + "".join(f"<td>{escape(_fmt(r.get(c, '')))}</td>" for c in columns) + "</tr>" for r in rows
    )
    from IPython.display import HTML

    return HTML(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return str(value)


def stacked_bars(categories: Sequence[str], stacks: Mapping[str, Sequence[float]], ylabel: str, title: str = "",
                 limits: Mapping[str, float] | None = None, ax=None):
    """One bar per category, split into ``stacks`` (label -> value per category); dashed lines for ``limits``."""
    _check_groups(len(categories), "stacked_bars")
    fig, ax = _axes(ax, (10, 4.5))
    bottom = [0.0] * len(categories)
    palette = plt.get_cmap("tab20").colors if len(stacks) > 10 else [None]  # the default cycle has 10
    for i, (label, values) in enumerate(stacks.items()):
        color = palette[i % len(palette)]  # past 20 stacks the colours repeat; no stack is dropped
        ax.bar(range(len(categories)), list(values), bottom=bottom, label=label, color=color)
        bottom = [b + v for b, v in zip(bottom, values)]
    for i, (label, y) in enumerate((limits or {}).items()):
        ax.axhline(y, linestyle="--", color="black", linewidth=1)
        ax.text(len(categories) - 0.5, y, f" {label}", va="bottom" if i == 0 else "top", ha="right", fontsize=8)
    ax.set_xticks(range(len(categories)), categories, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    low, high = ax.get_ylim()
    ax.set_ylim(low, high + 0.3 * (high - low))  # headroom, so the legend sits above the tallest bars
    ax.legend(fontsize=7, loc="upper left", ncol=3)
    return fig


def grouped_bars(categories: Sequence[str], groups: Mapping[str, Sequence[float]], ylabel: str, title: str = "",
                 ax=None, value_format: str = "%.0f"):
    """Bars side by side: one group per category, one bar per ``groups`` entry."""
    _check_groups(len(categories), "grouped_bars")
    fig, ax = _axes(ax, (10, 4.5))
    width = 0.8 / max(1, len(groups))
    for i, (label, values) in enumerate(groups.items()):
        xs = [j + (i - (len(groups) - 1) / 2) * width for j in range(len(categories))]
        bars = ax.bar(xs, list(values), width, label=label)
        ax.bar_label(bars, fmt=value_format, fontsize=7, padding=1)
    ax.set_xticks(range(len(categories)), categories, rotation=20, ha="right", fontsize=8)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    low, high = ax.get_ylim()
    ax.set_ylim(low, high + 0.15 * (high - low))  # headroom, so the legend sits above the tallest bars
    ax.legend(fontsize=8, loc="upper right")
    return fig


def bound_bars(rows: Sequence[Mapping], head_dim: int, conversion: str, title: str, ax=None):
    """Projected floor and serial TOPS per structure (rows of sagelib.studies.unit_bounds.bound_table)."""
    from sagelib.studies.unit_bounds import FLOOR, SERIAL

    sel = [r for r in rows if r["head_dim"] == head_dim and r["conversion"] == conversion]
    return grouped_bars([r["structure"] for r in sel],
                        {"floor (projection)": [r[FLOOR] for r in sel],
                         "serial (projection)": [r[SERIAL] for r in sel]},
                        ylabel="TOPS", title=title, ax=ax)


def speedup_bars(labels: Sequence[str], series: Mapping[str, Sequence[float]], title: str = "", ax=None,
                 reference: float = 1.0, xlabel: str = "speed / baseline of the same call"):
    """Horizontal bars, one row per label and one bar per ``series`` entry (NaN: no bar), a line at ``reference``."""
    _check_groups(len(labels), "speedup_bars")
    fig, ax = _axes(ax, (9, min(8.0, 0.3 * len(labels) * max(1, len(series)) ** 0.5 + 1.5)))  # fits a screen
    height = 0.8 / max(1, len(series))
    for i, (name, values) in enumerate(series.items()):
        ys = [j + (i - (len(series) - 1) / 2) * height for j in range(len(labels))]
        ax.barh(ys, [v - reference for v in values], height, left=reference, label=name)
    ax.axvline(reference, color="black", linewidth=0.8)
    ax.set_yticks(range(len(labels)), labels, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel(xlabel)
    ax.set_title(title)
    ax.legend(fontsize=7, loc="lower right")
    return fig
