"""Figures of benchmark documents: TOPS against N, speedups, and kernels against the ceilings.

Each function takes a document of :func:`sagelib.measure.bench.run_sweep` (measured now or recorded)
and returns a matplotlib Figure; a recorded document gets "recorded <date> on <card>" in its title
so a figure cut out of the report still says it was not measured in this run.
"""

from __future__ import annotations

from collections import defaultdict

import matplotlib.pyplot as plt

from sagelib.measure import bench
from sagelib.measure.targets import distinct


def _label(record: dict) -> str:
    return record["backend"] if record["mode"] == "end_to_end" else f"{record['backend']} (kernel only)"


def _title(document: dict, recorded: bool) -> str:
    card = (document.get("device") or {}).get("name", "?")
    when = document.get("created_utc", "?")
    return f"recorded {when[:10]} on {card}" if recorded else f"measured now on {card}"


def _cases(document: dict):
    """(head_dim, causal) -> label -> sorted [(N, tops)] for every timed record."""
    cases: dict = defaultdict(lambda: defaultdict(list))
    for r in document["records"]:
        if r.get("tops") and not r.get("error"):
            cases[(r["shape"]["head_dim"], r["causal"])][_label(r)].append((r["shape"]["seq_q"], r["tops"]))
    return {key: {label: sorted(points) for label, points in series.items()} for key, series in sorted(cases.items())}


def _grid(n_panels: int):
    cols = 2 if n_panels > 1 else 1
    rows = (n_panels + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(6.2 * cols, 4.2 * rows), squeeze=False)
    for ax in axes.flat[n_panels:]:
        ax.set_visible(False)
    return fig, list(axes.flat)


