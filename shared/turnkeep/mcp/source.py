"""`mcp_server(...)`: an MCP server as a tool source of an agent (docs/mcp.md).

The server's tools are listed on first need, once per process (a Lambda container, a local
server), and cached for `cache_ttl_seconds`; each becomes a `Tool` named `<server>_<tool>` whose
call is one MCP `tools/call` bounded by `timeout_seconds`. Every failure of a call (an `isError`
result, a JSON-RPC error, a transport failure, the deadline, a credential that cannot be read)
is a tool error result the model sees. A listing that fails raises `ToolSourceError`: the round
goes on without the server's tools, or fails retryably if it is `required` (the rule of
`turnkeep.tools.sources`). Nothing here imports `mcp` until a
server is listed or called.
"""

from __future__ import annotations

import json
import logging
import math
import os
import re
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from turnkeep.definition_errors import AgentDefinitionError
from turnkeep.mcp.arguments import McpArguments
from turnkeep.tools.base import Tool, ToolContext, ToolResult
from turnkeep.tools.names import source_name_problem, source_tool_name, valid_tool_name
from turnkeep.tools.sources import ToolSourceError

if TYPE_CHECKING:
    from turnkeep.mcp.client import Endpoint, Listing, Negotiated

logger = logging.getLogger("turnkeep.mcp")

URLS_ENV = "TURNKEEP_MCP_URLS"
"""A JSON object of server name -> URL that overrides those servers' `url=` (the template's
`McpServerUrls`): one agent module, pointed at each deployment's servers."""

DEFAULT_CACHE_TTL_SECONDS = 300.0
DEFAULT_TIMEOUT_SECONDS = 30.0
DEFAULT_LIST_TIMEOUT_SECONDS = 10.0

_REFERENCE = re.compile(r"^(?P<prefix>(?:\S+ )?)(?P<ref>(?:env|secretsmanager|ssm):\S+)$")
"""A header value that names a credential: `env:NAME`, or `Bearer env:NAME` (one word first)."""


class McpDefinitionError(AgentDefinitionError):
    """An `mcp_server(...)` definition is wrong (a bad name, no or two endpoints, bad lists): a
    definition error of the agent that names it (one line when the agent is loaded)."""


def mcp_server(
    name: str,
    *,
    url: str | None = None,
    headers: Mapping[str, str] | None = None,
    command: str | None = None,
    args: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    allow: Collection[str] | None = None,
    deny: Collection[str] = (),
    cache_ttl_seconds: float | None = DEFAULT_CACHE_TTL_SECONDS,
    timeout_seconds: float = DEFAULT_TIMEOUT_SECONDS,
    list_timeout_seconds: float = DEFAULT_LIST_TIMEOUT_SECONDS,
    replay_safe: bool | Collection[str] = False,
    requires_approval: bool | Collection[str] = False,
    required: bool = False,
) -> McpServer:
    """An MCP server whose tools an agent may call: Streamable HTTP at `url`, or (locally) a
    stdio server started as `command args...`.

    `headers` values may name a credential (`env:NAME`, `secretsmanager:NAME[#field]`,
    `ssm:NAME[#field]`, optionally after one word: `Bearer env:DOCS_TOKEN`), resolved when the
    server is contacted. `allow` / `deny` filter the server's tool names (without the prefix).
    `TURNKEEP_MCP_URLS` (a JSON object of server name -> URL) overrides `url=` for the servers it
    names, so one module serves every deployment. `cache_ttl_seconds`: how long a listing is
    reused (None: for the life of the process). `timeout_seconds` bounds each call,
    `list_timeout_seconds` each listing. `replay_safe` and `requires_approval`: True for every
    tool, or the names (without the prefix) of those that are. `required`: a model round fails
    (retryably) when the server cannot be listed; by default the round goes on without its
    tools and the turn's events say so (docs/mcp.md, "Failures").
    """
    if isinstance(args, str):
        raise McpDefinitionError(f"mcp_server {name!r}: args= takes a list of strings, not one")
    return McpServer(
        name=name,
        url=url,
        headers=dict(headers or {}),
        command=command,
        args=tuple(args),
        env=dict(env) if env is not None else None,
        cwd=cwd,
        allow=allow,
        deny=deny,
        cache_ttl_seconds=cache_ttl_seconds,
        timeout_seconds=timeout_seconds,
        list_timeout_seconds=list_timeout_seconds,
        replay_safe=replay_safe,
        requires_approval=requires_approval,
        required=required,
    )


