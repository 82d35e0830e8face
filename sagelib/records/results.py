"""What a notebook measured, kept in one ``results.json`` that survives a crash.

A notebook makes one :class:`Results` and records through it:

    results = Results("00_contract", output_dir)
    results.headline("rel_l1_sm90", err, note="per_thread, fp32+fp32")
    results.add("error_budget", {"quantize_qk": 1e-4, ...})
    results.figure(fig, "error_budget")

A relative ``output_dir`` (the notebooks' interactive default,
``outputs/interactive/<NN_name>``) is taken from the repository root; the runner
passes an absolute one. Headline numbers are the few that the run's ``index.html`` shows in its table;
``add`` keeps everything else a reader or a later script may want. Every call
rewrites ``output_dir/results.json`` (atomically: a reader never sees half a
file), so whatever a notebook recorded before a failing cell is still there.

Values are turned into plain JSON on the way in: tensors and numpy arrays
become (nested) lists, numpy and tensor scalars become numbers, dataclasses
become dicts, paths become strings, and non-finite floats become the strings
``"NaN"``, ``"Infinity"``, ``"-Infinity"`` (JSON has no spelling for them).
Anything else is refused with a ValueError that names the key.
"""

from __future__ import annotations

import dataclasses
import enum
import json
import math
import os
import re
from pathlib import Path
from typing import Any

from sagelib import paths
from sagelib.errors import InputError
from sagelib.records.datafile import utc_stamp

RESULTS_FILE = "results.json"
FIGURES_DIR = "figures"
_FIGURE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def to_json(value: Any, key: str = "value") -> Any:
    """Return ``value`` as plain JSON data (dict, list, str, int, float, bool, None).

    ``key`` only names the value in the error raised for a type with no JSON form.
    """
    if value is None or isinstance(value, (bool, str, int)):
        return value
    if isinstance(value, float):
        return _finite_or_name(value)
    if isinstance(value, enum.Enum):
        return to_json(value.value, key)
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: to_json(getattr(value, f.name), f"{key}.{f.name}") for f in dataclasses.fields(value)}
    if isinstance(value, dict):
        return {str(k): to_json(v, f"{key}.{k}") for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_json(v, f"{key}[{i}]") for i, v in enumerate(value)]
    if isinstance(value, (set, frozenset)):
        return [to_json(v, key) for v in sorted(value, key=repr)]
    if hasattr(value, "tolist") and hasattr(value, "dtype"):
        # torch.Tensor, numpy.ndarray and numpy scalars. A reduced-precision
        # tensor (bf16, fp8) is widened first because not every dtype has tolist.
        if type(value).__module__.startswith("torch") and not value.dtype.is_complex:
            value = value.detach().cpu()
            if value.dtype.is_floating_point:
                value = value.double()
        return to_json(value.tolist(), key)
    if type(value).__module__ == "torch" and type(value).__name__ in ("dtype", "device"):
        return str(value)
    raise InputError(
        f"Results: {key} is a {type(value).__module__}.{type(value).__qualname__}, which has no JSON form; "
        "record numbers, strings, lists, dicts, tensors, numpy arrays, dataclasses or paths "
        "(convert it first, e.g. str(x) or float(x))"
    )


def _finite_or_name(x: float) -> float | str:
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    return x


def _from_repo_root(path: Path) -> Path:
    """A relative ``output_dir`` is taken from the repository root, where ``sagelib run``
    executes notebooks; so a notebook opened in JupyterLab (whose kernel starts in
    ``notebooks/``) writes to the same ``outputs/`` folder."""
    return path if path.is_absolute() else paths.REPO_ROOT / path


def _check_key(key: Any, what: str) -> str:
    if not isinstance(key, str) or not key.strip():
        raise InputError(f"Results.{what}: key must be a non-empty string, got {key!r}; "
                         "pass a short name like 'rel_l1'")
    return key


