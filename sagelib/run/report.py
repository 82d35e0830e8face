"""The files a run leaves for people: HTML reports, ``environment.json``, ``index.html``.

:func:`export_html` turns an executed notebook into a report without code
(inputs and prompts dropped, figures embedded), also for a notebook that failed
half-way; :func:`write_environment` records the machine beside the run;
:func:`write_run` writes ``run.json`` (machine-readable) and ``index.html`` (a
table of notebooks with status, duration, headline numbers and links, then the
environment). Everything here is plain files: the index opens from disk with
no server and no network.
"""

from __future__ import annotations

import html
import json
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

from sagelib.records.results import load_results, to_json

RUN_FILE = "run.json"
INDEX_FILE = "index.html"
ENVIRONMENT_FILE = "environment.json"


# --------------------------------------------------------------------------- notebook HTML


def export_html(ipynb: Path, target: Path, name: str, failure: str | None = None,
                parameters: dict[str, Any] | None = None) -> Path:
    """Write ``ipynb`` as an HTML report without code to ``target``.

    With the code hidden, a reader could not tell what the notebook ran on, so
    ``parameters`` (the values the runner injected) are listed at the top.
    Without an executed notebook (the kernel never started) or when the export
    itself fails, a short page saying so is written instead, so every notebook
    of a run has a report to link to.
    """
    if ipynb.is_file():
        try:
            target.write_text(_notebook_html(ipynb, name, parameters or {}), encoding="utf-8")
            return target
        except Exception as exc:  # a broken output must not cost the run its index
            failure = f"{failure + '; ' if failure else ''}HTML export failed: {type(exc).__name__}: {exc}"
    target.write_text(_page(name, f"<h1>{_e(name)}</h1><p class='failed'>No executed notebook to show. "
                                  f"{_e(failure or '')}</p>"), encoding="utf-8")
    return target


def _notebook_html(ipynb: Path, name: str, parameters: dict[str, Any]) -> str:
    import nbformat
    from nbconvert import HTMLExporter

    # The "basic" template gives the cells alone: no require.js, MathJax or mermaid from a CDN and none of
    # JupyterLab's 260 KB of CSS. The page around them (_page) carries the little styling the reports need,
    # so a report opens the same offline, behind a firewall or from an e-mail.
    exporter = HTMLExporter(
        template_name="basic",
        exclude_input=True,
        exclude_input_prompt=True,
        exclude_output_prompt=True,
        embed_images=True,
    )
    nb = nbformat.read(ipynb, as_version=4)
    _compact_images(nb)
    shown = {k: v for k, v in parameters.items() if k != "output_dir"}
    if shown:
        listing = ", ".join(f"`{k} = {_short(v)}`" for k, v in shown.items())
        nb.cells.insert(0, nbformat.v4.new_markdown_cell(f"*{name}, run with* {listing}"))
    body, _ = exporter.from_notebook_node(nb, resources={"metadata": {"name": name, "path": str(ipynb.parent)}})
    return _page(name, body, _NOTEBOOK_CSS)


# a report a reader opens from disk, offline: at most this many bytes per notebook at the cpu profile
HTML_SIZE_LIMIT = 1_000_000


def external_resources(page: str) -> list[str]:
    """What ``page`` would load from outside its own file: the ``src`` of any element, a ``<link>``'s ``href``,
    a CSS ``url(...)`` or ``@import`` that is not a ``data:`` URI or a fragment. Links a reader may follow
    (``<a href>``) are not loads. [] for a self-contained page."""
    import re
    from html.parser import HTMLParser

    def outside(ref: str) -> bool:
        ref = ref.strip().strip("'\"")
        return bool(ref) and not ref.startswith(("data:", "#"))

    found: list[str] = []

    class _Refs(HTMLParser):
        def handle_starttag(self, tag, attrs):
            for key, value in attrs:
                if value and (key == "src" or (tag == "link" and key == "href")) and outside(value):
                    found.append(f"<{tag} {key}={value}>")

    _Refs().feed(page)
    for style in re.findall(r"<style[^>]*>(.*?)</style>", page, flags=re.S | re.I):
        found += [f"css url({u})" for u in re.findall(r"url\(([^)]*)\)", style) if outside(u)]
        found += [f"css {m}" for m in re.findall(r"@import[^;]*", style)]
    return found


