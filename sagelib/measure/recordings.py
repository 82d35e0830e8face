"""Recorded GPU results in ``data/results/``: choosing a sweep, saving it, finding the latest.

A benchmark measured on a GPU host is saved as JSON with its provenance (the document of
:func:`sagelib.measure.bench.run_sweep`, or an ncu document from :func:`profile_backends`), so a reader
on a machine without a GPU sees real, dated numbers, always labelled as recorded rather than
measured now. This module is the notebooks' side of that: build a sweep from notebook
parameters, skip (and name) backends that cannot run here, write results, and find the most
recent recording with a banner that says when, on what card, from which commit.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from sagelib import inputs, paths
from sagelib.errors import InputError
from sagelib.measure import bench, timing
from sagelib.records import documents, provenance
from sagelib.records.datafile import utc_stamp
from sagelib.records.documents import RESULTS_DIR, load_all, resolve, write_json

REPO_ROOT = paths.REPO_ROOT
NCU_SCHEMA = documents.NCU.id


def usable_backends(names) -> tuple[list[str], dict[str, str]]:
    """Split ``names`` into those that can run here and name -> reason for the others."""
    from sagelib import backends

    usable, skipped = [], {}
    for name in names:
        try:
            reason = backends.get(name, require_available=False).unavailable_reason()
        except ValueError as exc:  # unknown name
            reason = str(exc)
        except Exception as exc:  # a backend module that fails to import is a reason too
            reason = f"failed to load: {type(exc).__name__}: {exc}"
        if reason is None:
            usable.append(name)
        else:
            skipped[name] = reason
    return usable, skipped


def curve_plan(backends, *, head_dims, seq_lens, tokens: int, heads: int, causal_modes, dtype: str = "fp16",
               reps: int = 20, budget_s: float = 0.5, kernel_only: bool = True,
               cooldown_s: float = 0.0) -> bench.SweepPlan:
    """TOPS against N at a fixed token count (B = tokens // N, at least 1), every head_dim; ``cooldown_s`` as
    :class:`sagelib.measure.bench.TimingConfig`'s."""
    if not seq_lens or not head_dims:
        raise InputError("curve_plan: seq_lens and head_dims must be non-empty lists, e.g. [1024, 4096] and [128]")
    shapes = [inputs.Shape(max(1, tokens // n), heads, n, d) for d in head_dims for n in seq_lens]
    config = timing.TimingConfig(warmup=3, reps=reps, min_reps=min(5, reps), budget_s=budget_s, cooldown_s=cooldown_s)
    return bench.SweepPlan(backends=list(backends), shapes=shapes, causal=list(causal_modes), dtype=dtype,
                           kernel_only=kernel_only, timing=config)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "-", text).strip("-").lower() or "unknown"


def save(document: dict, directory: str | Path = RESULTS_DIR, *, stem: str = "bench") -> Path:
    """Write ``document`` as ``<date>-<card>-<stem>.json`` in ``directory``; returns the path."""
    directory = resolve(directory)
    directory.mkdir(parents=True, exist_ok=True)
    created = document.get("created_utc") or utc_stamp()
    card = (document.get("device") or {}).get("name", "unknown")
    return write_json(document, directory / f"{created[:10]}-{_slug(card)}-{stem}.json")


QUANT_SCHEMA = documents.QUANTIZERS.id


@dataclass
class QuantizerRecording:
    """Quantizer figures found in data/results: ``copy_tb_s`` and ``rows`` as quant_bench measures them."""
    copy_tb_s: float
    rows: list
    created_utc: str
    card: str
    commit: str
    path: Path


def latest_quantizers(directory: str | Path = RESULTS_DIR) -> QuantizerRecording | None:
    """The newest recorded quantizer figures, from a quantizer recording or a bench document's
    ``quantizers`` (`sagelib bench --suite`, a GPU run of notebook 04); None if there are none."""
    found = []
    for document, path in load_all(directory, (QUANT_SCHEMA, bench.SCHEMA)):
        figures = document if document.get("schema") == QUANT_SCHEMA else document.get("quantizers")
        if isinstance(figures, dict) and figures.get("rows") and figures.get("copy_tb_s"):
            found.append(QuantizerRecording(
                figures["copy_tb_s"], figures["rows"], document.get("created_utc", ""),
                (document.get("device") or {}).get("name", "unknown card"),
                (document.get("environment") or {}).get("git_commit") or "unknown commit", path))
    return max(found, key=lambda r: r.created_utc, default=None)


def recorded_banner(document: dict | None, path: Path | None, reason_not_measured: str) -> str:
    """Markdown that says nothing was measured now, and what the recording shown is."""
    lines = [f"**Nothing was measured in this run:** {reason_not_measured}."]
    if document is None:
        lines.append("No recorded GPU results were found either, so there is nothing to show.")
        return "\n\n".join(lines)
    env = document.get("environment") or {}
    device = document.get("device") or {}
    commit = env.get("git_commit") or "unknown commit"
    dirty = " (with uncommitted changes)" if env.get("git_dirty") else ""
    where = path.relative_to(REPO_ROOT) if path and path.is_relative_to(REPO_ROOT) else path
    lines.append(
        f"**Shown below: recorded results**, measured {document.get('created_utc', 'at an unknown time')} "
        f"on {device.get('name', 'an unknown device')} (driver {env.get('driver', '?')}, "
        f"CUDA {env.get('cuda_runtime', '?')}, "
        f"torch {env.get('torch', '?')}), source commit {commit}{dirty}; file `{where}`."
    )
    if document.get("command"):
        lines.append(f"Recorded with: `{document['command']}`")
    lines += [f"Note on this recording: {note}" for note in document.get("annotations", [])]
    return "\n\n".join(lines)


def why_not_live(device: str) -> str | None:
    """None when this run can measure on ``device``; otherwise the reason it cannot."""
    import torch

    if device == "cpu":
        return "the notebook was run with device='cpu'"
    if device != "cuda":
        return f"device={device!r} is not 'cuda' or 'cpu'"
    if not torch.cuda.is_available():
        return f"torch {torch.__version__} sees no CUDA GPU on this machine"
    return None


def profile_backends(names, shape: str, *, causal: bool, mode: str = "end_to_end", dtype: str = "fp16",
                     log_dir: str | Path, launch_count: int = 8) -> dict:
    """ncu on one call of each backend; a JSON document (:data:`NCU_SCHEMA`) with provenance."""
    import dataclasses

    import torch

    from sagelib.measure import ncu, profiling

    log_dir = Path(log_dir)
    profiles = []
    for name in names:
        program = profiling.launch_command(name, shape, causal=causal, dtype=dtype, mode=mode)
        csv_path = log_dir / f"ncu-{_slug(name)}.csv"
        report = ncu.ncu_profile(program, log_file=csv_path, launch_count=launch_count)
        profile = {"backend": name, "shape": shape, "causal": causal, "mode": mode, "dtype": dtype,
                   "csv": str(csv_path), **dataclasses.asdict(report)}
        for kernel in profile["kernels"]:  # the digest stays; the ~1200 raw metrics stay in the CSV
            kernel["metrics_in_csv"] = len(kernel.pop("metrics"))
        profiles.append(profile)
    ncu = profiling.tool_status("ncu")
    return {
        "schema": NCU_SCHEMA,
        "created_utc": utc_stamp(),
        "tool": {"ncu": ncu.version, "path": ncu.path, "reason": ncu.reason, "clock_control": "none"},
        "device": (bench.device_summary(torch.device("cuda")) if torch.cuda.is_available()
                   else {"type": "cpu", "name": "cpu"}),
        "environment": provenance.environment_or_reason(),
        "profiles": profiles,
    }


def ncu_rows(document: dict) -> list[dict]:
    """One row per profiled kernel: backend, short kernel name, and the digest figures."""
    rows = []
    for profile in document.get("profiles", []):
        if not profile.get("kernels"):
            rows.append({"backend": profile["backend"], "kernel": f"(none: {profile.get('reason')})"})
            continue
        for kernel in profile["kernels"]:
            s = kernel.get("summary", {})
            duration = s.get("duration") or {}
            rows.append({
                "backend": profile["backend"],
                "kernel": short_kernel_name(kernel.get("name") or "?"),
                "duration": f"{duration.get('value')} {duration.get('unit', '')}".strip() if duration else None,
                "registers": s.get("registers_per_thread"),
                "occupancy %": s.get("achieved_occupancy_pct"),
                "tensor pipe %": s.get("tensor_pipe_pct_max"),
                "DRAM %": s.get("dram_throughput_pct"),
                "local bytes": s.get("local_memory_bytes"),
                "smem conflicts": s.get("smem_bank_conflicts"),
                "smem wavefronts": s.get("smem_wavefronts"),
                "top stall": next(iter(s.get("issue_stalls") or {}), None),
            })
    return rows


def short_kernel_name(name: str, limit: int = 48) -> str:
    """``void ns::flash_fwd_kernel<Traits<...>>(Params)`` -> ``flash_fwd_kernel``."""
    base = re.sub(r"\(.*$", "", name)
    depth, cut = 0, []
    for ch in base:
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif depth == 0:
            cut.append(ch)
    text = "".join(cut).split()[-1] if "".join(cut).split() else name
    return text.split("::")[-1][:limit]


def markdown_table(rows: list[dict]) -> str:
    """A markdown table of ``rows`` (dicts sharing keys); floats to 4 significant digits."""
    if not rows:
        return "(nothing to show)"
    keys = list(dict.fromkeys(k for row in rows for k in row))
    fmt = lambda v: f"{v:.4g}" if isinstance(v, float) else ("" if v is None else str(v))  # noqa: E731
    lines = ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    lines += ["| " + " | ".join(fmt(row.get(k)).replace("|", "\\|") for k in keys) + " |" for row in rows]
    return "\n".join(lines)


def headline_figures(document: dict, *, head_dim: int = 128, seq_len: int = 16384) -> dict[str, float]:
    """TOPS of every backend (and kernel-only) on one reference case: head_dim 128, N=16384,
    non-causal when measured, else the longest non-causal N of that head_dim in the document."""
    timed = [r for r in document.get("records", []) if r.get("tops") and not r.get("error")]
    pool = [r for r in timed if r["shape"]["head_dim"] == head_dim and not r["causal"]] or timed
    if not pool:
        return {}
    lengths = {r["shape"]["seq_q"] for r in pool}
    n = seq_len if seq_len in lengths else max(lengths)
    d = pool[0]["shape"]["head_dim"]
    return {f"tops_{r['backend']}{'' if r['mode'] == 'end_to_end' else '_kernel_only'}_d{d}_n{n}": r["tops"]
            for r in pool if r["shape"]["seq_q"] == n}