def tops_vs_n(document: dict, *, recorded: bool = False):
    """One panel per (head_dim, causal): TOPS against N, one line per backend (and kernel-only)."""
    cases = _cases(document)
    fig, axes = _grid(max(1, len(cases)))
    for ax, ((d, causal), series) in zip(axes, cases.items()):
        for label, points in series.items():
            ax.plot([n for n, _ in points], [t for _, t in points], marker="o",
                    linestyle="--" if "kernel only" in label else "-", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length N (B x N fixed)")
        ax.set_ylabel("TOPS (4·B·H·N²·D" + (" / 2)" if causal else ")"))
        ax.set_title(f"head_dim {d}, {'causal' if causal else 'non-causal'}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(f"Attention throughput — {_title(document, recorded)}")
    fig.tight_layout()
    return fig


def speedup_vs_n(document: dict, *, baseline: str, recorded: bool = False):
    """Each backend's TOPS over ``baseline``'s end-to-end TOPS on the same case, against N."""
    rows = bench.peer_ratios(document["records"], peers=(baseline,))
    cases: dict = defaultdict(lambda: defaultdict(list))
    for r in rows:
        if baseline in r["ratio"] and not (r["backend"] == baseline and r["mode"] == "end_to_end"):
            cases[(r["shape"]["head_dim"], r["causal"])][_label(r)].append((r["shape"]["seq_q"], r["ratio"][baseline]))
    fig, axes = _grid(max(1, len(cases)))
    for ax, ((d, causal), series) in zip(axes, sorted(cases.items())):
        for label, points in series.items():
            points.sort()
            ax.plot([n for n, _ in points], [x for _, x in points], marker="o",
                    linestyle="--" if "kernel only" in label else "-", label=label)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("sequence length N")
        ax.set_ylabel(f"speedup over {baseline}")
        ax.set_title(f"head_dim {d}, {'causal' if causal else 'non-causal'}")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    if not cases:
        axes[0].text(0.5, 0.5, f"{baseline} was not measured", ha="center", va="center", transform=axes[0].transAxes)
    fig.suptitle(f"Speedup over {baseline} — {_title(document, recorded)}")
    fig.tight_layout()
    return fig


def against_ceilings(document: dict, *, recorded: bool = False):
    """Each backend's best TOPS (any case) as a bar, with the measured GEMM ceilings as lines."""
    best: dict[str, float] = {}
    for r in document["records"]:
        if r.get("tops") and not r.get("error"):
            best[_label(r)] = max(best.get(_label(r), 0.0), r["tops"])
    fig, ax = plt.subplots(figsize=(8, 4.2))
    labels = sorted(best, key=best.get)
    ax.barh(labels, [best[k] for k in labels], color="tab:blue")
    for i, k in enumerate(labels):
        ax.text(best[k], i, f" {best[k]:.0f}", va="center", fontsize=8)
    styles = {"int8_gemm": "tab:red", "fp8_gemm": "tab:purple", "bf16_gemm": "tab:green"}
    for name, color in styles.items():
        c = (document.get("ceilings") or {}).get(name) or {}
        if c.get("value"):
            ax.axvline(c["value"], color=color, linestyle="--", label=f"{name}: {c['value']:.0f} TOPS (measured)")
    ax.set_xlabel("TOPS (best case of the sweep)")
    ax.set_title(f"Kernels against the card's ceilings — {_title(document, recorded)}")
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def quantizer_bandwidth(quantizers: dict, *, title: str, target: float = 0.70):
    """Each quantizer's TB/s (GPU time, else call time) per shape, against the copy measured with it.

    ``quantizers`` is ``{"copy_tb_s": float, "rows": [...]}`` as `sagelib bench --suite default` and notebook
    03 record it (rows of :func:`sagelib.measure.quant_bench.quantizer_rows`).
    """
    copy = quantizers["copy_tb_s"]
    rows = quantizers["rows"]
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    whats = list(dict.fromkeys(r["what"] for r in rows))
    fig, ax = plt.subplots(figsize=(8, 4.2))
    width = 0.8 / max(1, len(whats))
    for j, what in enumerate(whats):
        xs, ys = [], []
        for i, shape in enumerate(shapes):
            for r in rows:
                if r["shape"] == shape and r["what"] == what:
                    xs.append(i + (j - (len(whats) - 1) / 2) * width)
                    ys.append(r.get("gpu_tb_s") or r["tb_s"])
        bars = ax.bar(xs, ys, width, label=what)
        # whole percents, or the digits that tell a share from the target (69.6%, not 70%)
        ax.bar_label(bars, labels=[distinct(y / copy, target, True, 0) for y in ys], fontsize=8)
    ax.axhline(copy, color="black", linestyle="-", label=f"device copy {copy:.2f} TB/s (same run)")
    ax.axhline(target * copy, color="tab:red", linestyle="--", label=f"target: {target:.0%} of copy")
    ax.set_xticks(range(len(shapes)), [f"B:H:N:D {s}" for s in shapes])
    ax.set_ylabel("TB/s (bytes read + written)")
    ax.set_ylim(0, 1.4 * copy)
    ax.set_title(f"Quantizers against the copy bandwidth — {title}")
    ax.legend(fontsize=8, loc="upper center", ncol=2)
    fig.tight_layout()
    return fig


def short_call(breakdown: dict, beside: list, *, shape: str, title: str):
    """Left: each recorded way to make the call at ``shape`` in ms, as a share of cuDNN's (the last entry of
    ``breakdown``, :func:`sagelib.studies.short_call.call_breakdown`). Right: the kernel alone and with the
    quantizers beside it against its grid (``beside``: that shape's :class:`~sagelib.studies.short_call.BesideRow`)."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 4.2), gridspec_kw={"width_ratios": [1.3, 1]})
    labels, values = list(breakdown), list(breakdown.values())
    reference = values[-1]
    bars = left.barh(range(len(labels)), values, color=["tab:gray"] + ["tab:blue"] * (len(labels) - 2) + ["tab:orange"])
    left.bar_label(bars, labels=[f"{v:.3f} ms ({v / reference:.2f}x cuDNN's time)" for v in values], fontsize=8,
                   padding=2)
    left.set_yticks(range(len(labels)), labels, fontsize=8)
    left.invert_yaxis()
    left.set_xlim(0, 1.45 * max(values))
    left.set_xlabel("ms per call")
    left.set_title(f"{shape}: the call, recorded")
    grids = [r.grid for r in beside]
    right.plot(grids, [r.attention_ms for r in beside], "o-", label="kernel alone on G CTAs")
    right.plot(grids, [r.beside_ms for r in beside], "s-", label="kernel + quantizers beside it")
    right.axhline(beside[0].sequential_ms, color="tab:blue", linestyle="--", linewidth=1,
                  label="quantizers, then kernel")
    right.axhline(beside[0].cudnn_ms, color="tab:orange", linestyle="--", linewidth=1, label="cuDNN fp16")
    right.set_xlabel("attention CTAs (free SMs run the quantizers)")
    right.set_ylabel("ms")
    right.set_title("Quantizers beside the kernel")
    right.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def fusion_ceilings(rows: list[dict], title: str):
    """One panel per shape (rows of a ``*-quant-breakdown.json``, :mod:`sagelib.studies.quant_breakdown`): the call and each
    fusion's ceiling in ms, against cuDNN's time (orange) and the Hopper kernel's speed target at that shape (black)."""
    from sagelib.studies.quant_breakdown import PassTimes, ceilings, target_ms

    fig, axes = plt.subplots(1, len(rows), figsize=(2.5 + 4.2 * len(rows), 3.8), squeeze=False, sharey=True)
    for ax, row in zip(axes[0], rows):
        shown = ceilings(PassTimes(**row["times_ms"]))  # recomputed: the stored list follows the code that wrote it
        cudnn = row["times_ms"]["cudnn"]
        values = [c.ms for c in shown]
        colors = ["tab:gray"] + ["tab:blue"] * (len(values) - 2) + ["tab:green"]
        bars = ax.barh(range(len(values)), values, color=colors)
        ax.bar_label(bars, labels=[f"{c.ms:.3f} ({c.vs_cudnn:.2f}x)" for c in shown], fontsize=7, padding=2)
        ax.set_yticks(range(len(values)), [c.what for c in shown], fontsize=7)
        ax.invert_yaxis()
        ax.axvline(cudnn, color="tab:orange", linestyle="--", linewidth=1, label=f"cuDNN fp16 ({cudnn:.3f} ms)")
        target = target_ms(row["shape"], cudnn)
        if target != cudnn:
            ax.axvline(target, color="black", linestyle="--", linewidth=1, label=f"speed target ({target:.3f} ms)")
        ax.set_xlim(0.5 * min(values + [target]), 1.3 * max(values + [cudnn]))
        ax.set_xlabel("ms per call (x: cuDNN's time over it)")
        ax.set_title(row["shape"], fontsize=9)
        ax.legend(fontsize=7, loc="lower right")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return fig


def target_bars(statuses: list, title: str):
    """Each target (:func:`sagelib.measure.targets.evaluate`) as measured / goal: green where met, red where missed, a note
    where the document did not measure it, "re-measured" where the figure is a re-measure's
    (:func:`sagelib.measure.targets.remeasures_of`); the dashed line is the goal."""
    fig, ax = plt.subplots(figsize=(11, 0.45 * len(statuses) + 1.4))
    labels = [s.target.name for s in statuses]  # what each target measures
    ratios = [s.measured / s.goal if s.met is not None else 0.0 for s in statuses]
    colors = ["tab:gray" if s.met is None else "tab:green" if s.met else "tab:red" for s in statuses]
    bars = ax.barh(range(len(statuses)), ratios, color=colors)
    notes = []
    for s, ratio in zip(statuses, ratios):
        if s.met is None:
            notes.append("not measured")
        else:
            # with the digits that tell a near miss from the goal (targets.distinct, the table's rule)
            percent = s.unit == "of copy"
            goal = f"{s.goal:.0%}" if percent else f"{s.goal:.0f}"
            shown = f"{distinct(s.measured, s.goal, percent, 1 if percent else 0)} of {goal}"
            remeasured = ", re-measured" if s.source is not None else ""
            notes.append(f"{distinct(ratio, 1.0, False, 2)}x ({shown}{remeasured})")
    # a white box, so the dashed goal line does not run through the text
    ax.bar_label(bars, labels=notes, fontsize=7, padding=2,
                 bbox=dict(boxstyle="square,pad=0.15", facecolor="white", edgecolor="none", alpha=0.85))
    ax.axvline(1.0, color="black", linestyle="--", linewidth=1)
    ax.set_yticks(range(len(statuses)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(0, 1.35 * max(ratios + [1.0]))
    ax.set_xlabel("measured / goal (dashed: the goal)")
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    return fig


def target_history(recordings: list, title: str, max_ticks: int = 12):
    """Each target's measured / goal in every recording (:func:`sagelib.measure.targets.history`), oldest first: one line
    per target through the recordings that measured it; filled markers where it was met, open where missed; dashed:
    the goal. The x axis counts recordings; at most ``max_ticks`` of them are labelled with their date."""
    fig, ax = plt.subplots(figsize=(11, 4.8))
    shown = [1.0]
    if recordings:
        for k, first in enumerate(recordings[0].statuses):
            points = [(i, r.statuses[k]) for i, r in enumerate(recordings) if r.statuses[k].met is not None]
            xs = [i for i, _ in points]
            ys = [s.measured / s.goal for _, s in points]
            shown += ys
            line, = ax.plot(xs, ys, linewidth=1.2, label=first.target.name)
            ax.scatter(xs, ys, s=18, zorder=3, edgecolors=line.get_color(),
                       facecolors=[line.get_color() if s.met else "white" for _, s in points])
    ax.axhline(1.0, color="black", linestyle="--", linewidth=1)
    ax.set_ylim(min(shown) - 0.05, max(shown) + 0.05)
    step = max(1, -(-len(recordings) // max_ticks))
    ticks = list(range(0, len(recordings), step))
    ax.set_xticks(ticks, [recordings[i].created_utc[:10] for i in ticks], rotation=30, fontsize=8, ha="right")
    ax.set_xlabel(f"recording, oldest first ({len(recordings)} in all)")
    ax.set_ylabel("measured / goal")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    fig.tight_layout()
    return fig
