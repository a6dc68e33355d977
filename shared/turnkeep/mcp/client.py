"""MCP exchanges with one server, through the `mcp` package's client (imported here only).

Each listing and each call opens its own MCP session and closes it when done: no protocol
state survives between a container's invocations (Lambda may freeze a container for hours), and
concurrent calls never share a session. What is kept is an HTTP client per server (its TLS
context and pooled connections). A listing's negotiation (the server's
`server/discover` answer on the 2026 protocol) is kept with the cached tools, so a call adopts it
instead of probing again: on that protocol a warm call is one HTTP request; on a handshake-era
server each call runs the `initialize` exchange first. Over stdio each exchange starts the
server's process (stdio is for local use).
"""

from __future__ import annotations

import shlex
import tempfile
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from mcp import Client
    from mcp_types import CallToolResult, DiscoverResult


def import_sdk() -> None:
    """Import what an exchange uses, before its deadline starts: the first import of the `mcp`
    package costs ~0.5 s (much more on a loaded machine), which must not count against a
    listing's `list_timeout_seconds` or a call's `timeout_seconds`. Cheap once imported."""
    import anyio  # noqa: F401
    import httpx2  # noqa: F401
    import mcp
    import mcp.client.stdio
    import mcp.client.streamable_http  # noqa: F401
    import mcp_types  # noqa: F401


@dataclass(frozen=True, slots=True)
class Endpoint:
    """Where a server is: a Streamable HTTP URL (with headers) or a stdio command."""

    url: str | None
    headers: Mapping[str, str]
    command: str | None
    args: tuple[str, ...]
    env: Mapping[str, str] | None
    cwd: str | None


@dataclass(frozen=True, slots=True)
class Negotiated:
    """What a listing's session learned, reused by later calls: the protocol it settled and the
    tools it listed (the client checks a result's structured content against the listed output
    schema, and would list again to learn it)."""

    mode: str
    discover: DiscoverResult | None
    tools: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class Listing:
    """The server's tools as listed (all pages), and the negotiation to reuse."""

    tools: Sequence[Any]
    """`mcp_types.Tool` objects."""
    negotiated: Negotiated


MAX_PAGES = 100
"""A server whose `tools/list` pagination does not end within this many pages is refused."""


def _client(
    endpoint: Endpoint, headers: Mapping[str, str], negotiated: Negotiated | None, errlog: Any
) -> Client:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client
    from mcp.client.streamable_http import streamable_http_client

    transport: Any
    if endpoint.url is not None:
        transport = streamable_http_client(
            endpoint.url, http_client=_http_client(endpoint, headers)
        )
    else:
        assert endpoint.command is not None
        params = StdioServerParameters(
            command=endpoint.command,
            args=list(endpoint.args),
            env=dict(endpoint.env) if endpoint.env is not None else None,
            cwd=endpoint.cwd,
        )
        transport = stdio_client(params, errlog=errlog)
    if negotiated is None:
        return Client(transport, cache=None)
    return Client(transport, cache=None, mode=negotiated.mode, prior_discover=negotiated.discover)


@asynccontextmanager
async def _session(
    endpoint: Endpoint, headers: Mapping[str, str], negotiated: Negotiated | None
) -> AsyncIterator[Client]:
    """An MCP session with the server for one exchange.

    Over stdio the server's standard error is kept (and passed on to ours when the exchange
    ends) and its process watched, so a server that exits is reported as that — its exit
    status and the last lines it wrote — rather than as the SDK's `Connection closed`.
    """
    if endpoint.url is not None:
        async with _client(endpoint, headers, negotiated, None) as client:
            yield client
        return
    _watch_spawns()
    spawned: list[Any] = []
    token = _SPAWNED.set(spawned)
    with tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace") as errlog:
        try:
            async with _client(endpoint, headers, negotiated, errlog) as client:
                yield client
        except Exception as exc:
            exited = _exited(endpoint, spawned, errlog, exc)
            if exited is None:
                raise
            raise exited from exc
        finally:
            _SPAWNED.reset(token)
            _pass_on(errlog)


class ServerExited(RuntimeError):
    """A stdio server's process ended before the exchange did; the message says how."""


STDERR_LINES = 5
"""How many of a stdio server's last standard-error lines its exit is reported with."""

_SPAWNED: ContextVar[list[Any] | None] = ContextVar("turnkeep_mcp_spawned", default=None)


def _watch_spawns() -> None:
    """Have the SDK's stdio transport hand its server processes to the exchange that spawned
    them (`_SPAWNED`), to read their exit status.

    A private hook of the SDK, wrapped without changing what it does: should it go, a server
    that exits is reported by its standard error alone (no status), which the tests would show.
    """
    from mcp.client import stdio

    original = getattr(stdio, "_create_platform_compatible_process", None)
    if original is None or getattr(original, "turnkeep_watched", False):
        return

    async def spawn(*args: Any, **kwargs: Any) -> Any:
        process = await original(*args, **kwargs)
        found = _SPAWNED.get()
        if found is not None:
            found.append(process)
        return process

    spawn.turnkeep_watched = True  # type: ignore[attr-defined]
    stdio._create_platform_compatible_process = spawn