def _compact_images(nb) -> None:
    """Re-encode each PNG output of ``nb`` (in memory; the .ipynb keeps the originals) with a 256-colour palette.

    A chart has few colours: the palette keeps it looking the same at about a third of the bytes (a page of
    nine recorded-bench charts: 1.4 MB -> 0.5 MB), which keeps a report under HTML_SIZE_LIMIT. An image the
    palette would not shrink, or that cannot be read, is left as it was.
    """
    import base64
    import io

    try:
        from PIL import Image
    except ImportError:  # matplotlib needs Pillow, so this is only a guard
        return
    for cell in nb.cells:
        for output in cell.get("outputs", []):
            data = output.get("data") or {}
            if "image/png" not in data:
                continue
            try:
                raw = base64.b64decode(data["image/png"])
                image = Image.open(io.BytesIO(raw))
                palette = image.convert("RGB").quantize(colors=256, method=Image.Quantize.MEDIANCUT,
                                                        dither=Image.Dither.NONE)
                buffer = io.BytesIO()
                palette.save(buffer, "PNG", optimize=True)
            except Exception:
                continue
            if buffer.tell() < len(raw):
                data["image/png"] = base64.b64encode(buffer.getvalue()).decode("ascii")


# --------------------------------------------------------------------------- environment


def write_environment(folder: Path, repo_root: Path) -> dict[str, Any]:
    """Record the machine in ``folder/environment.json`` and return it.

    Uses :func:`sagelib.records.provenance.environment`; if that cannot be imported or
    fails, records what a few local probes find and marks the record partial.
    """
    try:
        from sagelib.records.provenance import environment, print_dirty_tree_hint

        record = dict(environment(repo_root))
        record["partial"] = False
        print_dirty_tree_hint(record)
    except Exception as exc:
        record = _fallback_environment(repo_root)
        record["partial"] = True
        record["partial_reason"] = f"sagelib.records.provenance.environment() unavailable: {type(exc).__name__}: {exc}"
    try:
        from sagelib.cuda.features import HOPPER_SETTING, hopper_switched_off

        record["hopper_paths"] = (f"off ({HOPPER_SETTING}=off)" if hopper_switched_off()
                                  else "on where the card has them (sm_90)")
    except Exception as exc:  # a bad value is refused before the run; never lose the record over it
        record["hopper_paths"] = f"unknown: {exc}"
    record = to_json(record, "environment")
    (folder / ENVIRONMENT_FILE).write_text(json.dumps(record, indent=2) + "\n")
    return record


def _fallback_environment(repo_root: Path) -> dict[str, Any]:
    record: dict[str, Any] = {"python": sys.version.split()[0], "platform": platform.platform()}
    try:
        import torch

        record["torch"] = torch.__version__
        record["cuda_available"] = torch.cuda.is_available()
    except Exception as exc:
        record["torch"] = None
        record["torch_error"] = f"{type(exc).__name__}: {exc}"
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo_root, capture_output=True, text=True, timeout=10)
        record["git_commit"] = done.stdout.strip() if done.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        record["git_commit"] = None
    return record


# --------------------------------------------------------------------------- run.json and index.html


def write_run(folder: Path, summary: dict[str, Any], environment: dict[str, Any]) -> Path:
    """Write ``run.json`` (the summary, with each notebook's headlines) and ``index.html``.

    run.json stays small: per notebook its status, time, parameters, files and headline numbers; the
    details (tables, sweeps, maps) stay in the notebook's own ``results.json``, which it names.
    """
    for entry in summary["notebooks"]:
        entry["results"] = load_results(entry["folder"])
    (folder / RUN_FILE).write_text(json.dumps(to_json(run_summary(summary), "run"), indent=2) + "\n")
    index = folder / INDEX_FILE
    index.write_text(index_html(folder, summary, environment), encoding="utf-8")
    return index


