"""The documents a newcomer reads: STATUS.md, then docs/README.md and the design pages it lists.

CPU only, no sagelib import. These tests keep the reading path from drifting away from the tree:
STATUS.md stays short, docs/README.md lists every design page, every repository path a page writes
in backticks exists in the tree the tests run in, and nothing still points at the retired notes/
diaries (their history is in git and EXPERIMENT_LOG.md).
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
STATUS = REPO / "STATUS.md"
DOCS = REPO / "docs"
DESIGN = DOCS / "design"
STATUS_MAX_LINES = 200
THIS_FILE = Path(__file__).resolve()

#: a backticked span with no whitespace; whether it names a path is decided by looks_like_path
_BACKTICKED = re.compile(r"`([^`\s]+)`")
_PATH_SUFFIXES = (".py", ".cu", ".cuh", ".md", ".json", ".yaml")
#: spans that are patterns or placeholders, not paths in the tree
_NOT_A_PATH = re.compile(r"[<>${}|=]|://|^-")
#: a result document's schema name, such as sagelib.bench/1
_SCHEMA_NAME = re.compile(r"^[a-z]+\.[\w-]+/\d+$")
#: trees the "notes/" check does not read: tools' and runs' folders, and the generated log view
_SKIPPED_DIRS = {".git", ".venv", "outputs", "build", ".peer", "node_modules", "__pycache__", ".ipynb_checkpoints"}
_NOTES_REFERENCE = re.compile(r"(?<![\w./-])notes/")


README = REPO / "README.md"


def documents() -> list[Path]:
    return [README, STATUS, *sorted(DOCS.rglob("*.md"))] if DOCS.is_dir() else [README, STATUS]


def looks_like_path(span: str) -> bool:
    if _NOT_A_PATH.search(span) or _SCHEMA_NAME.match(span):
        return False
    return "/" in span or span.endswith(_PATH_SUFFIXES)


def path_exists(span: str) -> bool:
    span = re.sub(r":\d+$", "", span.rstrip(".,;"))  # `file.py:12` names a line of file.py
    span = span.removeprefix("./")
    if "*" in span:
        return any(REPO.glob(span))
    return (REPO / span).exists()


def test_status_exists_and_is_short():
    assert STATUS.is_file(), "STATUS.md is missing at the repository root: it is the first page a newcomer reads"
    lines = STATUS.read_text(encoding="utf-8").splitlines()
    assert len(lines) < STATUS_MAX_LINES, (
        f"STATUS.md has {len(lines)} lines; keep it under {STATUS_MAX_LINES} and move detail to docs/design/")


def test_docs_readme_lists_every_design_page_and_each_exists():
    readme = DOCS / "README.md"
    assert readme.is_file(), "docs/README.md is missing: it lists the design pages in reading order"
    text = readme.read_text(encoding="utf-8")
    pages = sorted(p.name for p in DESIGN.glob("*.md"))
    assert pages, "docs/design/ holds no page"
    unlisted = [name for name in pages if f"design/{name}" not in text]
    assert not unlisted, f"docs/README.md does not list these pages of docs/design/: {unlisted}"
    linked = sorted(set(re.findall(r"design/([\w.-]+\.md)", text)))
    missing = [name for name in linked if not (DESIGN / name).is_file()]
    assert not missing, f"docs/README.md lists pages that do not exist in docs/design/: {missing}"


def test_backticked_paths_exist():
    missing = []
    for doc in documents():
        for number, line in enumerate(doc.read_text(encoding="utf-8").splitlines(), 1):
            for span in _BACKTICKED.findall(line):
                if looks_like_path(span) and not path_exists(span):
                    missing.append(f"{doc.relative_to(REPO)}:{number}: {span}")
    assert not missing, (
        "paths written in backticks that this tree does not have (rename them in the page, or add the file):\n"
        + "\n".join(missing))


def _text_files():
    for path in REPO.rglob("*"):
        if any(part in _SKIPPED_DIRS for part in path.relative_to(REPO).parts):
            continue
        if path.is_file() and path.suffix in {".md", ".py", ".sh", ".yaml", ".yml"} and path != THIS_FILE:
            yield path


def test_no_notes_directory_is_referenced():
    diaries = sorted(str(p.relative_to(REPO)) for p in (REPO / "notes").rglob("*") if p.is_file())
    assert not diaries, f"notes/ is back ({diaries}): design facts go to docs/design/, history to the log"
    found = []
    for path in _text_files():
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if _NOTES_REFERENCE.search(line):
                found.append(f"{path.relative_to(REPO)}:{number}: {line.strip()[:120]}")
    assert not found, "references to the retired notes/ diaries (point them to docs/design/):\n" + "\n".join(found)


#: what a README reader cannot follow: planning references and paths outside the repository
_INTERNAL = re.compile(r"\bissues?\s+#?\d|\bseq\s+\d|\.\./shared|`shared/|the development machines|wheelhouse carried",
                       re.I)


def test_readme_speaks_to_users_and_links_only_inside_the_repository():
    text = README.read_text(encoding="utf-8")
    found = [line.strip()[:100] for line in text.splitlines() if _INTERNAL.search(line)]
    assert not found, "README lines with planning words or paths outside the repository:\n" + "\n".join(found)
    for target in re.findall(r"\]\(([^)#]+)", text):  # markdown links: files of the repository only
        assert "://" not in target and (REPO / target).exists(), f"README links to {target}, not a file here"
    head = text[:text.index("## Use it")]
    assert "make run" in head and "make test" in head, "the two commands come first"
