"""The release assistant's own MCP server: ACME's release documentation, searchable.

A real MCP server built with the `mcp` package's server SDK (`MCPServer`), serving a small fixed
documentation set. Run it over Streamable HTTP (what the agent uses locally, in SAM local and
deployed) or stdio:

    python -m turnkeep_agents.release_assistant.docs_server     # http://127.0.0.1:8765/mcp
    python -m turnkeep_agents.release_assistant.docs_server --host 0.0.0.0 --port 0
    python -m turnkeep_agents.release_assistant.docs_server --transport stdio

Over HTTP it prints `docs MCP server listening on <url>` once it accepts connections. The
agent (`assistant.py`) names it at http://127.0.0.1:8765/mcp; elsewhere `TURNKEEP_MCP_URLS`
(`{"docs": "<url>"}`) points it at the server's address.
"""

from __future__ import annotations

import argparse
import socket
import sys
from typing import Any

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
PATH = "/mcp"

PAGES: dict[str, dict[str, str]] = {
    "release-process": {
        "title": "How a release is cut",
        "text": "Releases are cut from main every second Tuesday. The release captain freezes "
        "main at 10:00 UTC, tags vX.Y.0, and the deploy pipeline promotes the tag to staging, "
        "then to production after a 2-hour soak.",
    },
    "hotfix": {
        "title": "Hotfixes",
        "text": "A hotfix branches from the last release tag, needs one approval from the release "
        "captain, and ships as vX.Y.Z+1 without a freeze.",
    },
    "rollback": {
        "title": "Rolling back",
        "text": "To roll back, redeploy the previous tag from the pipeline's history; database "
        "migrations are forward-only, so a rollback past a migration needs a fix-forward.",
    },
    "v2.4.0": {
        "title": "Release notes 2.4.0",
        "text": "2.4.0: faster checkout (p95 -30%), saved carts for guests, and the new "
        "invoices API. Known issue: CSV export ignores the time zone (fixed in 2.4.1).",
    },
    "v2.4.1": {
        "title": "Release notes 2.4.1",
        "text": "2.4.1: CSV export honours the account's time zone; payment retries back off.",
    },
}


def build_server(name: str = "docs") -> Any:
    """The MCP server object (`mcp.server.mcpserver.MCPServer`) with the docs tools."""
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    server = MCPServer(name, instructions="ACME release documentation.", log_level="WARNING")

    @server.tool()
    def search(query: str, limit: int = 3) -> str:
        """Search ACME's release documentation; returns matching page slugs and titles.

        Args:
            query: Words to look for (case-insensitive).
            limit: At most this many pages.
        """
        words = [w for w in query.lower().split() if w]
        hits = [
            slug
            for slug, page in PAGES.items()
            if all(w in (slug + " " + page["title"] + " " + page["text"]).lower() for w in words)
        ]
        if not hits:
            return f"No page matches {query!r}."
        return "\n".join(f"{slug}: {PAGES[slug]['title']}" for slug in hits[: max(1, limit)])

    @server.tool()
    def get_page(slug: str) -> str:
        """The full text of one documentation page, by its slug (see `search`)."""
        page = PAGES.get(slug)
        if page is None:
            # A ToolError's text reaches the client (an isError result); other exceptions are
            # reported as a bare "Error executing tool".
            raise ToolError(f"no page {slug!r}; known pages: {', '.join(PAGES)}")
        return f"{page['title']}\n\n{page['text']}"

    return server


def serve_http(host: str, port: int, name: str = "docs") -> None:
    """Serve over Streamable HTTP until interrupted; prints the URL once listening."""
    import uvicorn

    app = build_server(name).streamable_http_app(host=host)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it: without it a response written in two pieces waits for
    # the client's delayed ACK (~40 ms a request on Linux), as uvicorn leaves a given socket be.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    sock.listen(128)  # connections wait in the backlog from now on, not refused
    shown = "127.0.0.1" if host == "0.0.0.0" else host
    print(f"docs MCP server listening on http://{shown}:{sock.getsockname()[1]}{PATH}", flush=True)
    uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])


def main(argv: list[str] | None = None) -> int:
    """`python -m turnkeep_agents.release_assistant.docs_server [--transport] [--host] [--port]`."""
    parser = argparse.ArgumentParser(prog="docs_server", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--transport", choices=["streamable-http", "stdio"], default="streamable-http"
    )
    parser.add_argument("--host", default=DEFAULT_HOST)
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="0: any free port")
    args = parser.parse_args(argv)
    if args.transport == "stdio":
        build_server().run("stdio")
        return 0
    try:
        serve_http(args.host, args.port)
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        print(f"docs_server: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
