"""The release assistant's docs MCP server, run as its documented commands (HTTP and stdio)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from turnkeep.mcp import mcp_server
from turnkeep.tools.base import ToolContext
from turnkeep.tools.registry import ToolRegistry

ROOT = Path(__file__).resolve().parents[2]
MODULE = "turnkeep_agents.release_assistant.docs_server"
CTX = ToolContext("s1", "u1", "op1", "call1")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT / "shared")}


def test_the_docs_server_serves_streamable_http_on_the_port_it_prints() -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", MODULE, "--port", "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        cwd=ROOT,
    )
    try:
        assert process.stdout is not None
        line = process.stdout.readline().strip()
        assert line.startswith("docs MCP server listening on http://127.0.0.1:")
        source = mcp_server("docs", url=line.rsplit(" ", 1)[1])
        registry = ToolRegistry(source.list_tools())
        assert registry.names == ["docs_search", "docs_get_page"]
        found = registry.run_call("docs_search", '{"query": "hotfix"}', CTX)
        assert found.content == "hotfix: Hotfixes"
        missing = registry.run_call("docs_get_page", '{"slug": "nope"}', CTX)
        assert missing.is_error
        assert "no page 'nope'" in missing.content
    finally:
        process.terminate()
        process.wait(timeout=20)


def test_the_docs_server_serves_stdio() -> None:
    source = mcp_server(
        "docs", command=sys.executable, args=["-m", MODULE, "--transport", "stdio"], env=_env()
    )
    registry = ToolRegistry(source.list_tools())
    page = registry.run_call("docs_get_page", '{"slug": "v2.4.1"}', CTX)
    assert page.content.startswith("Release notes 2.4.1\n\n2.4.1: CSV export")


def test_a_port_in_use_is_one_line_and_exit_status_2() -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", MODULE, "--port", str(port)],
            check=False,
            capture_output=True,
            text=True,
            env=_env(),
            cwd=ROOT,
            timeout=60,
        )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"docs_server: cannot listen on 127.0.0.1:{port}: [Errno 98] Address already in use"
    ]
