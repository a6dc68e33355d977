"""MCP servers as tool sources, against real servers built with the `mcp` server SDK."""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.mcp_servers import HttpMcpServer, free_port
from turnkeep.mcp import McpDefinitionError, McpServer, mcp_server
from turnkeep.tools.base import ToolContext, ToolResult
from turnkeep.tools.registry import ToolRegistry
from turnkeep.tools.sources import ToolSource, ToolSourceError

ROOT = Path(__file__).resolve().parents[2]
CTX = ToolContext("s1", "u1", "op1", "call1")


@pytest.fixture(scope="module")
def kb() -> Iterator[HttpMcpServer]:
    with HttpMcpServer("kb") as server:
        yield server


def _run(source: McpServer, name: str, arguments: object) -> ToolResult:
    registry = ToolRegistry(source.list_tools())
    return registry.run_call(name, json.dumps(arguments), CTX)


def test_a_servers_tools_are_named_server_underscore_tool_and_keep_its_input_schema(
    kb: HttpMcpServer,
) -> None:
    source = mcp_server("kb", url=kb.url, deny=["files.read"])
    assert isinstance(source, ToolSource)
    tools = {tool.name: tool for tool in source.list_tools()}
    assert sorted(tools) == ["kb_fail", "kb_lookup", "kb_slow"]
    spec = tools["kb_lookup"].spec()
    assert spec.description == "Look a term up in the knowledge base."
    assert spec.input_schema["properties"]["term"] == {"title": "Term", "type": "string"}
    assert spec.input_schema["required"] == ["term"]
    assert not tools["kb_lookup"].replay_safe
    assert tools["kb_lookup"].isolation == "in_process"


def test_a_call_returns_the_servers_text(kb: HttpMcpServer) -> None:
    source = mcp_server("kb", url=kb.url, deny=["files.read"])
    result = _run(source, "kb_lookup", {"term": "rollback", "limit": 5})
    assert result == ToolResult("rollback: 5 entries")


def test_allow_and_deny_filter_by_the_servers_own_tool_names(kb: HttpMcpServer) -> None:
    allowed = mcp_server("kb", url=kb.url, allow=["lookup", "fail"], deny=["fail"])
    assert [t.name for t in allowed.list_tools()] == ["kb_lookup"]


def test_a_tool_name_providers_refuse_fails_the_listing_with_a_message_naming_the_fix(
    kb: HttpMcpServer,
) -> None:
    source = mcp_server("kb", url=kb.url)
    with pytest.raises(
        ToolSourceError, match=r"'files\.read' would be named 'kb_files\.read'.*deny="
    ):
        source.list_tools()


def test_two_servers_whose_prefixed_names_clash_cannot_share_a_registry(kb: HttpMcpServer) -> None:
    first = mcp_server("kb", url=kb.url, allow=["lookup"])
    with HttpMcpServer("other") as other:
        # server "kb_lookup"'s tool "x" would not clash; the same name twice does.
        second = mcp_server("kb", url=other.url, allow=["lookup"])
        registry = ToolRegistry(first.list_tools())
        with pytest.raises(ValueError, match="'kb_lookup' is already registered"):
            registry.extend(second.list_tools())


def test_a_listing_is_cached_until_its_ttl_passes(kb: HttpMcpServer) -> None:
    now = [1000.0]
    source = McpServer(
        name="kb",
        url=kb.url,
        headers={},
        command=None,
        args=(),
        env=None,
        cwd=None,
        allow=["lookup"],
        deny=(),
        cache_ttl_seconds=60,
        timeout_seconds=5,
        list_timeout_seconds=5,
        replay_safe=False,
        requires_approval=False,
        clock=lambda: now[0],
    )
    before = kb.methods["tools/list"]
    for _ in range(3):
        source.list_tools()
    assert kb.methods["tools/list"] - before == 1
    now[0] += 59
    source.list_tools()
    assert kb.methods["tools/list"] - before == 1
    now[0] += 2
    source.list_tools()
    assert kb.methods["tools/list"] - before == 2
    assert source.list_requests == 2


def test_a_warm_call_makes_one_request_to_the_server(kb: HttpMcpServer) -> None:
    source = mcp_server("kb", url=kb.url, allow=["lookup"])
    registry = ToolRegistry(source.list_tools())
    before = dict(kb.methods)
    registry.run_call("kb_lookup", '{"term": "a"}', CTX)
    delta = {k: v - before.get(k, 0) for k, v in kb.methods.items() if v != before.get(k, 0)}
    assert delta == {"tools/call": 1}


def test_an_is_error_result_is_a_tool_error_the_model_sees(kb: HttpMcpServer) -> None:
    source = mcp_server("kb", url=kb.url, allow=["fail"])
    result = _run(source, "kb_fail", {"reason": "disk full"})
    assert result.is_error
    assert result.content.startswith("Error: tool kb_fail reported an error: ")


