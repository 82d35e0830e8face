"""The import structure of sagelib: layers that only look down, no import circles, modules one concern long.

What each package may import is the architecture a newcomer reads in docs/README.md; this test holds the
code to it, counting function-local imports too (they hide an arrow, they do not remove it).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "sagelib"

#: lowest first; a module may import from its own layer and the layers below it
LAYERS = (
    ("sagelib.errors", "sagelib.paths"),
    ("sagelib.contract", "sagelib.inputs"),
    ("sagelib.cuda",),
    ("sagelib.records",),
    ("sagelib.backends",),
    ("sagelib.ops",),
    ("sagelib.measure",),
    ("sagelib.studies",),
    ("sagelib.run",),
    ("sagelib.commands",),
    ("sagelib.cli", "sagelib.__main__", "sagelib"),
)
#: imports that run from a lower layer to a higher one, each with its reason (the issue allows at most one)
UPWARD_ALLOWED: dict[tuple[str, str], str] = {}
MAX_LINES = 400


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports_of(path: Path, known: set[str]) -> set[str]:
    """The sagelib modules ``path`` imports anywhere in its body (``from pkg import module`` names the module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.startswith("sagelib"))
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("sagelib"):
            for alias in node.names:
                sub = f"{node.module}.{alias.name}"
                found.add(sub if sub in known else node.module)
    return found


def graph() -> dict[str, set[str]]:
    mods = modules()
    return {name: imports_of(path, set(mods)) - {name} for name, path in mods.items()}


def layer_of(module: str) -> int:
    best = None
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if module == prefix or module.startswith(prefix + "."):
                if best is None or len(prefix) > best[1]:
                    best = (index, len(prefix))
    assert best is not None, f"{module} belongs to no layer: add it to LAYERS"
    return best[0]


def third_party(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return {m for m in found if m not in sys.stdlib_module_names and m not in ("sagelib", "__future__")}


def test_no_import_circles():
    edges = graph()
    circles, state = [], {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in edges:
                continue
            if state.get(nxt) == "open":
                circles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
            elif nxt not in state:
                visit(nxt, stack)
        stack.pop()
        state[node] = "done"

    for node in sorted(edges):
        if node not in state:
            visit(node, [])
    # a package's __init__ that hands on names of its own modules is not a circle of meaning
    circles = [c for c in circles if not _through_own_init(c)]
    assert not circles, "import circles:\n" + "\n".join(circles)


def _through_own_init(circle: str) -> bool:
    names = circle.split(" -> ")
    return any(b.startswith(a + ".") or a.startswith(b + ".") for a, b in zip(names, names[1:]))


def test_layers_only_look_down():
    upward = []
    for module, targets in graph().items():
        for target in targets:
            if layer_of(target) > layer_of(module) and (module, target) not in UPWARD_ALLOWED:
                upward.append(f"{module} -> {target}")
    assert not upward, "imports from a lower layer to a higher one (see LAYERS):\n" + "\n".join(sorted(upward))
    assert len(UPWARD_ALLOWED) <= 1


def test_the_loader_knows_nothing_of_the_contract_backends_or_measurement():
    edges = graph()
    bad = sorted(f"{m} -> {t}" for m, ts in edges.items() if m.startswith("sagelib.cuda") for t in ts
                 if t.startswith(("sagelib.contract", "sagelib.backends", "sagelib.measure", "sagelib.studies")))
    assert not bad, "\n".join(bad)


def test_the_contract_imports_only_itself_and_torch():
    edges = graph()
    bad = sorted(f"{m} -> {t}" for m, ts in edges.items() if m.startswith("sagelib.contract") for t in ts
                 if not t.startswith("sagelib.contract"))
    assert not bad, "\n".join(bad)
    foreign = {str(p.relative_to(PACKAGE.parent)): third_party(p) - {"torch"}
               for name, p in modules().items() if name.startswith("sagelib.contract")}
    assert not {k: v for k, v in foreign.items() if v}, foreign


@pytest.mark.parametrize("path", sorted(PACKAGE.rglob("*.py")), ids=lambda p: str(p.relative_to(PACKAGE.parent)))
def test_modules_stay_one_concern_long(path):
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, f"{path.relative_to(PACKAGE.parent)} has {lines} lines; split it by concern"


def test_the_checks_can_fail():
    # the graph sees function-local imports and ``from package import module``
    assert "sagelib.contract.pipeline" in graph()["sagelib.contract"]
    assert layer_of("sagelib.cli") > layer_of("sagelib.commands.run") > layer_of("sagelib.contract.pipeline")
