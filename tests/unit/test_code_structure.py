"""The package stays readable in pieces: no function under `shared/turnkeep/` over 100 lines,
no module over 700 (issue #29; docs/harness.md lists the step modules by phase).

The bounds are checked on the source's syntax tree, so a function counts from its `def` line
to its last line (its docstring and comments included, its decorators not)."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.lambda_host import ROOT

PACKAGE = ROOT / "shared" / "turnkeep"
MAX_FUNCTION_LINES = 100
MAX_MODULE_LINES = 700


def long_functions(source: str, limit: int) -> list[tuple[str, int]]:
    """(qualified name, lines) of every function or method in `source` longer than `limit`."""
    found: list[tuple[str, int]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    lines = (child.end_lineno or child.lineno) - child.lineno + 1
                    if lines > limit:
                        found.append((name, lines))
                visit(child, f"{name}.")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return found


def modules() -> list[Path]:
    paths = sorted(PACKAGE.rglob("*.py"))
    assert paths, f"no modules found under {PACKAGE}"
    return paths


def test_no_function_in_the_package_is_over_100_lines() -> None:
    over = [
        f"{path.relative_to(ROOT)}: {name} has {lines} lines"
        for path in modules()
        for name, lines in long_functions(path.read_text(encoding="utf-8"), MAX_FUNCTION_LINES)
    ]
    assert not over, "split these by phase (a named function each):\n" + "\n".join(over)


def test_no_module_in_the_package_is_over_700_lines() -> None:
    over = [
        f"{path.relative_to(ROOT)}: {count} lines"
        for path in modules()
        if (count := len(path.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES
    ]
    assert not over, "split these into smaller modules:\n" + "\n".join(over)


def test_the_check_finds_a_long_method_and_a_long_nested_function() -> None:
    body = "\n".join(f"        x{i} = {i}" for i in range(101))
    source = (
        "class Agent:\n"
        "    def __init__(self) -> None:\n"
        f"{body}\n"
        "def outer() -> None:\n"
        "    def inner() -> None:\n"
        f"{body}\n"
        "def short() -> None:\n"
        "    pass\n"
    )
    assert long_functions(source, MAX_FUNCTION_LINES) == [
        ("Agent.__init__", 102),
        ("outer", 103),
        ("outer.inner", 102),
    ]


def test_a_function_of_exactly_the_bound_passes_the_check() -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES - 1))
    assert long_functions(f"def f() -> None:\n{body}\n", MAX_FUNCTION_LINES) == []