@dataclass(frozen=True, slots=True)
class _Cached:
    tools: tuple[Tool[Any], ...]
    negotiated: Negotiated
    listed_at: float


class McpServer:
    """A `ToolSource` backed by one MCP server (build it with `mcp_server`)."""

    def __init__(
        self,
        *,
        name: str,
        url: str | None,
        headers: dict[str, str],
        command: str | None,
        args: tuple[str, ...],
        env: dict[str, str] | None,
        cwd: str | None,
        allow: Collection[str] | None,
        deny: Collection[str],
        cache_ttl_seconds: float | None,
        timeout_seconds: float,
        list_timeout_seconds: float,
        replay_safe: bool | Collection[str],
        requires_approval: bool | Collection[str],
        required: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        problem = source_name_problem(name, "mcp_server name")
        if problem is not None:
            raise McpDefinitionError(problem)
        if (url is None) == (command is None):
            raise McpDefinitionError(
                f"mcp_server {name!r}: give exactly one of url= (Streamable HTTP) or command= "
                "(stdio)"
            )
        if url is not None and not re.match(r"^https?://", url):
            raise McpDefinitionError(
                f"mcp_server {name!r}: url must start with http:// or https://"
            )
        if command is not None and (not isinstance(command, str) or not command.strip()):
            raise McpDefinitionError(f"mcp_server {name!r}: command must be non-blank text")
        if any(not isinstance(arg, str) for arg in args):
            raise McpDefinitionError(f"mcp_server {name!r}: args= takes a list of strings")
        if headers and url is None:
            raise McpDefinitionError(f"mcp_server {name!r}: headers= needs url= (stdio has none)")
        for key, val in headers.items():
            if not isinstance(key, str) or not isinstance(val, str):
                raise McpDefinitionError(f"mcp_server {name!r}: header names and values are text")
        for what, value in (
            ("timeout_seconds", timeout_seconds),
            ("list_timeout_seconds", list_timeout_seconds),
        ):
            if not _number(value) or value <= 0:
                raise McpDefinitionError(f"mcp_server {name!r}: {what} must be a positive number")
        if not isinstance(required, bool):
            raise McpDefinitionError(f"mcp_server {name!r}: required must be True or False")
        if cache_ttl_seconds is not None and (
            not _number(cache_ttl_seconds) or cache_ttl_seconds < 0
        ):
            raise McpDefinitionError(
                f"mcp_server {name!r}: cache_ttl_seconds must be >= 0 or None (no expiry)"
            )
        self._name = name
        self.url = url
        self.headers = headers
        self.command = command
        self.args = args
        self.env = env
        self.cwd = cwd
        self.allow = _names(name, "allow", allow) if allow is not None else None
        self.deny = _names(name, "deny", deny)
        self.cache_ttl_seconds = cache_ttl_seconds
        self.timeout_seconds = float(timeout_seconds)
        self.list_timeout_seconds = float(list_timeout_seconds)
        self._replay_safe = _flag(name, "replay_safe", replay_safe)
        self._requires_approval = _flag(name, "requires_approval", requires_approval)
        self.required = required
        """A round fails when this server cannot be listed (else it goes on without it)."""
        self._clock = clock
        self._lock = threading.Lock()
        self._cached: _Cached | None = None
        self.list_requests = 0
        """How many listings this process made (the bench and tests read it)."""

    @property
    def name(self) -> str:
        """The prefix of this server's tool names."""
        return self._name

    def __repr__(self) -> str:
        where = self.url if self.url is not None else f"stdio:{self.command}"
        return f"mcp_server({self._name!r}, {where})"

    def list_tools(self) -> Sequence[Tool[Any]]:
        """The server's tools, listed now or within the cache's TTL; ToolSourceError if not."""
        with self._lock:
            cached = self._cached
            if cached is not None and self._fresh(cached):
                return cached.tools
            listing = self._list()
            tools = self._tools(listing)
            self._cached = _Cached(tools, listing.negotiated, self._clock())
            return tools

    def invalidate(self) -> None:
        """Drop the cached listing: the next `list_tools` asks the server again."""
        with self._lock:
            self._cached = None

    def _fresh(self, cached: _Cached) -> bool:
        ttl = self.cache_ttl_seconds
        return ttl is None or self._clock() - cached.listed_at < ttl

    def _endpoint(self) -> Endpoint:
        from turnkeep.mcp.client import Endpoint

        url = self.effective_url()
        return Endpoint(url, self.headers, self.command, self.args, self.env, self.cwd)

    def effective_url(self) -> str | None:
        """`url=`, or the one TURNKEEP_MCP_URLS names for this server; ToolSourceError when
        that variable is not a JSON object of http(s) URLs."""
        raw = os.environ.get(URLS_ENV, "").strip()
        if self.url is None or not raw:
            return self.url
        try:
            urls = json.loads(raw)
        except ValueError:
            urls = None
        if not isinstance(urls, dict):
            raise ToolSourceError(
                self._name,
                f'{URLS_ENV} must be a JSON object, e.g. {{"{self._name}": "https://..."}}',
            )
        url = urls.get(self._name)
        if url is None:
            return self.url
        if not isinstance(url, str) or not re.match(r"^https?://", url):
            raise ToolSourceError(
                self._name, f"{URLS_ENV}[{self._name!r}] must be an http:// or https:// URL"
            )
        return url

    def _resolved_headers(self) -> dict[str, str]:
        """Header values with their credential references resolved (CredentialError if not)."""
        from turnkeep.plumbing.credentials import resolve_secret

        resolved = {}
        for key, value in self.headers.items():
            match = _REFERENCE.match(value)
            resolved[key] = (
                match["prefix"] + resolve_secret(match["ref"]) if match is not None else value
            )
        return resolved

    def _list(self) -> Listing:
        from turnkeep.mcp import bridge, client
        from turnkeep.plumbing.credentials import CredentialError

        try:
            headers = self._resolved_headers()
        except CredentialError as exc:
            raise ToolSourceError(self._name, f"header credential: {exc}") from exc
        endpoint = self._endpoint()
        client.import_sdk()
        self.list_requests += 1
        started = time.perf_counter()
        try:
            listing = bridge.run(
                client.list_tools(endpoint, headers, self.list_timeout_seconds),
                self.list_timeout_seconds,
            )
        except TimeoutError:
            raise ToolSourceError(
                self._name, f"listing its tools took longer than {self.list_timeout_seconds:g} s"
            ) from None
        except Exception as exc:  # every failure of the exchange is the source's failure
            raise ToolSourceError(
                self._name, f"cannot list its tools: {client.describe_failure(exc)}"
            ) from exc
        logger.info(
            "listed MCP server %s: %d tools in %.0f ms",
            self._name,
            len(listing.tools),
            (time.perf_counter() - started) * 1000,
        )
        return listing

    def _tools(self, listing: Listing) -> tuple[Tool[Any], ...]:
        from turnkeep.mcp.arguments import arguments_model

        tools: list[Tool[Any]] = []
        offered = {t.name for t in listing.tools}
        for missing in sorted((self.allow or set()) - offered):
            logger.warning("MCP server %s lists no tool %r (named in allow=)", self._name, missing)
        for listed in listing.tools:
            original = listed.name
            if self.allow is not None and original not in self.allow:
                continue
            if original in self.deny:
                continue
            prefixed = source_tool_name(self._name, original)
            if not valid_tool_name(prefixed):
                raise ToolSourceError(
                    self._name,
                    f"its tool {original!r} would be named {prefixed!r}, which is not 1-64 "
                    "characters of A-Z a-z 0-9 _ -: leave it out with deny=[...] (or allow=) or "
                    "shorten the server's name",
                )
            description = listed.description or listed.title or f"Tool {original} of {self._name}."
            tools.append(
                McpTool(
                    name=prefixed,
                    description=description,
                    args_model=arguments_model(prefixed, listed.input_schema),
                    handler=_Call(self, original, prefixed),
                    replay_safe=_applies(self._replay_safe, original),
                    # A call is network I/O bounded by its own deadline, and its handler holds
                    # this source: it runs in the calling thread, never a worker process.
                    isolation="in_process",
                    requires_approval=_applies(self._requires_approval, original),
                    timeout_seconds=self.timeout_seconds,
                )
            )
        return tuple(tools)

    def call(self, original: str, prefixed: str, arguments: dict[str, Any]) -> ToolResult:
        """Call the server's tool `original`; every failure becomes an error result."""
        from turnkeep.mcp import bridge, client
        from turnkeep.plumbing.credentials import CredentialError

        try:
            headers = self._resolved_headers()
            endpoint = self._endpoint()
        except (CredentialError, ToolSourceError) as exc:
            return ToolResult(f"Error: tool {prefixed} was not called: {exc}", True)
        cached = self._cached
        negotiated = cached.negotiated if cached is not None else None
        client.import_sdk()
        try:
            result = bridge.run(
                client.call_tool(
                    endpoint,
                    headers,
                    negotiated,
                    name=original,
                    arguments=arguments,
                    deadline_seconds=self.timeout_seconds,
                ),
                self.timeout_seconds,
            )
        except TimeoutError:
            return ToolResult(
                f"Error: tool {prefixed} timed out after {self.timeout_seconds:g} s (MCP server "
                f"{self._name}); it may or may not have taken effect",
                True,
            )
        except Exception as exc:  # a transport failure is the model's to see, not the turn's
            return ToolResult(
                f"Error: tool {prefixed} failed (MCP server {self._name}): "
                f"{client.describe_failure(exc)}",
                True,
            )
        text = client.result_text(result)
        if result.is_error:
            return ToolResult(f"Error: tool {prefixed} reported an error: {text}", True)
        return ToolResult(text)


class McpTool(Tool[McpArguments]):
    """A tool listed by an MCP server; its call bounds itself by its `timeout_seconds`."""

    __slots__ = ()

    @property
    def bounds_itself(self) -> bool:
        """The call ends at its deadline by itself: no runner thread is needed to stop it."""
        return True


@dataclass(frozen=True, slots=True)
class _Call:
    """The handler of one MCP tool: validated arguments in, one `tools/call` out."""

    source: McpServer
    original: str
    prefixed: str

    def __call__(self, args: McpArguments, _ctx: ToolContext) -> ToolResult:
        return self.source.call(self.original, self.prefixed, args.arguments())


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _names(server: str, what: str, names: object) -> frozenset[str]:
    if isinstance(names, str) or not isinstance(names, Collection):
        raise McpDefinitionError(
            f"mcp_server {server!r}: {what}= takes a list of tool names, got {names!r}"
        )
    bad = [n for n in names if not isinstance(n, str) or not n]
    if bad:
        raise McpDefinitionError(f"mcp_server {server!r}: {what}= has non-names {bad!r}")
    return frozenset(names)


def _flag(server: str, what: str, value: object) -> bool | frozenset[str]:
    if isinstance(value, bool):
        return value
    return _names(server, what, value)


def _applies(flag: bool | frozenset[str], tool: str) -> bool:
    return flag if isinstance(flag, bool) else tool in flag
