"""A stdio MCP server whose process exits at once is reported as that: the process, its exit
status and the last lines of its standard error (which still reach ours), for a listing and for
a call alike, instead of the SDK's `error -32000: Connection closed`; and a process's first
exchange imports the SDK before its deadline starts."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.support.pantry import ROOT
from turnkeep import mcp_server
from turnkeep.mcp.source import McpServer
from turnkeep.tools.sources import ToolSourceError

ENV = {"PYTHONPATH": f"{ROOT / 'shared'}:{ROOT}"}


def _grocer(*extra: str) -> McpServer:
    args = ["-m", "tests.support.pantry.grocer", "--transport", "stdio", *extra]
    return mcp_server("grocer", command=sys.executable, args=args, cwd=str(ROOT), env=ENV)


def test_a_listing_of_a_stdio_server_that_exits_at_once_names_its_status_and_stderr(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(ToolSourceError) as caught:
        _grocer("--exit", "3").list_tools()

    message = str(caught.value)
    assert message.startswith("tool source 'grocer': cannot list its tools: ServerExited: the ")
    assert "server process (" in message
    assert "tests.support.pantry.grocer --transport stdio --exit 3) exited with status 3" in (
        message
    )
    assert message.endswith(
        "the last lines of its stderr: grocer: the price list is missing (exiting)"
    )
    assert "Connection closed" not in message
    assert "grocer: the price list is missing (exiting)" in capsys.readouterr().err


def test_a_call_of_a_stdio_server_that_exits_at_once_is_a_tool_error_saying_so() -> None:
    result = _grocer("--exit", "4").call("price", "grocer_price", {"item": "rice"})

    assert result.is_error
    assert result.content.startswith("Error: tool grocer_price failed (MCP server grocer): ")
    assert "exited with status 4; the last lines of its stderr: grocer: the price list" in (
        result.content
    )


def test_a_stdio_server_that_stays_up_lists_and_answers_as_before() -> None:
    grocer = _grocer()

    assert [t.name for t in grocer.list_tools()] == ["grocer_price", "grocer_stock"]
    assert grocer.call("price", "grocer_price", {"item": "rice"}).content == "rice: 2.50"


PROBE = """
import os
import subprocess
import sys
from turnkeep import mcp_server
from turnkeep.mcp import bridge

seen = []
original = bridge.run
def run(coroutine, deadline):
    seen.append("mcp" in sys.modules and "mcp.client.stdio" in sys.modules)
    return original(coroutine, deadline)
bridge.run = run
root = sys.argv[1]
source = mcp_server(
    "grocer", command=sys.executable, cwd=root, env={"PYTHONPATH": f"{root}/shared:{root}"},
    args=["-m", "tests.support.pantry.grocer", "--transport", "stdio"],
)
source.list_tools()
print(seen)
"""


def test_the_sdk_is_imported_before_a_listings_deadline_starts() -> None:
    """A process's first listing imports the `mcp` package (~0.5 s, more on a loaded machine):
    outside `list_timeout_seconds`, or a short limit fails the first listing of every process."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(ROOT)],
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'shared'}:{ROOT}"},
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[True]"
