"""sagelib.run.report: the notebook HTML, environment.json and the run's index.html."""

import json
import sys

import nbformat

from sagelib.run import report as run_report


def executed_notebook(path, code_marker="SECRET_SOURCE_LINE"):
    nb = nbformat.v4.new_notebook()
    cell = nbformat.v4.new_code_cell(f"{code_marker} = 1\nprint('visible output')")
    cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text="visible output\n")]
    nb.cells = [nbformat.v4.new_markdown_cell("# Title of the report"), cell]
    nbformat.write(nb, path)
    return path


def test_html_has_outputs_and_parameters_but_no_code(tmp_path):
    page = run_report.export_html(executed_notebook(tmp_path / "00_x.ipynb"), tmp_path / "00_x.html", "00_x",
                                  parameters={"n_tokens": 256, "output_dir": "/somewhere"}).read_text()
    assert "visible output" in page and "Title of the report" in page
    assert "SECRET_SOURCE_LINE" not in page
    assert "n_tokens = 256" in page and "/somewhere" not in page


def test_html_page_is_written_even_without_an_executed_notebook(tmp_path):
    page = run_report.export_html(tmp_path / "missing.ipynb", tmp_path / "00_x.html", "00_x",
                                  failure="NoSuchKernel: python3").read_text()
    assert "No executed notebook" in page and "NoSuchKernel: python3" in page


def test_environment_uses_provenance(tmp_path):
    record = run_report.write_environment(tmp_path, tmp_path)
    assert record["partial"] is False and "git_commit" in record and "torch" in record
    assert json.loads((tmp_path / "environment.json").read_text()) == record


def test_environment_falls_back_and_says_partial(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "sagelib.records.provenance", None)  # import now fails
    record = run_report.write_environment(tmp_path, tmp_path)
    assert record["partial"] is True and "sagelib.records.provenance" in record["partial_reason"]
    assert record["python"] == sys.version.split()[0] and "torch" in record and "git_commit" in record


def summary(tmp_path, **nb_fields):
    entry = {"name": "00_<x>", "status": "failed", "duration_s": 1.25, "parameters": {"n": 3, "output_dir": "o"},
             "folder": str(tmp_path / "00_x"), "ipynb": None, "html": str(tmp_path / "00_x" / "00_x.html"),
             "error": "ValueError: <bad> & worse", "cell": 2, "cell_source": "x = 1"}
    entry.update(nb_fields)
    return {"profile": "tiny", "started_utc": "2026-01-01T00:00:00Z", "finished_utc": "2026-01-01T00:00:02Z",
            "cell_timeout_s": 60, "overrides": {"n": 3}, "command": None, "notebooks": [entry],
            "failures": ["00_<x> failed in cell 2: ValueError: <bad> & worse"], "warnings": []}


def test_index_escapes_names_and_links_relative(tmp_path):
    (tmp_path / "00_x").mkdir()
    (tmp_path / "00_x" / "results.json").write_text(json.dumps(
        {"headlines": {"rel_l1": {"value": 0.000123456, "unit": "", "note": "a<b"}}}))
    index = run_report.write_run(tmp_path, summary(tmp_path), {"python": "3.11", "gpus": None,
                                                               "missing": {"gpus": "no GPU visible"}})
    page = index.read_text()
    assert "00_&lt;x&gt;" in page and "<x>" not in page and "&lt;bad&gt; &amp; worse" in page
    assert "href='00_x/00_x.html'" in page
    assert "rel_l1" in page and "0.0001235" in page and "a&lt;b" in page
    assert "no GPU visible" in page and "1 failed" in page and "<code>n=3</code>" in page
    run = json.loads((tmp_path / "run.json").read_text())
    assert run["notebooks"][0]["headlines"]["rel_l1"]["value"] == 0.000123456
    assert run["notebooks"][0]["results_file"] == str(tmp_path / "00_x" / "results.json")


