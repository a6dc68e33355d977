"""The package layout tells the architecture: turnkeep's subpackages and root modules import
each other without cycles (docs/README architecture in the module docstrings)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "shared" / "turnkeep"


def _unit(path: Path) -> str:
    """The package-level unit a file belongs to: its subpackage, or the root module's name."""
    relative = path.relative_to(ROOT)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def import_graph() -> dict[str, set[str]]:
    """unit -> the other units it imports (any import in the file, deferred ones included)."""
    graph: dict[str, set[str]] = {}
    for path in ROOT.rglob("*.py"):
        unit = _unit(path)
        edges = graph.setdefault(unit, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names: list[str] = []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            elif isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            for name in names:
                parts = name.split(".")
                if parts[0] == "turnkeep" and len(parts) > 1 and parts[1] != unit:
                    edges.add(parts[1])
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    found: list[list[str]] = []

    def visit(node: str, path: list[str]) -> None:
        for nxt in sorted(graph.get(node, ())):
            if nxt == path[0]:
                found.append([*path, nxt])
            elif nxt not in path and nxt > path[0]:
                visit(nxt, [*path, nxt])

    for start in sorted(graph):
        visit(start, [start])
    return found


def test_turnkeeps_packages_and_root_modules_import_each_other_without_cycles() -> None:
    graph = import_graph()

    assert {"storage", "envelope", "harness", "providers", "api"} <= set(graph)
    assert _cycles(graph) == []


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
