"""Defining an agent's MCP server imports nothing of the `mcp` package: handlers of any agent
pay for it only when a server is first listed (bench/mcp_tool_call.py prints that cost)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

PROBE = """
import sys
from turnkeep import Agent, mcp_server
agent = Agent(mcp_servers=[mcp_server("docs", url="http://127.0.0.1:9/mcp")])
heavy = sorted(m for m in ("mcp", "mcp_types", "httpx2", "anyio", "jsonschema") if m in sys.modules)
print(",".join(heavy) or "none")
"""


def test_defining_an_mcp_server_imports_no_mcp_client_code() -> None:
    done = subprocess.run(
        [sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT / "shared"), "PATH": "/usr/bin:/bin"},
    )
    assert done.stdout.strip() == "none"
