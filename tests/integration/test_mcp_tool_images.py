"""An MCP tool's `image` content reaches the turn as images of the result (docs/mcp.md,
"Images in results"), against a real server built with the `mcp` server SDK."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from mcp.server.mcpserver import Image, MCPServer
from mcp_types import ImageContent, TextContent

from tests.support.attachment_samples import png_bytes
from tests.support.mcp_servers import HttpMcpServer
from turnkeep.mcp import mcp_server
from turnkeep.tools.base import ToolContext, ToolResult
from turnkeep.tools.registry import ToolRegistry

CTX = ToolContext("s1", "u1", "op1", "call1")


def _server() -> Any:
    server = MCPServer("shots", log_level="WARNING")

    @server.tool(structured_output=False)
    def screenshot(width: int = 4) -> list[TextContent | ImageContent]:
        """A caption and a PNG."""
        image = Image(data=png_bytes(width, 2), format="png").to_image_content()
        return [TextContent(type="text", text="the screen"), image]

    @server.tool(structured_output=False)
    def fake() -> Image:
        """Claims a PNG but sends text bytes."""
        return Image(data=b"plain text, not a png", format="png")

    return server


@pytest.fixture(scope="module")
def shots() -> Iterator[HttpMcpServer]:
    with HttpMcpServer("shots", _server()) as server:
        yield server


def _run(url: str, name: str, arguments: dict[str, Any]) -> ToolResult:
    registry = ToolRegistry(mcp_server("shots", url=url).list_tools())
    return registry.run_call(name, json.dumps(arguments), CTX)


def test_an_mcp_image_content_block_becomes_an_image_of_the_result(shots: HttpMcpServer) -> None:
    result = _run(shots.url, "shots_screenshot", {"width": 7})

    assert not result.is_error
    assert result.content == "the screen\n[image 2 (image/png), attached]"
    (image,) = result.images
    assert image.data == png_bytes(7, 2)
    assert image.media_type == "image/png"


def test_image_content_whose_bytes_are_no_image_stays_a_note_and_is_not_sent(
    shots: HttpMcpServer,
) -> None:
    result = _run(shots.url, "shots_fake", {})

    assert result.images == ()
    assert result.content == "[image content (image/png), not shown]"