def test_arguments_breaking_the_servers_schema_are_refused_before_any_call(
    kb: HttpMcpServer,
) -> None:
    source = mcp_server("kb", url=kb.url, allow=["lookup"])
    registry = ToolRegistry(source.list_tools())
    before = kb.methods["tools/call"]
    result = registry.run_call("kb_lookup", '{"term": 5, "limit": "x"}', CTX)
    assert result == ToolResult(
        "Error: invalid arguments for kb_lookup: (arguments): limit: 'x' is not of type "
        "'integer'; term: 5 is not of type 'string'",
        True,
    )
    missing = registry.run_call("kb_lookup", "{}", CTX)
    assert missing.content == (
        "Error: invalid arguments for kb_lookup: (arguments): 'term' is a required property"
    )
    assert kb.methods["tools/call"] == before


def test_a_call_past_its_timeout_is_a_tool_error(kb: HttpMcpServer) -> None:
    source = mcp_server("kb", url=kb.url, allow=["slow"], timeout_seconds=0.5)
    started = time.monotonic()
    result = _run(source, "kb_slow", {"seconds": 5})
    assert time.monotonic() - started < 4
    assert result.is_error
    assert "timed out after 0.5 s" in result.content


def test_a_server_gone_after_listing_makes_its_calls_tool_errors() -> None:
    with HttpMcpServer("kb") as server:
        source = mcp_server("kb", url=server.url, allow=["lookup"])
        registry = ToolRegistry(source.list_tools())
    result = registry.run_call("kb_lookup", '{"term": "a"}', CTX)
    assert result.is_error
    assert result.content.startswith("Error: tool kb_lookup failed (MCP server kb): ")
    assert "Connect" in result.content


def test_an_unreachable_server_fails_its_listing_with_a_source_error() -> None:
    source = mcp_server("kb", url=f"http://127.0.0.1:{free_port()}/mcp")
    with pytest.raises(ToolSourceError, match="tool source 'kb': cannot list its tools: Connect"):
        source.list_tools()


def test_header_credentials_are_resolved_from_their_references(
    kb: HttpMcpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KB_TEST_TOKEN", "s3cr3t")
    source = mcp_server(
        "kb",
        url=kb.url,
        allow=["lookup"],
        headers={"Authorization": "Bearer env:KB_TEST_TOKEN", "X-Team": "acme"},
    )
    kb.headers.clear()
    _run(source, "kb_lookup", {"term": "a"})
    assert kb.headers
    assert all(h.get("authorization") == "Bearer s3cr3t" for h in kb.headers)
    assert all(h.get("x-team") == "acme" for h in kb.headers)


def test_a_header_credential_that_cannot_be_read_fails_listing_and_calls(
    kb: HttpMcpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KB_TEST_TOKEN", "s3cr3t")
    source = mcp_server(
        "kb", url=kb.url, allow=["lookup"], headers={"Authorization": "Bearer env:KB_TEST_TOKEN"}
    )
    registry = ToolRegistry(source.list_tools())
    monkeypatch.delenv("KB_TEST_TOKEN")
    result = registry.run_call("kb_lookup", '{"term": "a"}', CTX)
    assert result.is_error
    assert "KB_TEST_TOKEN is not set" in result.content
    source.invalidate()
    with pytest.raises(ToolSourceError, match="header credential: environment variable"):
        source.list_tools()


def test_a_stdio_server_is_listed_and_called() -> None:
    source = mcp_server(
        "kb",
        command=sys.executable,
        args=["-m", "tests.support.mcp_servers"],
        cwd=str(ROOT),
        deny=["files.read"],
    )
    assert sorted(t.name for t in source.list_tools()) == ["kb_fail", "kb_lookup", "kb_slow"]
    assert _run(source, "kb_lookup", {"term": "x"}) == ToolResult("x: 2 entries")


def test_a_stdio_command_that_does_not_exist_fails_the_listing() -> None:
    source = mcp_server("kb", command="/nonexistent/mcp-server")
    with pytest.raises(ToolSourceError, match="cannot list its tools"):
        source.list_tools()


def test_replay_safety_and_approval_are_per_tool_declarations(kb: HttpMcpServer) -> None:
    source = mcp_server(
        "kb", url=kb.url, allow=["lookup", "fail"], replay_safe=["lookup"], requires_approval=True
    )
    tools = {t.name: t for t in source.list_tools()}
    assert tools["kb_lookup"].replay_safe
    assert not tools["kb_fail"].replay_safe
    assert tools["kb_lookup"].requires_approval
    assert tools["kb_fail"].requires_approval


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"name": "my docs", "url": "http://x/mcp"}, "name 'my docs' is invalid"),
        ({"name": "d" * 63, "url": "http://x/mcp"}, "1-62 characters"),
        ({"name": "docs"}, "exactly one of url="),
        ({"name": "docs", "url": "http://x/mcp", "command": "srv"}, "exactly one of url="),
        ({"name": "docs", "url": "ftp://x"}, "url must start with http"),
        ({"name": "docs", "url": "http://x/mcp", "allow": "search"}, "list of tool names"),
        ({"name": "docs", "url": "http://x/mcp", "timeout_seconds": 0}, "positive number"),
        ({"name": "docs", "command": "srv", "headers": {"A": "b"}}, "headers= needs url="),
        ({"name": "docs", "command": "srv", "args": "-m srv"}, "list of strings, not one"),
        ({"name": "docs", "command": " "}, "command must be non-blank"),
        ({"name": "docs", "url": "http://x/mcp", "timeout_seconds": float("inf")}, "positive"),
        ({"name": "docs", "url": "http://x/mcp", "cache_ttl_seconds": -1}, "cache_ttl_seconds"),
    ],
)
def test_a_bad_definition_is_one_clear_error(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(McpDefinitionError, match=message):
        mcp_server(**kwargs)  # type: ignore[arg-type]


def test_a_whole_local_turn_calls_an_mcp_tool_and_the_model_sees_its_result(
    kb: HttpMcpServer, tmp_path: Path
) -> None:
    from tests.integration.turns_support import USER, make_turn_harness
    from turnkeep.harness.orchestrator import run_turn
    from turnkeep.tools.builtin import builtin_tools

    source = mcp_server("kb", url=kb.url, allow=["lookup", "fail"])
    harness = make_turn_harness(tmp_path, "sqlite")
    harness.deps.tools = lambda _s, _u: [*builtin_tools(), *source.list_tools()]
    calls = kb.methods["tools/call"]
    result = run_turn(
        harness.deps,
        harness.session_id,
        USER,
        'call kb_lookup {"term": "release"}\n'
        'call kb_fail {"reason": "no"}\n'
        'call echo {"text": "hi"}',
    )
    assert result.status == "completed"
    assert kb.methods["tools/call"] - calls == 2
    specs = {spec.name for spec in harness.provider.requests[0].tools}
    assert {"kb_lookup", "kb_fail", "echo"} <= specs
    tool_parts = [
        part for message in harness.transcript() if message.role == "tool" for part in message.parts
    ]
    by_name = {part.name: part for part in tool_parts}
    assert by_name["kb_lookup"].content == "release: 2 entries"
    assert not by_name["kb_lookup"].is_error
    assert by_name["kb_fail"].is_error
    assert by_name["echo"].content == "hi"


def test_turnkeep_mcp_urls_points_a_server_elsewhere_without_editing_its_definition(
    kb: HttpMcpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    source = mcp_server("kb", url=f"http://127.0.0.1:{free_port()}/mcp", allow=["lookup"])
    monkeypatch.setenv("TURNKEEP_MCP_URLS", json.dumps({"kb": kb.url, "other": "http://x/mcp"}))
    assert _run(source, "kb_lookup", {"term": "a"}) == ToolResult("a: 2 entries")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("not json", "TURNKEEP_MCP_URLS must be a JSON object"),
        ('["http://x/mcp"]', "TURNKEEP_MCP_URLS must be a JSON object"),
        ('{"kb": "ftp://x"}', r"TURNKEEP_MCP_URLS\['kb'\] must be an http:// or https:// URL"),
    ],
)
def test_a_bad_turnkeep_mcp_urls_fails_the_listing_clearly(
    kb: HttpMcpServer, monkeypatch: pytest.MonkeyPatch, value: str, message: str
) -> None:
    monkeypatch.setenv("TURNKEEP_MCP_URLS", value)
    with pytest.raises(ToolSourceError, match=message):
        mcp_server("kb", url=kb.url).list_tools()