def run_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """``summary`` as run.json keeps it: each notebook's ``results`` replaced by its ``headlines`` and the path of
    its ``results.json`` (None where the notebook recorded nothing)."""
    notebooks = []
    for entry in summary["notebooks"]:
        entry = dict(entry)
        results = entry.pop("results", None) or {}
        entry["headlines"] = results.get("headlines") or {}
        entry["results_file"] = str(Path(entry["folder"]) / "results.json") if results else None
        notebooks.append(entry)
    return {**summary, "notebooks": notebooks}


def index_html(folder: Path, summary: dict[str, Any], environment: dict[str, Any]) -> str:
    """The run's index page: status table, failures, parameters, environment."""
    notebooks = summary["notebooks"]
    n_ok = sum(1 for nb in notebooks if nb["status"] == "ok")
    n_failed = len(notebooks) - n_ok
    title = f"sagelib run · {summary['profile']} · {summary['started_utc']}"
    parts = [f"<h1>sagelib run <span class='tag'>{_e(summary['profile'])} profile</span></h1>"]
    counts = f"{n_ok} ok" + (f", <b class='failed'>{n_failed} failed</b>" if n_failed else "")
    meta = [f"started {_e(summary['started_utc'])}, finished {_e(summary['finished_utc'])}",
            f"{len(notebooks)} notebook{'s' if len(notebooks) != 1 else ''}: {counts}",
            f"per-cell timeout {_e(summary['cell_timeout_s'])} s"]
    if summary.get("overrides"):
        meta.append("overrides " + ", ".join(f"<code>{_e(k)}={_e(_short(v))}</code>"
                                             for k, v in summary["overrides"].items()))
    if summary.get("command"):
        meta.append(f"<code>{_e(summary['command'])}</code>")
    parts.append("<p class='meta'>" + " · ".join(meta) + "</p>")
    for kind in ("failures", "warnings"):
        if summary.get(kind):
            items = "".join(f"<li>{_e(line)}</li>" for line in summary[kind])
            parts.append(f"<div class='box {kind}'><b>{kind.capitalize()}</b><ul>{items}</ul></div>")
    parts.append(_notebook_table(folder, notebooks))
    parts.append("<h2>Environment</h2>" + _environment_table(environment))
    return _page(title, "\n".join(parts))


def _notebook_table(folder: Path, notebooks: list[dict[str, Any]]) -> str:
    rows = []
    for nb in notebooks:
        link = _relative(nb.get("html"), folder)
        name = f"<a href='{_e(link)}'>{_e(nb['name'])}</a>" if link else _e(nb["name"])
        params = "".join(f"<tr><td>{_e(k)}</td><td><code>{_e(_short(v))}</code></td></tr>"
                         for k, v in nb["parameters"].items() if k != "output_dir")
        if params:
            name += f"<details><summary>parameters</summary><table class='kv'>{params}</table></details>"
        results = nb.get("results") or {}
        headlines = "".join(_headline(k, h) for k, h in (results.get("headlines") or {}).items())
        if not headlines:
            headlines = "<span class='dim'>none recorded</span>"
        if nb.get("error"):
            headlines += f"<div class='error'>{_e(nb['error'])}</div>"
        files = [(_relative(nb.get("ipynb"), folder), "notebook")]
        if results:
            files.append((_relative(str(Path(nb["folder"]) / "results.json"), folder), "results.json"))
        files_html = " · ".join(f"<a href='{_e(href)}'>{label}</a>" for href, label in files if href)
        rows.append(
            f"<tr><td>{name}</td><td class='{_e(nb['status'])}'>{_e(nb['status'])}</td>"
            f"<td class='num'>{nb['duration_s']:.1f} s</td><td>{headlines}</td><td>{files_html}</td></tr>"
        )
    head = "<tr><th>notebook</th><th>status</th><th>time</th><th>headline numbers</th><th>files</th></tr>"
    return f"<table class='runs'>{head}{''.join(rows)}</table>"


def _headline(key: str, item: dict[str, Any]) -> str:
    unit = f" {_e(item.get('unit'))}" if item.get("unit") else ""
    note = f" <span class='dim'>{_e(item['note'])}</span>" if item.get("note") else ""
    return (f"<div class='headline'><span class='key'>{_e(key)}</span> "
            f"<b>{_e(_short(item.get('value')))}</b>{unit}{note}</div>")


