"""sagelib.records.results: what a notebook records, mirrored to results.json on every call."""

import dataclasses
import json
import math
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from sagelib.records.results import Results, load_results, to_json  # noqa: E402


def read(results):
    return json.loads(results.path.read_text())


def test_every_call_rewrites_results_json(tmp_path):
    results = Results("00_demo", tmp_path / "nb")
    assert read(results)["notebook"] == "00_demo"  # written at once: a crash later still leaves a file
    assert read(results)["headlines"] == {}

    results.headline("rel_l1", 2.5e-4, unit="", note="sm90 per_thread")
    assert read(results)["headlines"] == {"rel_l1": {"value": 2.5e-4, "unit": "", "note": "sm90 per_thread"}}

    results.add("sweep", {"n": [64, 256], "err": [1.0, 2.0]})
    on_disk = read(results)
    assert on_disk["values"] == {"sweep": {"n": [64, 256], "err": [1.0, 2.0]}}
    assert on_disk["headlines"]["rel_l1"]["value"] == 2.5e-4  # earlier records kept

    results.headline("rel_l1", 3e-4, unit="ratio")  # same key replaces
    assert read(results)["headlines"]["rel_l1"] == {"value": 3e-4, "unit": "ratio", "note": ""}
    assert load_results(tmp_path / "nb") == read(results)
    assert not list((tmp_path / "nb").glob(".*tmp"))  # no temporary file left behind


def test_figure_is_saved_as_png_and_listed(tmp_path):
    results = Results("00_demo", tmp_path)
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    path = results.figure(fig, "error_budget")
    plt.close(fig)
    assert path == tmp_path / "figures" / "error_budget.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert read(results)["figures"] == [{"name": "error_budget", "path": "figures/error_budget.png"}]
    # a ".png" suffix is accepted and not doubled
    fig2, _ = plt.subplots()
    assert results.figure(fig2, "second.png").name == "second.png"
    plt.close(fig2)


@dataclasses.dataclass
class Config:
    preset: str
    blkq: int
    where: Path


def test_values_are_converted_to_plain_json():
    converted = to_json({
        "tensor": torch.tensor([[1.0, 2.0], [3.0, 4.0]]),
        "bf16": torch.tensor([1.5], dtype=torch.bfloat16),
        "int_scalar": torch.tensor(7),
        "array": np.arange(3, dtype=np.int64),
        "np_scalar": np.float32(0.5),
        "np_int": np.int16(-3),
        "dataclass": Config("sm90", 64, Path("/tmp/x")),
        "path": Path("a/b.png"),
        "tuple": (1, "two"),
        "dtype": torch.float16,
        "bad_floats": [math.nan, math.inf, -math.inf],
    })
    assert converted == {
        "tensor": [[1.0, 2.0], [3.0, 4.0]],
        "bf16": [1.5],
        "int_scalar": 7,
        "array": [0, 1, 2],
        "np_scalar": 0.5,
        "np_int": -3,
        "dataclass": {"preset": "sm90", "blkq": 64, "where": "/tmp/x"},
        "path": "a/b.png",
        "tuple": [1, "two"],
        "dtype": "torch.float16",
        "bad_floats": ["NaN", "Infinity", "-Infinity"],
    }
    json.dumps(converted, allow_nan=False)  # strictly valid JSON
    assert type(converted["np_scalar"]) is float and type(converted["np_int"]) is int


def test_recorded_inputs_are_not_modified(tmp_path):
    t = torch.tensor([1.0, 2.0])
    d = {"t": t, "n": [1, 2]}
    Results("00_demo", tmp_path).add("d", d)
    assert d["n"] == [1, 2] and d["t"] is t and t.tolist() == [1.0, 2.0]


def test_value_without_json_form_is_refused_naming_the_key(tmp_path):
    results = Results("00_demo", tmp_path)
    with pytest.raises(ValueError, match=r"sweep\.fn .*no JSON form"):
        results.add("sweep", {"fn": object()})
    assert read(results)["values"] == {}  # nothing half-recorded


@pytest.mark.parametrize("key", ["", "  ", None, 3])
def test_bad_keys_are_refused(tmp_path, key):
    results = Results("00_demo", tmp_path)
    with pytest.raises(ValueError, match="key must be a non-empty string"):
        results.headline(key, 1.0)


@pytest.mark.parametrize("name", ["", "../escape", "a/b", ".hidden"])
def test_bad_figure_names_are_refused(tmp_path, name):
    fig, _ = plt.subplots()
    with pytest.raises(ValueError, match="file stem"):
        Results("00_demo", tmp_path).figure(fig, name)
    plt.close(fig)


def test_figure_needs_a_figure(tmp_path):
    with pytest.raises(ValueError, match="matplotlib Figure"):
        Results("00_demo", tmp_path).figure([1, 2], "x")


@pytest.mark.parametrize("args", [("", "out"), ("00_demo", ""), (None, "out")])
def test_constructor_checks_its_arguments(tmp_path, args):
    with pytest.raises(ValueError):
        Results(*args)


def test_load_results_of_a_folder_without_results(tmp_path):
    assert load_results(tmp_path) is None


def test_relative_output_dir_is_taken_from_the_repository_root(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # as a JupyterLab kernel started in notebooks/ would be elsewhere
    repo = Path(__file__).resolve().parent.parent
    results = Results("00_demo", "outputs/interactive/test_results_relative")
    try:
        assert results.path == repo / "outputs" / "interactive" / "test_results_relative" / "results.json"
        assert results.path.is_file() and not (tmp_path / "outputs").exists()
    finally:
        results.path.unlink()
        results.path.parent.rmdir()


def test_in_a_kernel_a_figure_is_shown_once_from_its_file_and_closed(tmp_path, monkeypatch):
    """Inside a Jupyter kernel the saved PNG is displayed and the figure closed, so the inline backend does not
    draw it again; outside one (here, plain pytest) the figure stays open."""
    import IPython
    import IPython.display
    import matplotlib.pyplot as plt

    shown = []
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    Results("00_demo", tmp_path).figure(fig, "outside")
    assert plt.fignum_exists(fig.number)

    monkeypatch.setattr(IPython, "get_ipython", lambda: type("Shell", (), {"kernel": object()})())
    monkeypatch.setattr(IPython.display, "display", lambda obj: shown.append(obj))
    path = Results("00_demo", tmp_path).figure(fig, "inside")
    assert not plt.fignum_exists(fig.number)
    assert len(shown) == 1 and shown[0].data == path.read_bytes()