def test_header_credentials_from_secrets_manager_and_ssm_reach_the_server(
    kb: HttpMcpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    import uuid

    import boto3
    from moto import mock_aws

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    secret, parameter = f"acme/docs-{uuid.uuid4().hex[:8]}", f"/acme/key-{uuid.uuid4().hex[:8]}"
    with mock_aws():
        boto3.client("secretsmanager").create_secret(
            Name=secret, SecretString=json.dumps({"token": "from-secrets"})
        )
        boto3.client("ssm").put_parameter(Name=parameter, Value="from-ssm", Type="SecureString")
        source = mcp_server(
            "kb",
            url=kb.url,
            allow=["lookup"],
            headers={
                "Authorization": f"Bearer secretsmanager:{secret}#token",
                "X-Api-Key": f"ssm:{parameter}",
            },
        )
        kb.headers.clear()
        assert _run(source, "kb_lookup", {"term": "a"}) == ToolResult("a: 2 entries")
    assert kb.headers
    assert {h.get("authorization") for h in kb.headers} == {"Bearer from-secrets"}
    assert {h.get("x-api-key") for h in kb.headers} == {"from-ssm"}


def test_a_rotated_header_credential_is_sent_from_the_next_call_on(
    kb: HttpMcpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KB_ROTATING_TOKEN", "first")
    source = mcp_server(
        "kb", url=kb.url, allow=["lookup"], headers={"Authorization": "env:KB_ROTATING_TOKEN"}
    )
    registry = ToolRegistry(source.list_tools())
    registry.run_call("kb_lookup", '{"term": "a"}', CTX)
    monkeypatch.setenv("KB_ROTATING_TOKEN", "second")
    kb.headers.clear()
    assert registry.run_call("kb_lookup", '{"term": "a"}', CTX) == ToolResult("a: 2 entries")
    assert [h.get("authorization") for h in kb.headers] == ["second"]