def _exited(
    endpoint: Endpoint, spawned: list[Any], errlog: Any, exc: BaseException
) -> ServerExited | None:
    """The report of a stdio server that exited on its own (the connection closed because its
    process ended), or None when the exchange failed otherwise."""
    from mcp import MCPError
    from mcp_types.jsonrpc import CONNECTION_CLOSED

    leaf = _leaf(exc)
    if not (isinstance(leaf, MCPError) and leaf.error.code == CONNECTION_CLOSED):
        return None
    status = next((p.returncode for p in spawned if p.returncode is not None), None)
    errlog.seek(0)
    lines = [line.rstrip() for line in errlog.read().splitlines() if line.strip()]
    command = shlex.join([endpoint.command or "", *endpoint.args])
    command = command if len(command) <= 120 else command[:117] + "..."
    what = f"the server process ({command}) exited"
    what += f" with status {status}" if status is not None else ""
    if lines:
        what += "; the last lines of its stderr: " + " | ".join(lines[-STDERR_LINES:])
    else:
        what += " and wrote nothing to stderr"
    return ServerExited(what)


def _pass_on(errlog: Any) -> None:
    """The server's standard error, on ours (as if it had written there itself)."""
    import sys

    errlog.seek(0)
    text = errlog.read()
    if text:
        sys.stderr.write(text)
        sys.stderr.flush()


def _http_client(endpoint: Endpoint, headers: Mapping[str, str]) -> Any:
    """The endpoint's HTTP client on this event loop, made once and kept in the process's
    client cache (`turnkeep.plumbing.clients`, in the loop's own space) until its headers
    change, e.g. a rotated secret: building one costs ~20 ms (its TLS context), and its pool
    keeps the server's connection for the next exchange."""
    import asyncio

    import httpx2

    from turnkeep.plumbing.clients import cached_client

    assert endpoint.url is not None
    key = tuple(sorted(headers.items()))

    def build() -> tuple[tuple[tuple[str, str], ...], Any]:
        # The SDK's own transport timeouts (30 s connect, 300 s read) stay: each exchange is
        # bounded as a whole by the caller's deadline.
        timeout = httpx2.Timeout(30.0, read=300.0)
        return key, httpx2.AsyncClient(headers=dict(headers), timeout=timeout)

    found = cached_client(
        ("mcp-http", endpoint.url),
        build,
        scope=asyncio.get_running_loop(),
        usable=lambda cached: cached[0] == key,
    )
    return found[1]


async def list_tools(
    endpoint: Endpoint, headers: Mapping[str, str], deadline_seconds: float
) -> Listing:
    """Every tool the server lists (following `nextCursor`), within `deadline_seconds`."""
    import anyio

    with anyio.fail_after(deadline_seconds):
        async with _session(endpoint, headers, None) as client:
            tools: list[Any] = []
            cursor: str | None = None
            for _ in range(MAX_PAGES):
                page = await client.list_tools(cursor=cursor)
                tools.extend(page.tools)
                cursor = page.next_cursor
                if cursor is None:
                    break
            else:
                raise RuntimeError(f"tools/list did not end within {MAX_PAGES} pages")
            discover = client.session.discover_result
            mode = client.protocol_version if discover is not None else "legacy"
            return Listing(tools, Negotiated(mode, discover, tuple(tools)))


async def call_tool(
    endpoint: Endpoint,
    headers: Mapping[str, str],
    negotiated: Negotiated | None,
    *,
    name: str,
    arguments: dict[str, Any],
    deadline_seconds: float,
) -> CallToolResult:
    """One `tools/call` of `name`, within `deadline_seconds` (connection included)."""
    import anyio

    with anyio.fail_after(deadline_seconds):
        async with _session(endpoint, headers, negotiated) as client:
            if negotiated is not None:
                _absorb(client, negotiated.tools)
            return await client.call_tool(name, arguments, read_timeout_seconds=deadline_seconds)


def _absorb(client: Client, tools: tuple[Any, ...]) -> None:
    """Give a new session the cached listing, as the SDK does with a listing from its own cache.

    A private hook of the SDK: should it go, a call lists once more first (correct, one request
    slower), which the tests' request counts would show.
    """
    from mcp_types import ListToolsResult

    absorb = getattr(client.session, "_absorb_tool_listing", None)
    if absorb is not None:
        absorb(ListToolsResult(tools=list(tools)), complete=True)


def describe_failure(exc: BaseException) -> str:
    """One line for a failed exchange: the innermost cause, without a traceback."""
    from mcp import MCPError

    leaf = _leaf(exc)
    if isinstance(leaf, MCPError):
        return f"the server answered with error {leaf.error.code}: {leaf.error.message}"
    text = str(leaf).strip()
    kind = type(leaf).__name__
    return f"{kind}: {text}" if text else kind


def _leaf(exc: BaseException) -> BaseException:
    # anyio task groups wrap a transport's failure in (nested) exception groups.
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def result_text(result: CallToolResult) -> str:
    """The model-visible text of a call's result: its text blocks, the others described.

    A result with no content but structured content gives that content as JSON.
    """
    import json

    from mcp_types import (
        AudioContent,
        EmbeddedResource,
        ImageContent,
        ResourceLink,
        TextContent,
        TextResourceContents,
    )

    parts: list[str] = []
    for block in result.content:
        if isinstance(block, TextContent):
            parts.append(block.text)
        elif isinstance(block, ImageContent | AudioContent):
            kind = "image" if isinstance(block, ImageContent) else "audio"
            parts.append(f"[{kind} content ({block.mime_type}), not shown]")
        elif isinstance(block, EmbeddedResource):
            resource = block.resource
            if isinstance(resource, TextResourceContents):
                parts.append(resource.text)
            else:
                parts.append(f"[binary resource {resource.uri}, not shown]")
        elif isinstance(block, ResourceLink):
            parts.append(f"[resource link: {block.uri}]")
        else:
            parts.append(f"[{type(block).__name__} content, not shown]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False))
    return "\n".join(parts)
