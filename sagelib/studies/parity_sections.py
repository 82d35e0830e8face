"""The parity notebook's per-backend section: the sweep through one kernel, kept and shown.

:func:`backend_parity` runs :func:`sagelib.measure.parity.default_sweep` through one backend
(or says why it cannot run here), records the rows and headlines in the notebook's
:class:`sagelib.records.results.Results`, and shows the error chart and the table.
"""

from __future__ import annotations

from IPython.display import Markdown, display

from sagelib.measure import parity
from sagelib.studies import plots

TABLE_COLUMNS = ["case", "label", "seed", "passed", "qk_bit_exact", "v_bit_exact", "to_contract", "kernel_err",
                 "contract_err", "lse_err"]


def case_labels(rows: list[dict]) -> list[str]:
    """Short chart labels for the sweep's rows, ``"#3 2007x1000"`` (number, query x key tokens); the table beside
    the chart gives each number's whole configuration."""
    return [f"#{i} {r['n_q']}x{r['n_kv']}" for i, r in enumerate(rows, 1)]


def table_rows(rows: list[dict]) -> list[dict]:
    """The rows with their chart label's number first (``case``), for :func:`sagelib.studies.plots.table`."""
    return [{"case": f"#{i}", **r} for i, r in enumerate(rows, 1)]


def backend_parity(results, backend: str, key: str, title: str, device: str, n_values, head_dims) -> list[dict]:
    """The parity sweep over ``n_values`` x ``head_dims`` through ``backend`` on ``device``.

    Records ``{key}_kernel_status``, ``{key}_sweep`` and the headlines "``key`` parity cases passed"
    and "... largest kernel-vs-contract rel L1" (underscores in ``key`` read as spaces), and the
    chart ``{key}_error_vs_float64`` of the kernel's error beside the contract's. Returns the rows
    ([] when the backend cannot run here: its status and headline then give the reason).
    """
    reason = parity.kernel_unavailable_reason(device, backend)
    name = key.replace("_", " ")
    results.add(f"{key}_kernel_status", reason or f"run on {device}")
    if reason:
        display(Markdown(f"**{title} not run:** {reason}"))
        results.headline(f"{name} parity cases passed", "not run", note=reason)
        return []
    rows = [parity.run_case(case, device, backend=backend) for case in parity.default_sweep(n_values, head_dims)]
    results.add(f"{key}_sweep", rows)
    results.headline(f"{name} parity cases passed", f"{sum(r['passed'] for r in rows)}/{len(rows)}")
    results.headline(f"{name} largest kernel-vs-contract rel L1", max(r["to_contract"] for r in rows),
                     note=f"tolerance {parity.ATTN_REL_L1}")
    fig = plots.grouped_bars(
        case_labels(rows),
        {"contract (sm90)": [r["contract_err"] for r in rows], "kernel": [r["kernel_err"] for r in rows]},
        ylabel="relative L1 vs float64", title=f"{title}: error against float64 (cases as in the table)",
        value_format="%.3f")
    results.figure(fig, f"{key}_error_vs_float64")
    display(plots.table(table_rows(rows), TABLE_COLUMNS))
    return rows
