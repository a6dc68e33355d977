"""Real MCP servers for tests, built with the `mcp` package's server SDK (`MCPServer`).

`HttpMcpServer` serves over Streamable HTTP on 127.0.0.1 (an ephemeral port) from a uvicorn
thread, counting the MCP methods it receives and recording each HTTP request's headers.
`python -m tests.support.mcp_servers` serves the same tools over stdio.
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections import Counter
from typing import Any

SLOW_SECONDS = 5.0


def count_methods(server: Any, methods: Counter[str]) -> None:
    """Count every MCP method `server` (an `MCPServer`) receives into `methods`."""

    class _Count:
        async def __call__(self, ctx: Any, call_next: Any) -> Any:
            methods[ctx.method] += 1
            return await call_next(ctx)

    server._lowlevel_server.middleware.append(_Count())


def build_server(name: str = "kb") -> Any:
    """A server with tools for every path: plain, failing, slow, odd names."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer(name, log_level="WARNING")

    @server.tool()
    def lookup(term: str, limit: int = 2) -> str:
        """Look a term up in the knowledge base."""
        return f"{term}: {limit} entries"

    @server.tool()
    def fail(reason: str = "broken") -> str:
        """Always fails."""
        raise ValueError(reason)

    @server.tool()
    async def slow(seconds: float = SLOW_SECONDS) -> str:
        """Sleeps, then answers."""
        import anyio

        await anyio.sleep(seconds)
        return "finally"

    @server.tool(name="files.read")
    def files_read(path: str) -> str:
        """A tool whose name has a dot (not a valid provider tool name once prefixed)."""
        return path

    return server


class HttpMcpServer:
    """Context manager: `server` (default `build_server(name)`) over Streamable HTTP at `url`."""

    def __init__(self, name: str = "kb", server: Any = None, *, port: int = 0) -> None:
        import uvicorn

        self.methods: Counter[str] = Counter()
        self.headers: list[dict[str, str]] = []
        mcp = server if server is not None else build_server(name)
        count_methods(mcp, self.methods)
        inner = mcp.streamable_http_app(host="127.0.0.1")

        async def app(scope: Any, receive: Any, send: Any) -> None:
            if scope["type"] == "http":
                self.headers.append(
                    {k.decode().lower(): v.decode() for k, v in scope.get("headers", [])}
                )
            await inner(scope, receive, send)

        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        # As the docs server does: no ~40 ms delayed-ACK wait per response.
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind(("127.0.0.1", port))
        self.port = self._sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self._server = uvicorn.Server(
            uvicorn.Config(app, log_level="warning", lifespan="on", timeout_graceful_shutdown=1)
        )
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": [self._sock]}, daemon=True
        )

    @property
    def started(self) -> bool:
        """Whether the server has been started (and accepts connections)."""
        return bool(self._server.started)

    def __enter__(self) -> HttpMcpServer:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the MCP test server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *_exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._sock.close()


def free_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


if __name__ == "__main__":
    build_server(sys.argv[1] if len(sys.argv) > 1 else "kb").run("stdio")
