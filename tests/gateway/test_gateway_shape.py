"""The gateway package stays in parts: the router small, no module large, and no import
circle among its modules (a part that needs the router gets a narrow interface)."""

from __future__ import annotations

import ast
from pathlib import Path

import hermes.gateway

PACKAGE = Path(hermes.gateway.__file__).parent


def imports() -> dict[str, set[str]]:
    """Each gateway module's imports of other gateway modules."""
    found = {}
    for path in PACKAGE.glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == "hermes.gateway":
                deps |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "hermes.gateway."
            ):
                deps.add(node.module.rsplit(".", 1)[1])
        found[path.stem] = deps
    return found


def test_no_import_circle_in_the_gateway():
    graph, done, circles = imports(), set(), []

    def visit(module: str, path: list[str]) -> None:
        if module in path:
            circles.append([*path[path.index(module) :], module])
            return
        if module in done:
            return
        for dep in graph.get(module, ()):
            visit(dep, [*path, module])
        done.add(module)

    for module in graph:
        visit(module, [])
    assert circles == []


def test_the_router_is_small_and_no_module_is_large():
    lines = {p.stem: len(p.read_text().splitlines()) for p in PACKAGE.glob("*.py")}
    assert lines["router"] < 330  # as ruff formats it (300 when tables were hand-laid)
    assert {m: n for m, n in lines.items() if n > 400} == {}
