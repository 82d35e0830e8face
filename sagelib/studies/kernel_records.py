"""Our built kernels' recorded kernel-only speed, against the bounds projected for their structure.

The bench recordings in ``data/results/`` (schema ``sagelib.bench/1``, written by
``sagelib bench --suite default`` or notebook 04) hold one record per backend, mode, shape and causal
flag. The Phase 1 notebook compares the ``kernel_only`` records of one call (B, H, N at the
notebook's head dims) with the projected floor and serial bounds of the structure the kernel
built (:mod:`sagelib.studies.unit_bounds`), and two geometries of one kernel with each other.
Figures come from one recording at a time: ratios across recordings would mix the card's drift.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sagelib.records import documents
from sagelib.studies.unit_bounds import FLOOR, SERIAL


@dataclass(frozen=True)
class Call:
    """The attention call the records are picked at: B, H, N (square) and the head dims wanted."""

    batch: int
    heads: int
    n_tokens: int
    head_dims: tuple[int, ...]

    def describe(self) -> str:
        return f"B={self.batch}, H={self.heads}, N={self.n_tokens}"


def kernel_only_records(document: dict, call: Call, backend: str = "cuda-sm90",
                        causal: tuple[bool, ...] = (False,)) -> list[dict]:
    """The ``kernel_only`` records of ``backend`` in ``document`` at ``call`` (failed ones left out)."""
    return [record for record in document.get("records", [])
            if (record["backend"], record["mode"]) == (backend, "kernel_only") and record["causal"] in causal
            and record.get("error") is None
            and (record["shape"]["batch"], record["shape"]["heads"], record["shape"]["seq_q"])
            == (call.batch, call.heads, call.n_tokens)
            and record["shape"]["head_dim"] in call.head_dims]


def newest_with(call: Call, backend: str, causal: tuple[bool, ...] = (False,),
                directory: str | Path = documents.RESULTS_DIR) -> tuple[dict | None, Path | None]:
    """The newest bench recording (any file) with kernel-only records of ``backend`` at ``call``, or (None, None)."""
    return next(((document, path) for document, path in reversed(documents.load_all(directory))
                 if kernel_only_records(document, call, backend, causal)), (None, None))


def against_projection(records: list[dict], projected: dict, conversion: str, ratio_to: str = "serial",
                       with_backend: bool = False) -> list[dict]:
    """Each record's TOPS beside its structure's projected bounds at its head dim.

    ``projected``: :func:`sagelib.studies.unit_bounds.projected_bounds` of the structure;
    ``conversion``: which score conversion the kernel uses ("cvt" or "float-bias");
    ``ratio_to``: the bound the measured TOPS are divided by ("serial" or "floor").
    """
    bound_key = {"serial": SERIAL, "floor": FLOOR}[ratio_to]
    rows = []
    for record in records:
        bound = projected[(record["shape"]["head_dim"], conversion)]
        rows.append({**({"backend": record["backend"]} if with_backend else {}),
                     "head_dim": record["shape"]["head_dim"], "measured kernel-only TOPS (recorded)": record["tops"],
                     SERIAL: bound[SERIAL], FLOOR: bound[FLOOR],
                     f"measured / {ratio_to}": record["tops"] / bound[bound_key]})
    return rows


def geometry_rows(document: dict, call: Call, preset: str = "cuda-sm90", other: str = "cuda-sm90-k64") -> list[dict]:
    """Two backends of one recording side by side, kernel only, per (head_dim, causal) both have."""
    def by_shape(backend):
        return {(r["shape"]["head_dim"], r["causal"]): r["tops"]
                for r in kernel_only_records(document, call, backend, (False, True))}

    two, three = by_shape(preset), by_shape(other)
    return [{"head_dim": d, "causal": causal, f"{preset}, 128-key steps": two[(d, causal)],
             f"{other}, 64-key steps": three[(d, causal)], "k64 / preset": three[(d, causal)] / two[(d, causal)]}
            for d, causal in sorted(set(two) & set(three))]


def recorded_tops(call: Call, head_dim: int, backend: str = "cuda-sm90",
                  directory: str | Path = documents.RESULTS_DIR) -> float | None:
    """The newest recorded kernel-only TOPS of ``backend`` at ``call`` and ``head_dim`` (non-causal), or None."""
    one = Call(call.batch, call.heads, call.n_tokens, (head_dim,))
    document, _ = newest_with(one, backend, directory=directory)
    records = kernel_only_records(document or {}, one, backend)
    return records[0]["tops"] if records else None