def test_run_json_keeps_headlines_and_leaves_the_details_in_results_json(tmp_path):
    (tmp_path / "00_x").mkdir()
    details = {"sweep": [{"case": i, "error": [0.5] * 50} for i in range(200)]}  # ~100 KB of details
    (tmp_path / "00_x" / "results.json").write_text(json.dumps(
        {"headlines": {"rel_l1": {"value": 0.01, "unit": "", "note": ""}}, "values": details}))
    run_report.write_run(tmp_path, summary(tmp_path), {"python": "3.11"})
    text = (tmp_path / "run.json").read_text()
    assert len(text) < 5_000 and '"sweep"' not in text and '"rel_l1"' in text
    assert "rel_l1" in (tmp_path / "index.html").read_text()


def figure_notebook(path, n_figures=3):
    """An executed notebook as the workbook's look: markdown, a table, stderr, and figures as PNG outputs."""
    import base64
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_markdown_cell("# Report\n\nSome *text* with `code` and a [link](https://example.org).")]
    for i in range(n_figures):
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(range(100), [x * x for x in range(100)], marker="o")
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=100)
        plt.close(fig)
        cell = nbformat.v4.new_code_cell(f"draw({i})")
        cell.outputs = [
            nbformat.v4.new_output("stream", name="stderr", text="UserWarning: a warning\n"),
            nbformat.v4.new_output("display_data", {"image/png": base64.b64encode(buffer.getvalue()).decode(),
                                                    "text/plain": "<Figure>"}),
            nbformat.v4.new_output("display_data", {"text/html": "<table><tr><td>1</td></tr></table>",
                                                    "text/plain": "<HTML>"})]
        nb.cells.append(cell)
    nbformat.write(nb, path)
    return path


def test_notebook_report_is_self_contained_and_small(tmp_path):
    page = run_report.export_html(figure_notebook(tmp_path / "00_x.ipynb"), tmp_path / "00_x.html", "00_x",
                                  parameters={"n": 1}).read_text()
    assert run_report.external_resources(page) == []
    assert "<script" not in page and "cdn" not in page.lower()
    assert page.count("data:image/png;base64") == 3 and "https://example.org" in page  # a link is not a load
    assert len(page.encode()) < 150_000  # three figures and a few bytes of styling, not a framework


def test_report_figures_are_stored_with_a_palette_and_the_notebook_keeps_the_originals(tmp_path):
    import base64
    import io
    import re

    from PIL import Image

    ipynb = figure_notebook(tmp_path / "00_x.ipynb", n_figures=1)
    original = nbformat.read(ipynb, as_version=4).cells[1].outputs[1]["data"]["image/png"]
    page = run_report.export_html(ipynb, tmp_path / "00_x.html", "00_x").read_text()
    (shown,) = re.findall(r"data:image/png;base64,([A-Za-z0-9+/=]+)", page)
    assert Image.open(io.BytesIO(base64.b64decode(shown))).mode == "P" and len(shown) < len(original)
    assert Image.open(io.BytesIO(base64.b64decode(shown))).size == Image.open(
        io.BytesIO(base64.b64decode(original))).size
    assert nbformat.read(ipynb, as_version=4).cells[1].outputs[1]["data"]["image/png"] == original


def test_external_resources_finds_what_a_page_would_load():
    page = ("<html><head><script src='https://cdn.example/require.js'></script>"
            "<link rel='stylesheet' href='//fonts.example/x.css'><style>@import 'a.css'; "
            "p{background:url(https://x/y.png)} q{background:url(data:image/png;base64,AAAA)}</style></head>"
            "<body><img src='data:image/png;base64,AAAA'><a href='https://example.org'>ok</a>"
            "<img src='figures/a.png'></body></html>")
    found = run_report.external_resources(page)
    assert len(found) == 5, found
    assert any("require.js" in f for f in found) and any("fonts.example" in f for f in found)
    assert any("figures/a.png" in f for f in found) and any("@import" in f for f in found)
    assert not any("data:" in f or "example.org" in f for f in found)


def test_index_marks_a_partial_environment(tmp_path):
    page = run_report.index_html(tmp_path, summary(tmp_path, status="ok", error=None),
                                 {"partial": True, "partial_reason": "provenance missing", "python": "3.11"})
    assert "partial record" in page and "provenance missing" in page and "none recorded" in page
