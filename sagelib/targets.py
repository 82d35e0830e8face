"""The open issues' speed targets, read against one recorded bench document.

Issues 4 and 6 state their speed targets as figures on the H200 (TOPS, a peer in the same run,
an anchor, a share of the copy bandwidth). :data:`TARGETS` spells each one out once, and
:func:`evaluate` reads them against a document of :mod:`sagelib.bench` (``sagelib bench --out``,
``scripts/bench_cuda.py``): the measured figure, the goal, how far apart, and the peer where the
target names one. ``sagelib targets`` prints it; notebook 03 draws it. A target whose case the
document did not measure says so instead of passing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sagelib import bench

#: SageAttention2's sm90 kernel alone at D128 N16384 (../shared/ANCHORS.md), the issue's kernel-only bar
SAGE2_SM90_KERNEL_ONLY_TOPS = 837.0


@dataclass(frozen=True)
class Target:
    """One speed target: ``backend`` in ``mode`` at ``shape`` (B:H:N:D) reaches ``goal``.

    ``kind`` says what the goal is: ``tops`` (at least ``goal`` TOPS), ``above_tops`` (strictly more than
    ``goal``, an anchor measured elsewhere), ``peer`` (at least ``peer``'s end-to-end TOPS in the same
    document) or ``copy_share`` (the quantizers together move at least ``goal`` of the copy bandwidth).
    """

    issue: int
    name: str
    backend: str
    mode: str
    shape: str
    causal: bool
    kind: str
    goal: float = 0.0
    peer: str = ""
    short: str = ""  #: a column heading for the history table (:func:`format_history`)


TARGETS: tuple[Target, ...] = (
    Target(4, "portable kernel, D128 N16384, end to end", "cuda-per-warp-fp16", "end_to_end", "2:32:16384:128", False,
           "tops", 550.0, short="portable"),
    Target(4, "quantizers together, D128 N16384", "", "", "2:32:16384:128", False, "copy_share", 0.70,
           short="quantizers"),
    Target(6, "Hopper kernel, D128 N16384, end to end", "cuda-sm90", "end_to_end", "2:32:16384:128", False,
           "tops", 1000.0, short="D128"),
    Target(6, "Hopper kernel, D128 N16384 causal, end to end", "cuda-sm90", "end_to_end", "2:32:16384:128", True,
           "tops", 900.0, short="causal"),
    Target(6, "Hopper kernel, D64 N16384, end to end", "cuda-sm90", "end_to_end", "2:32:16384:64", False,
           "tops", 650.0, short="D64"),
    Target(6, "Hopper kernel, N1024 B32 D128, end to end", "cuda-sm90", "end_to_end", "32:32:1024:128", False,
           "peer", peer="sdpa-cudnn", short="N1024"),
    Target(6, "Hopper kernel, D128 N16384, kernel only", "cuda-sm90", "kernel_only", "2:32:16384:128", False,
           "above_tops", SAGE2_SM90_KERNEL_ONLY_TOPS, short="kernel only"),
)


@dataclass(frozen=True)
class Status:
    """A target against one document: ``measured`` and ``goal`` in the target's unit (TOPS, or a share of
    the copy); ``met`` None when the document lacks the case (``missing`` says which)."""

    target: Target
    measured: float | None
    goal: float | None
    unit: str
    met: bool | None
    missing: str = ""
    note: str = ""  #: context the figure needs, e.g. the quantizers' share timed as Python calls

    @property
    def shortfall(self) -> float | None:
        """1 - measured / goal where missed (0.15: 15% short), 0 where met, None where not measured."""
        if self.met is None:
            return None
        return 0.0 if self.met else 1.0 - self.measured / self.goal


def _tops(document: dict, backend: str, mode: str, shape: str, causal: bool) -> float | None:
    case = bench.shape_case(bench.parse_shape(shape), causal)
    for record in document.get("records", []):
        if (record.get("backend"), record.get("mode")) == (backend, mode) and record.get("tops") \
                and record.get("dtype", "fp16") == "fp16" and bench.case_key(record) == case:
            return float(record["tops"])
    return None


def _copy_shares(document: dict, shape: str) -> tuple[float | None, float | None]:
    """The quantizers' share of the copy bandwidth at ``shape``: replayed from a CUDA graph (their GPU time, what
    the target is about: memory traffic), and timed as Python calls (host launch costs included); None where the
    document lacks it. Older documents without the graph figure give the call figure first."""
    quantizers = document.get("quantizers") or {}
    copy = quantizers.get("copy_tb_s")
    for row in quantizers.get("rows", []):
        if row.get("shape") == shape and row.get("what", "").startswith("all quantization") and copy:
            call, graph = float(row["tb_s"]) / float(copy), row.get("gpu_tb_s")
            return (float(graph) / float(copy), call) if graph else (call, None)
    return None, None


def evaluate(document: dict, targets: tuple[Target, ...] = TARGETS) -> list[Status]:
    """Each target against ``document`` (a sagelib.bench document), in the order of ``targets``."""
    statuses = []
    for t in targets:
        case = f"{t.backend} {t.mode} {t.shape}{' causal' if t.causal else ''}"
        if t.kind == "copy_share":
            share, call = _copy_shares(document, t.shape)
            statuses.append(Status(t, share, t.goal, "of copy", None if share is None else share >= t.goal,
                                   "" if share is not None else f"no 'all quantization' row at {t.shape}",
                                   f"GPU time; {call:.1%} timed as Python calls" if call is not None else ""))
            continue
        measured = _tops(document, t.backend, t.mode, t.shape, t.causal)
        goal = t.goal
        missing = "" if measured is not None else f"no {case} record"
        if t.kind == "peer":
            goal = _tops(document, t.peer, "end_to_end", t.shape, t.causal)
            if goal is None:
                missing = missing or f"no {t.peer} end_to_end {t.shape} record"
        elif t.kind not in ("tops", "above_tops"):
            raise ValueError(f"Target {t.name!r}: kind must be tops, above_tops, peer or copy_share, got {t.kind!r}")
        met = None
        if not missing:
            met = measured > goal if t.kind == "above_tops" else measured >= goal
        statuses.append(Status(t, measured, goal, "TOPS", met, missing))
    return statuses


def distinct(value: float, goal: float | None, percent: bool, min_digits: int = 1) -> str:
    """``value`` with ``min_digits`` decimals, or as many more (up to four) as it takes not to read as ``goal`` when
    it differs from it: a share of 69.96% against 70% is shown as 69.96%, not 70.0%."""
    for digits in range(min_digits, max(min_digits, 4) + 1):
        text = f"{value:.{digits}%}" if percent else f"{value:.{digits}f}"
        if goal is None or value == goal or text != (f"{goal:.{digits}%}" if percent else f"{goal:.{digits}f}"):
            return text
    return text


def format_table(statuses: list[Status]) -> str:
    """One line per target: issue, name, measured, goal, met or how far short."""
    lines = [f"{'issue':<6} {'target':<48} {'measured':>10} {'goal':>22}  status"]
    for s in statuses:
        def shown(value, goal=None):
            return "-" if value is None else distinct(value, goal, s.unit == "of copy")
        goal_text = shown(s.goal) + (f" ({s.target.peer})" if s.target.kind == "peer" else "")
        if s.met is None:
            status = f"not measured: {s.missing}"
        elif s.met:
            status = "met"
        else:
            status = f"missed, {s.shortfall:.0%} short" if s.shortfall >= 0.005 else f"missed, {s.shortfall:.2%} short"
        status += f" ({s.note})" if s.note else ""
        measured = shown(s.measured, s.goal)
        lines.append(f"{s.target.issue:<6} {s.target.name:<48} {measured:>10} {goal_text:>22}  {status}")
    return "\n".join(lines)


def source_tree(document: dict) -> str:
    """The source tree a bench document names (its environment's git commit, 12 characters); "" when none."""
    return str((document.get("environment") or {}).get("git_commit") or "")[:12]


@dataclass(frozen=True)
class Recording:
    """Where the targets stood in one recorded bench document (:func:`history`)."""

    path: Path
    created_utc: str
    tree: str  #: the source tree the document names ("" when it names none)
    statuses: tuple[Status, ...]


def history(directory: str | Path | None = None, targets: tuple[Target, ...] = TARGETS) -> list[Recording]:
    """Every recorded bench document that measured at least one target's case, oldest first (by created_utc):
    how the targets moved from recording to recording."""
    from sagelib import bench_records

    found = bench_records.load_all(bench_records.RESULTS_DIR if directory is None else directory)
    recordings = []
    for document, path in found:
        statuses = tuple(evaluate(document, targets))
        if any(s.met is not None for s in statuses):
            recordings.append(Recording(path, str(document.get("created_utc", "")), source_tree(document), statuses))
    return recordings


def format_history(recordings: list[Recording]) -> str:
    """One row per recording: when (UTC), which tree, each target's measured figure as a share of its goal (with *
    where it was met, - where the document did not measure it), and the file."""
    if not recordings:
        return "no recorded bench document measured a target's case"
    columns = [s.target.short or f"{s.target.issue}:{i}" for i, s in enumerate(recordings[0].statuses)]
    width = max(8, *(len(c) for c in columns))
    lines = ["each target's measured figure as a share of its goal; * met, - not measured",
             f"{'recorded (UTC)':<17} {'tree':<12} " + " ".join(f"{c:>{width}}" for c in columns) + "  file"]
    for r in recordings:
        cells = ["-" if s.met is None else distinct(s.measured / s.goal, 1.0, True) + ("*" if s.met else " ")
                 for s in r.statuses]
        lines.append(f"{r.created_utc[:16].replace('T', ' '):<17} {r.tree or '?':<12} "
                     + " ".join(f"{c:>{width}}" for c in cells) + f"  {r.path.name}")
    return "\n".join(lines)


def latest_document(directory: str | Path | None = None) -> tuple[dict | None, Path | None]:
    """The newest recorded bench document (by its created_utc) that measured every target's case; failing that,
    the newest that measured the most of them; (None, None) when none measured any."""
    from sagelib import bench_records

    found = bench_records.load_all(bench_records.RESULTS_DIR if directory is None else directory)
    scored = [(sum(s.met is not None for s in evaluate(doc)), i) for i, (doc, _) in enumerate(found)]
    best = max(scored, default=(0, -1))
    return found[best[1]] if best[0] > 0 else (None, None)
