"""The speed targets of our kernels, read against one recorded bench document.

Each target is a figure on the H200 (TOPS, a peer in the same run, an anchor, a share of the copy
bandwidth). :data:`TARGETS` spells each one out once, and
:func:`evaluate` reads them against a document of :mod:`sagelib.measure.bench` (``sagelib bench --out``,
``sagelib bench --suite default``): the measured figure, the goal, how far apart, and the peer where the
target names one. ``sagelib targets`` prints it; notebook 04 draws it. A target whose case the
document did not measure says so instead of passing.

A full bench sometimes reads one case as an outlier (a wide spread between its timed calls). Such a
case is re-measured at the same source tree, and the re-measure is kept beside the bench in
``data/results``. :func:`evaluate` takes those documents as ``remeasures``: for each target it
reads the recording whose timing spread (IQR over median) is the narrowest, the target's own record
and its peer's together, and says in the status's note which document that was and what the bench
itself read. :func:`remeasures_of` finds them: recorded documents at the same tree on the same card.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sagelib import inputs
from sagelib.errors import InputError
from sagelib.measure import bench

#: SageAttention2's sm90 kernel alone at D128 N16384, as published by the anchors of the project's start: the
#: kernel-only bar
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
    source: Path | None = None  #: the re-measure the figure comes from; None: the document evaluated

    @property
    def shortfall(self) -> float | None:
        """1 - measured / goal where missed (0.15: 15% short), 0 where met, None where not measured."""
        if self.met is None:
            return None
        return 0.0 if self.met else 1.0 - self.measured / self.goal


def _record(document: dict, backend: str, mode: str, shape: str, causal: bool) -> dict | None:
    """The fp16 record of ``backend`` in ``mode`` at ``shape`` with a TOPS figure, or None."""
    case = bench.shape_case(inputs.parse_shape(shape), causal)
    for record in document.get("records", []):
        if (record.get("backend"), record.get("mode")) == (backend, mode) and record.get("tops") \
                and record.get("dtype", "fp16") == "fp16" and bench.case_key(record) == case:
            return record
    return None


#: The real SageAttention2 kernel each of our backends is set beside (sagelib.backends.sage2).
SAGE2_PEER_OF = {"cuda-sm90": "sage2-sm90", "cuda-sm90-k64": "sage2-sm90", "cuda": "sage2-sm89",
                 "cuda-per-warp-fp16": "sage2-sm89-per-warp-fp16"}


def sage2_ratios(document: dict, statuses: list[Status]) -> list[str]:
    """One line per target of a backend with a SageAttention2 twin: our TOPS over the real kernel's, both
    end to end in ``document`` (the same run); a line saying so where the document lacks one of the two.
    Nothing when the run measured no SageAttention2 kernel at all."""
    if not any(str(r.get("backend", "")).startswith("sage2-") for r in document.get("records", [])):
        return []
    lines = []
    for s in statuses:
        t = s.target
        peer = SAGE2_PEER_OF.get(t.backend)
        if not peer or t.mode != "end_to_end":
            continue
        ours, theirs = _record(document, t.backend, t.mode, t.shape, t.causal), _record(
            document, peer, "end_to_end", t.shape, t.causal)
        if ours is None or theirs is None:
            missing = t.backend if ours is None else peer
            lines.append(f"{t.name:<48} {'-':>8}  (no {missing} end_to_end record in this run)")
        else:
            lines.append(f"{t.name:<48} {ours['tops'] / theirs['tops']:>7.3f}x  "
                         f"({ours['tops']:.1f} vs {peer} {theirs['tops']:.1f} TOPS)")
    return lines


def spread(record: dict) -> float:
    """A record's timing spread: its IQR over its median (0.002: 0.2%); infinite where the record has no stats."""
    stats = record.get("stats") or {}
    iqr, median = stats.get("iqr_ms"), stats.get("median_ms")
    return float(iqr) / float(median) if iqr is not None and median else float("inf")


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


def _tops_figures(document: dict, t: Target) -> tuple[float | None, float | None, str, float]:
    """``t``'s measured TOPS and goal in ``document``, what is missing ("" when nothing), and the wider timing
    spread of the records read (the target's own and, for a peer target, the peer's)."""
    case = f"{t.backend} {t.mode} {t.shape}{' causal' if t.causal else ''}"
    record = _record(document, t.backend, t.mode, t.shape, t.causal)
    measured = None if record is None else float(record["tops"])
    missing = "" if record is not None else f"no {case} record"
    goal, records = t.goal, [record]
    if t.kind == "peer":
        peer = _record(document, t.peer, "end_to_end", t.shape, t.causal)
        goal, records = (None if peer is None else float(peer["tops"])), [record, peer]
        if peer is None:
            missing = missing or f"no {t.peer} end_to_end {t.shape} record"
    elif t.kind not in ("tops", "above_tops"):
        raise InputError(f"Target {t.name!r}: kind must be tops, above_tops, peer or copy_share, got {t.kind!r}")
    return measured, goal, missing, max(spread(r) for r in records) if not missing else float("inf")


def _spread_text(value: float) -> str:
    return "no stats" if value == float("inf") else f"IQR {value:.1%} of the median"


