"""Notebook 03's section on the real SageAttention2: live where the peer runs, else the newest recording."""

from __future__ import annotations

import math

from IPython.display import Markdown, display

from sagelib.records import documents
from sagelib.studies import plots


def peer_parity_document(device: str, live: bool):
    """(document, where): a quick live grid when ``live`` and a peer configuration runs on ``device``, else
    the recordings (:func:`recorded_per_config`; None when there is none)."""
    if live and str(device).startswith("cuda"):
        from sagelib.backends import sage2
        from sagelib.measure import peer_parity, recordings

        configs, _ = recordings.usable_backends(list(sage2.CONFIGS))
        if configs:
            return peer_parity.run_grid(peer_parity.default_grid(quick=True), configs, progress=lambda _: None), \
                "measured now (quick grid)"
    return recorded_per_config()


def recorded_per_config(directory=documents.RESULTS_DIR):
    """(document, where): for each peer configuration, its rows and summary from the newest recorded
    ``sagelib.peer-parity/1`` document that has it (a grid may be recorded one configuration per file), merged
    into one document; (None, None) when nothing is recorded."""
    found = documents.load_all(directory, documents.PEER_PARITY.id)
    newest: dict[str, tuple[dict, object]] = {}
    for document, path in found:  # oldest first: later recordings replace earlier ones per configuration
        for name in document.get("summary", {}):
            newest[name] = (document, path)
    if not newest:
        return None, None
    merged = {**newest[next(iter(newest))][0], "rows": [], "summary": {}, "mask_probe": []}
    for name, (document, _) in newest.items():
        merged["rows"] += [r for r in document["rows"] if r["config"] == name]
        merged["summary"][name] = document["summary"][name]
        merged["mask_probe"] += [p for p in document.get("mask_probe", []) if p.get("config") == name]
    files = sorted({path.name for _, path in newest.values()})
    return merged, "recorded: " + ", ".join(f"`{name}`" for name in files)


def show_peer_parity(results, device: str, live: bool):
    """Summary table, the per-case agreement chart against the bars, and the mask probe's verdict."""
    from sagelib.measure.peer_parity import BARS, format_summary

    document, where = peer_parity_document(device, live)
    if document is None:
        display(Markdown("No SageAttention2 parity recorded and the peer does not run here "
                         "(docs/design/peers.md says how to build it)."))
        results.add("peer_parity", "not run: no recording and no peer here")
        return None
    display(Markdown(f"**Source:** {where}, {document.get('device', {}).get('name', '?')}, "
                     f"{document.get('created_utc', '')}"))
    summary = [{"config": name, **values} for name, values in document["summary"].items()]
    display(plots.table(summary))
    results.add("peer_parity_summary", {"where": where, "summary": document["summary"]})
    configs = list(document["summary"])
    fig, axes = plots.plt.subplots(1, len(configs), figsize=(4.2 * len(configs), 3.6), squeeze=False)
    for ax, name in zip(axes[0], configs):
        rows = [r for r in document["rows"] if r["config"] == name]
        x = range(len(rows))
        for key, marker, label in (("contract_to_real", "o", "contract"), ("ours_to_real", "x", "our kernel")):
            ax.scatter(x, [max(r[key], 1e-7) for r in rows], marker=marker, label=label)
        ax.axhline(BARS[name], color="k", linestyle="--", linewidth=1, label=f"bar {BARS[name]:.0e}")
        ax.set_yscale("log")
        ax.set_xlabel("case (see the table in results)")
        ax.set_ylabel("rel L1 to the real kernel")
        ax.set_title(name, fontsize=10)
        ax.legend(fontsize=8)
    fig.tight_layout()
    results.figure(fig, "peer_parity")
    print(format_summary(document))
    worst = max((r["contract_to_real"] for r in document["rows"]), default=math.nan)
    results.add("peer_parity_worst_contract", worst)
    return document
