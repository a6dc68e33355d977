"""The package layout tells the architecture: turnkeep's subpackages and root modules import
each other without cycles, the entry points (`api`, `cli`, `aws_lambda`, `live`) sit on
`runtime`, which sits on the engine, and the root keeps only the modules several layers
share."""

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
            if isinstance(node, ast.ImportFrom) and node.module == "turnkeep" and node.level == 0:
                names = [f"turnkeep.{alias.name}" for alias in node.names]  # from turnkeep import x
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
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


ROOT_MODULES = {"__init__", "aws_clients", "session_ids", "system_prompt", "turn_rules"}
"""Shared by several layers: the AWS client cache (storage, envelope, aws_lambda), the
session-id rule (storage, envelope, api), the system-prompt fold (providers, notes, harness),
the turn-id rule and the turn-status set (harness, envelope, api, live, cli)."""
RULES = {"session_ids", "turn_rules"}
"""The bottom room: rules every layer may read, which themselves read nothing of turnkeep."""
ENGINE = {"storage", "envelope", "providers", "tools", "mcp", "notes", "agent", "harness"}
ENTRY_POINTS = {"api", "cli", "aws_lambda", "live"}
"""`live`: the WebSocket API's routes, authorizer and the steps' pusher (on `api`'s read models)."""


def test_the_root_holds_only_the_shared_modules_and_the_packages() -> None:
    graph = import_graph()

    assert {unit for unit in graph if (ROOT / f"{unit}.py").is_file()} == ROOT_MODULES
    assert set(graph) - ROOT_MODULES == {*ENGINE, "runtime", *ENTRY_POINTS}


def test_the_engine_never_imports_the_runtime_or_an_entry_point() -> None:
    graph = import_graph()

    for unit in ENGINE | ROOT_MODULES:
        assert graph[unit] & {"runtime", *ENTRY_POINTS} == set(), unit
    assert graph["runtime"] & ENTRY_POINTS == set()
    assert not any("aws_lambda" in edges for edges in graph.values())  # only functions/ use it


def test_the_rules_modules_import_nothing_of_turnkeep() -> None:
    graph = import_graph()

    for unit in RULES:
        assert graph[unit] == set(), unit


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