def _environment_table(environment: dict[str, Any]) -> str:
    missing = environment.get("missing") or {}
    rows = []
    if environment.get("partial"):
        rows.append("<tr><td>partial record</td><td class='failed'>"
                    f"{_e(environment.get('partial_reason', ''))}</td></tr>")
    for key, value in environment.items():
        if key in ("missing", "partial", "partial_reason"):
            continue
        shown = (_e(_short(value, 200)) if value is not None
                 else f"<span class='dim'>{_e(missing.get(key, 'unknown'))}</span>")
        rows.append(f"<tr><td>{_e(key)}</td><td>{shown}</td></tr>")
    return f"<table class='kv env'>{''.join(rows)}</table>"


def _short(value: Any, limit: int = 80) -> str:
    if isinstance(value, float):
        text = f"{value:.4g}"
    elif isinstance(value, str):
        text = value
    else:
        text = json.dumps(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _relative(path: str | None, folder: Path) -> str | None:
    if not path:
        return None
    try:
        return Path(path).resolve().relative_to(folder.resolve()).as_posix()
    except ValueError:
        return Path(path).resolve().as_uri()


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


_CSS = """
body{font:15px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2rem auto;\
max-width:72rem;padding:0 1rem;color:#1d2330}
h1{font-size:1.5rem;margin-bottom:.2rem} h2{font-size:1.15rem;margin-top:2rem}
.tag{font-size:.9rem;font-weight:500;background:#eef1f6;border-radius:4px;padding:.1rem .45rem;vertical-align:middle}
.meta{color:#566;margin-top:0} code{font:13px/1.3 ui-monospace,SFMono-Regular,Menlo,monospace}
table{border-collapse:collapse;width:100%} \
th,td{text-align:left;vertical-align:top;padding:.45rem .6rem;border-bottom:1px solid #e3e6ec}
th{background:#f6f7f9;font-weight:600} td.num{text-align:right;white-space:nowrap}
td.ok{color:#17803d;font-weight:600} td.failed,.failed{color:#b42318;font-weight:600}
.headline{margin:.1rem 0} .key{color:#445} .dim{color:#889;font-size:.9em}
.error{color:#b42318;font:13px/1.3 ui-monospace,monospace;margin-top:.3rem;white-space:pre-wrap}
.box{border-radius:6px;padding:.6rem .9rem;margin:1rem 0} .box ul{margin:.3rem 0 0;padding-left:1.2rem}
.failures{background:#fdecea;border:1px solid #f5c2bd} .warnings{background:#fff7e0;border:1px solid #f0d68a}
table.kv{width:auto} table.kv td{padding:.2rem .6rem;border:none} table.env td:first-child{color:#445}
details summary{cursor:pointer;color:#566;font-size:.9em}
"""


# what the cells of a notebook report need beyond _CSS: outputs in flow, figures scaled to the page,
# tables that scroll sideways rather than widen it, warnings set apart
_NOTEBOOK_CSS = """
.cell{margin:.4rem 0} .output_area img{max-width:100%;height:auto}
.output_html{overflow-x:auto} .output_html table{width:auto;font-size:13px}
.output_html td,.output_html th{padding:.25rem .5rem}
pre{font:13px/1.35 ui-monospace,SFMono-Regular,Menlo,monospace;white-space:pre-wrap;margin:.3rem 0}
.output_stderr pre{background:#fff7e0;padding:.3rem .5rem} .output_error pre{background:#fdecea;padding:.3rem .5rem}
a.anchor-link{display:none} blockquote{color:#445;border-left:3px solid #dde;margin-left:0;padding-left:.8rem}
"""


def _page(title: str, body: str, css: str = "") -> str:
    """A whole HTML page: everything it shows is in the file (no script, stylesheet or font from elsewhere)."""
    return (f"<!doctype html>\n<html lang='en'><head><meta charset='utf-8'><title>{_e(title)}</title>"
            f"<meta name='viewport' content='width=device-width, initial-scale=1'><style>{_CSS}{css}</style></head>"
            f"<body>\n{body}\n</body></html>\n")
