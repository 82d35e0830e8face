"""Notebook sections that show one recording: where it came from, its figure, its table.

Each function displays Markdown and a table in the running notebook (IPython.display) and
adds what it drew to the notebook's :class:`sagelib.records.results.Results`; when the
recording is missing it says which file would hold it and how to record it.
"""

from __future__ import annotations

from pathlib import Path

from IPython.display import Markdown, display

from sagelib.studies import block_phases, plots


def show_recorded(rows: list[dict], document: dict | None, path: Path | None, missing: str, where: str) -> None:
    """``rows`` with the recording they come from, or, with no rows, what is missing and how to record it.

    ``missing`` names the figure (e.g. "`cuda-sm90`"), ``where`` the call (e.g. "B=2, H=32, N=16384").
    """
    if rows:
        display(Markdown(f"Recorded in `{path.name}` ({document['created_utc'][:10]}, {document['device']['name']})."))
        display(plots.table(rows))
    else:
        display(Markdown(f"No recorded {missing} kernel-only figure for {where} in "
                         "data/results: run `sagelib bench --suite default --out FILE.json` on a GPU and keep the file there."))


def show_recorded_pair(results, document: dict, path: Path, rows: list[dict], columns: tuple[str, str], title: str,
                       figure: str, note: str = "") -> None:
    """A recorded kernel-only A/B: where it came from, grouped bars of the two ``columns`` by shape, the table.

    The chart is added to ``results`` as ``figure``.
    """
    display(Markdown(f"Recorded in `{path.name}` ({document['date']}, {document['device']['name']}){note}, "
                     "kernel only."))
    fig = plots.grouped_bars([r["shape"] for r in rows], {k: [r[k] for r in rows] for k in columns},
                             ylabel="kernel-only TOPS (recorded)", value_format="%.0f", title=title)
    results.figure(fig, figure)
    display(plots.table(rows))


def chart_block_phases(results, stem: str, builds: dict[str, tuple[str, int | None]], title: str, figure: str,
                       directory: str | Path | None = None) -> dict[str, dict[str, float]]:
    """One stacked bar per (build, warpgroup) of the recorded trace file ``*-{stem}.txt``.

    ``builds`` maps a label to the file's section and a block parity (None: every block); the first
    build's warpgroup-0 period is drawn as the reference line. Adds the bars to ``results`` (as
    "block phases: {title} (recorded)") and the chart as ``figure``; returns the bars ({} with no file).
    """
    rows, path = block_phases.load(stem) if directory is None else block_phases.load(stem, directory)
    if not rows:
        display(Markdown(f"No recorded trace `data/results/*-{stem}.txt` to show."))
        return {}
    bars = {f"{label}, warpgroup {wg}": block_phases.period_parts(rows, section, wg, parity)
            for wg in (0, 1) for label, (section, parity) in builds.items()}
    results.add(f"block phases: {title} (recorded)", [{"build": k, **v} for k, v in bars.items()])
    display(Markdown(f"Recorded: `{path.name}`; medians over the traced blocks, in cycles."))
    fig = plots.stacked_bars(list(bars), {p: [v[p] for v in bars.values()] for p in (*block_phases.PHASES, "rest")},
                             ylabel="cycles per key block (median)", title=title,
                             limits={"the kernel's period": bars[f"{next(iter(builds))}, warpgroup 0"]["period"]})
    results.figure(fig, figure)
    return bars
