"""The package layout tells the architecture: turnkeep's subpackages and root modules import
each other without cycles, the entry points (`api`, `cli`, `aws_lambda`, `live`) sit on
`runtime` and on `events` (the event views), which sit on the engine, no entry point borrows
another's modules, and the root keeps only the modules several layers share."""

from __future__ import annotations

import ast
import functools
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2] / "shared" / "turnkeep"


def _unit(path: Path, root: Path = ROOT) -> str:
    """The package-level unit a file belongs to: its subpackage, or the root module's name."""
    relative = path.relative_to(root)
    return relative.parts[0] if len(relative.parts) > 1 else relative.stem


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    """unit -> the other units it imports (any import in the file, deferred ones included); a
    copy of its own for each caller."""
    return {unit: set(edges) for unit, edges in _parsed_graph(root).items()}


@functools.cache
def _parsed_graph(root: Path) -> dict[str, set[str]]:
    # Parsing the whole package takes seconds on a busy machine; the tests of one process all
    # read the same tree, so it is parsed once.
    graph: dict[str, set[str]] = {}
    for path in root.rglob("*.py"):
        unit = _unit(path, root)
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


ROOT_MODULES = {"__init__", "definition_errors", "session_ids", "system_prompt", "turn_rules"}
"""Shared by several layers: the definition error (agent, mcp), the session-id rule (storage,
envelope, api), the system-prompt fold (providers, notes, harness), the turn-id rule and the
turn-status set (harness, envelope, api, live, cli)."""
RULES = {"session_ids", "turn_rules", "definition_errors"}
"""The bottom room: rules every layer may read, which themselves read nothing of turnkeep."""
PLUMBING = {"plumbing"}
"""Clients, DynamoDB batches, credentials, SQLite's WAL switch: below the engine, reading
nothing of turnkeep."""
ENGINE = {
    "storage",
    "envelope",
    "providers",
    "attachments",
    "tools",
    "mcp",
    "notes",
    "agent",
    "spend",
    "harness",
    "telemetry",
}
VIEWS = {"events"}
"""The event views (turn status, event pages, each entry as an event): what `api` and `live`
both show, below both."""
ENTRY_POINTS = {"api", "cli", "aws_lambda", "live"}
"""`live`: the WebSocket API's routes, authorizer and the steps' pusher (on `events`)."""


def test_the_root_holds_only_the_shared_modules_and_the_packages() -> None:
    graph = import_graph()

    assert {unit for unit in graph if (ROOT / f"{unit}.py").is_file()} == ROOT_MODULES
    assert set(graph) - ROOT_MODULES == {*PLUMBING, *ENGINE, *VIEWS, "runtime", *ENTRY_POINTS}


def test_the_engine_never_imports_the_runtime_or_an_entry_point() -> None:
    graph = import_graph()

    for unit in ENGINE | ROOT_MODULES:
        assert graph[unit] & {"runtime", *VIEWS, *ENTRY_POINTS} == set(), unit
    assert graph["runtime"] & ENTRY_POINTS == set()
    assert not any("aws_lambda" in edges for edges in graph.values())  # only functions/ use it


def _reaching_up(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The bottom units (rules, plumbing) that import any of turnkeep, with what they import."""
    return {unit: graph[unit] for unit in sorted(RULES | PLUMBING) if graph.get(unit)}


def test_the_rules_modules_and_the_plumbing_import_nothing_of_turnkeep() -> None:
    assert _reaching_up(import_graph()) == {}


def test_the_bottom_rule_fails_for_a_rules_or_plumbing_module_importing_the_engine(
    tmp_path: Path,
) -> None:
    (tmp_path / "plumbing").mkdir()
    (tmp_path / "plumbing" / "x.py").write_text("from turnkeep.providers.base import ModelError\n")
    (tmp_path / "turn_rules.py").write_text("import turnkeep.harness.state\n")

    assert _reaching_up(import_graph(tmp_path)) == {
        "plumbing": {"providers"},
        "turn_rules": {"harness"},
    }


def test_the_engine_reads_the_plumbing_and_no_longer_keeps_its_own() -> None:
    graph = import_graph()

    assert {"storage", "envelope", "providers", "mcp", "live"} <= {
        unit for unit, edges in graph.items() if "plumbing" in edges
    }
    assert "agent" not in graph["mcp"]  # the definition error lives below both
    assert "providers" not in graph["mcp"]  # credentials are plumbing, not a model's


def test_the_event_views_sit_below_the_http_and_websocket_apis() -> None:
    graph = import_graph()

    assert graph["events"] & {"runtime", *ENTRY_POINTS} == set()
    assert "events" in graph["api"]
    assert "events" in graph["live"]


def _http_api_borrowers(graph: dict[str, set[str]]) -> set[str]:
    """The units that may never import `api` (the WebSocket API, the harness) but do."""
    return {unit for unit in ("live", "harness") if "api" in graph.get(unit, set())}


def test_the_websocket_api_and_the_harness_never_import_the_http_api() -> None:
    assert _http_api_borrowers(import_graph()) == set()


def test_the_layer_rule_fails_for_a_live_or_harness_module_importing_the_api(
    tmp_path: Path,
) -> None:
    for unit in ("live", "harness"):
        (tmp_path / unit).mkdir()
        (tmp_path / unit / "x.py").write_text("from turnkeep.api.views import session_view\n")

    assert _http_api_borrowers(import_graph(tmp_path)) == {"live", "harness"}


def test_shaping_a_commits_events_for_the_websocket_loads_neither_the_api_nor_fastapi() -> None:
    script = (
        "import sys\n"
        "from turnkeep.harness.live import Committed\n"
        "from turnkeep.live.push import event_messages\n"
        "from turnkeep.live.websocket import WebSocketRoutes\n"
        "from turnkeep.storage import Entry\n"
        "entry = Entry(id='a', parent_id=None, type='approval_requested', data={}, seq=2)\n"
        "shaped = event_messages(Committed('s', 'op', entries=(entry,)))\n"
        "assert b'approval_requested' in shaped[0][1], shaped\n"
        "print(sorted(m for m in sys.modules if m == 'fastapi' or m.startswith('turnkeep.api')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )

    assert done.stdout.strip() == "[]"


def test_telemetry_sits_on_the_providers_types_alone() -> None:
    # The harness calls it with its values; it never reaches back into the harness or storage.
    assert import_graph()["telemetry"] <= {"providers"}


def test_the_cycle_check_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == [["a", "b", "c", "a"]]
