"""The pantry agent's own MCP server (the `mcp` SDK's `MCPServer`): prices and stock.

    python -m tests.support.pantry.grocer --port 8799          # Streamable HTTP on 127.0.0.1
    python -m tests.support.pantry.grocer --transport stdio
    python -m tests.support.pantry.grocer --transport stdio --exit 3   # exits at once, status 3

Over HTTP it prints `grocer MCP server listening on <url>` once it accepts connections.
"""

from __future__ import annotations

import argparse
import socket
import sys
from typing import Any

PRICES = {"rice": 2.5, "beans": 1.25, "oats": 3.0}


def build_server() -> Any:
    """The grocer server with its tools `price`, `stock`."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("grocer", log_level="WARNING")

    @server.tool()
    def price(item: str) -> str:
        """The price of one unit of an item."""
        return f"{item}: {PRICES.get(item, 9.99):.2f}"

    @server.tool()
    def stock(item: str, qty: int) -> str:
        """Order `qty` units of an item."""
        return f"ordered {qty} x {item}"

    return server


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="grocer")
    parser.add_argument("--transport", choices=["http", "stdio"], default="http")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--exit", type=int, default=None, help="exit at once with this status")
    args = parser.parse_args(argv)
    if args.exit is not None:
        print("grocer: the price list is missing (exiting)", file=sys.stderr)
        return int(args.exit)
    server = build_server()
    if args.transport == "stdio":
        server.run("stdio")
        return 0
    import uvicorn

    sock = socket.socket()
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind(("127.0.0.1", args.port))
    sock.listen(128)  # connections queue from here on: the line below is true when printed
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    config = uvicorn.Config(server.streamable_http_app(host="127.0.0.1"), log_level="warning")
    http = uvicorn.Server(config)
    print(f"grocer MCP server listening on {url}", flush=True)
    http.run(sockets=[sock])
    return 0


if __name__ == "__main__":
    sys.exit(main())