def evaluate(document: dict, targets: tuple[Target, ...] = TARGETS,
             remeasures: tuple[tuple[dict, Path], ...] = ()) -> list[Status]:
    """Each target against ``document`` (a sagelib.measure.bench document), in the order of ``targets``.

    ``remeasures`` are (document, path) pairs of the same tree's re-measured cases (:func:`remeasures_of`). A TOPS
    target is read from the re-measure whose records (the target's and its peer's) have a narrower timing spread
    than the document's own, the narrowest first; its note names the file and what ``document`` read. The
    quantizers' share is always ``document``'s."""
    statuses = []
    for t in targets:
        if t.kind == "copy_share":
            share, call = _copy_shares(document, t.shape)
            statuses.append(Status(t, share, t.goal, "of copy", None if share is None else share >= t.goal,
                                   "" if share is not None else f"no 'all quantization' row at {t.shape}",
                                   f"GPU time; {call:.1%} timed as Python calls" if call is not None else ""))
            continue
        measured, goal, missing, own_spread = _tops_figures(document, t)
        note, source = "", None
        candidates = [(_tops_figures(doc, t), path) for doc, path in remeasures]
        candidates = [(figures, path) for figures, path in candidates if not figures[2]]
        if candidates:
            (r_measured, r_goal, _, r_spread), r_path = min(candidates, key=lambda c: c[0][3])
            if r_spread < own_spread:
                bench_read = "lacked the case" if missing else f"read {measured:.1f}, {_spread_text(own_spread)}"
                note = f"re-measured in {r_path.name}, {_spread_text(r_spread)}; the bench {bench_read}"
                measured, goal, missing, source = r_measured, r_goal, "", r_path
        met = None
        if not missing:
            met = measured > goal if t.kind == "above_tops" else measured >= goal
        statuses.append(Status(t, measured, goal, "TOPS", met, missing, note, source))
    return statuses


def remeasures_of(document: dict, path: Path | None, directory: str | Path | None = None
                  ) -> tuple[tuple[dict, Path], ...]:
    """The recorded bench documents in ``directory`` (default data/results) other than ``path`` that name the same
    source tree and card as ``document`` and measured at least one target's case: the candidates
    :func:`evaluate` may read a target from instead; none when ``document`` names no tree."""
    from sagelib.records import documents

    tree, card = source_tree(document), (document.get("device") or {}).get("name")
    if not tree:
        return ()
    found = documents.load_all(documents.RESULTS_DIR if directory is None else directory)
    return tuple((doc, p) for doc, p in found
                 if (path is None or p.resolve() != Path(path).resolve()) and source_tree(doc) == tree
                 and (doc.get("device") or {}).get("name") == card
                 and any(s.met is not None for s in evaluate(doc) if s.target.kind != "copy_share"))


def distinct(value: float, goal: float | None, percent: bool, min_digits: int = 1) -> str:
    """``value`` with ``min_digits`` decimals, or as many more (up to four) as it takes not to read as ``goal`` when
    it differs from it: a share of 69.96% against 70% is shown as 69.96%, not 70.0%."""
    for digits in range(min_digits, max(min_digits, 4) + 1):
        text = f"{value:.{digits}%}" if percent else f"{value:.{digits}f}"
        if goal is None or value == goal or text != (f"{goal:.{digits}%}" if percent else f"{goal:.{digits}f}"):
            return text
    return text


def format_table(statuses: list[Status]) -> str:
    """One line per target: name, measured, goal, met or how far short."""
    lines = [f"{'target':<48} {'measured':>10} {'goal':>22}  status"]
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
        lines.append(f"{s.target.name:<48} {measured:>10} {goal_text:>22}  {status}")
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

    @property
    def measured(self) -> int:
        """How many targets the document measured: all of them in a full bench, fewer in a notebook's run or a
        focused re-measure."""
        return sum(s.met is not None for s in self.statuses)


def history(directory: str | Path | None = None, targets: tuple[Target, ...] = TARGETS) -> list[Recording]:
    """Every recorded bench document that measured at least one target's case, oldest first (by created_utc):
    how the targets moved from recording to recording."""
    from sagelib.records import documents

    found = documents.load_all(documents.RESULTS_DIR if directory is None else directory)
    recordings = []
    for document, path in found:
        statuses = tuple(evaluate(document, targets))
        if any(s.met is not None for s in statuses):
            recordings.append(Recording(path, str(document.get("created_utc", "")), source_tree(document), statuses))
    return recordings


def format_history(recordings: list[Recording]) -> str:
    """One row per recording: when (UTC), which tree, each target's measured figure as a share of its goal (with *
    where it was met, - where the document did not measure it), how many targets it measured (a full bench
    measures all; a notebook's run or a focused re-measure fewer), and the file."""
    if not recordings:
        return "no recorded bench document measured a target's case"
    columns = [s.target.short or f"{s.target.issue}:{i}" for i, s in enumerate(recordings[0].statuses)]
    width = max(8, *(len(c) for c in columns))
    lines = ["each target's measured figure as a share of its goal; * met, - not measured",
             f"{'recorded (UTC)':<17} {'tree':<12} " + " ".join(f"{c:>{width}}" for c in columns)
             + f"  {'measured':>8}  file"]
    for r in recordings:
        cells = ["-" if s.met is None else distinct(s.measured / s.goal, 1.0, True) + ("*" if s.met else " ")
                 for s in r.statuses]
        lines.append(f"{r.created_utc[:16].replace('T', ' '):<17} {r.tree or '?':<12} "
                     + " ".join(f"{c:>{width}}" for c in cells)
                     + f"  {f'{r.measured}/{len(r.statuses)}':>8}  {r.path.name}")
    return "\n".join(lines)


def latest_document(directory: str | Path | None = None) -> tuple[dict | None, Path | None]:
    """The newest recorded bench document (by its created_utc) that measured every target's case; failing that,
    the newest that measured the most of them; (None, None) when none measured any."""
    from sagelib.records import documents

    found = documents.load_all(documents.RESULTS_DIR if directory is None else directory)
    scored = [(sum(s.met is not None for s in evaluate(doc)), i) for i, (doc, _) in enumerate(found)]
    best = max(scored, default=(0, -1))
    return found[best[1]] if best[0] > 0 else (None, None)