class Results:
    """The numbers, values and figures of one notebook run, mirrored to ``results.json``."""

    def __init__(self, notebook_name: str, output_dir: str | os.PathLike):
        if not isinstance(notebook_name, str) or not notebook_name.strip():
            raise InputError(
                f"Results: notebook_name must be a non-empty string, got {notebook_name!r}; "
                "pass the notebook's name, e.g. '00_contract'"
            )
        if not isinstance(output_dir, (str, os.PathLike)) or not os.fspath(output_dir):
            raise InputError(
                f"Results: output_dir must be a path, got {output_dir!r}; "
                "pass the notebook's output_dir parameter"
            )
        self.notebook_name = notebook_name
        self.output_dir = _from_repo_root(Path(output_dir))
        self._headlines: dict[str, dict[str, Any]] = {}
        self._values: dict[str, Any] = {}
        self._figures: dict[str, str] = {}
        self._write()

    @property
    def path(self) -> Path:
        """Where ``results.json`` is written."""
        return self.output_dir / RESULTS_FILE

    def headline(self, key: str, value: Any, unit: str = "", note: str = "") -> None:
        """Record one of the few numbers that sum the notebook up (shown in the run's index)."""
        _check_key(key, "headline")
        self._headlines[key] = {"value": to_json(value, key), "unit": str(unit), "note": str(note)}
        self._write()

    def add(self, key: str, value: Any) -> None:
        """Record any other JSON-able value under ``key`` (replacing an earlier one)."""
        _check_key(key, "add")
        self._values[key] = to_json(value, key)
        self._write()

    def figure(self, fig: Any, name: str, dpi: int = 100) -> Path:
        """Save a matplotlib figure as ``figures/<name>.png``, list it, and return its path.

        Inside a Jupyter kernel the saved PNG is shown in the notebook right here and the figure is closed, so
        the inline backend does not draw it a second time (each draw with a tight bounding box costs two renders;
        the figures were half of a notebook run's time). Elsewhere the figure is left open.
        """
        stem = name.removesuffix(".png") if isinstance(name, str) else ""
        if not _FIGURE_NAME.match(stem):
            raise InputError(
                f"Results.figure: name must be a file stem of letters, digits, '_', '-' or '.', got {name!r}; "
                "pass something like 'error_budget'"
            )
        if not hasattr(fig, "savefig"):
            raise InputError(
                f"Results.figure: fig must be a matplotlib Figure (something with savefig), "
                f"got {type(fig).__qualname__}; pass e.g. the fig from plt.subplots()"
            )
        path = self.output_dir / FIGURES_DIR / f"{stem}.png"
        path.parent.mkdir(parents=True, exist_ok=True)
        fig.savefig(path, dpi=dpi, bbox_inches="tight")
        self._figures[stem] = f"{FIGURES_DIR}/{stem}.png"
        self._write()
        _show_saved(fig, path)
        return path

    def as_dict(self) -> dict[str, Any]:
        """What ``results.json`` holds (a copy)."""
        return json.loads(json.dumps(self._document()))

    def _document(self) -> dict[str, Any]:
        return {
            "notebook": self.notebook_name,
            "updated_utc": utc_stamp(),
            "headlines": self._headlines,
            "values": self._values,
            "figures": [{"name": n, "path": p} for n, p in self._figures.items()],
        }

    def _write(self) -> None:
        self.output_dir.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_name(f".{RESULTS_FILE}.tmp")
        tmp.write_text(json.dumps(self._document(), indent=2, allow_nan=False) + "\n")
        os.replace(tmp, self.path)


def load_results(output_dir: str | os.PathLike) -> dict[str, Any] | None:
    """The ``results.json`` a notebook wrote into ``output_dir``, or None if it wrote none."""
    path = Path(output_dir) / RESULTS_FILE
    if not path.is_file():
        return None
    return json.loads(path.read_text())


def _show_saved(fig: Any, path: Path) -> None:
    """In a Jupyter kernel: display the PNG at ``path`` and close ``fig`` (the inline backend would redraw it)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None or getattr(shell, "kernel", None) is None:
        return
    import matplotlib.pyplot as plt
    from IPython.display import Image, display

    display(Image(filename=str(path)))
    plt.close(fig)
