"""`turnkeep.Image` and function tools that return images (docs/agent.md, "Function tools")."""

from __future__ import annotations

import json
import pickle

import pytest

import turnkeep
from tests.support.attachment_samples import PDF_BYTES, png_bytes
from turnkeep import Image, tool
from turnkeep.agent.function_tool import result_of
from turnkeep.tools.base import ToolContext
from turnkeep.tools.registry import ToolRegistry

CTX = ToolContext("s1", "u1", "op1", "call1")


def test_an_image_reads_its_media_type_from_the_bytes() -> None:
    assert Image(png_bytes(), "chart.png").media_type == "image/png"
    assert turnkeep.Image is Image


def test_bytes_that_are_no_image_or_disagree_with_the_declared_type_are_refused() -> None:
    with pytest.raises(ValueError, match="not a PNG, JPEG, GIF or WebP"):
        Image(PDF_BYTES, "scan.png")
    with pytest.raises(ValueError, match="declared image/jpeg but the bytes are image/png"):
        Image(png_bytes(), "a.jpg", "image/jpeg")


def test_a_function_tool_returning_an_image_gives_a_result_with_the_image() -> None:
    @tool
    def chart() -> Image:
        """Draw the chart."""
        return Image(png_bytes(), "chart.png")

    result = ToolRegistry([chart]).run_call("chart", json.dumps({}), CTX)

    assert result.images == (Image(png_bytes(), "chart.png"),)
    assert result.content == f"[image: chart.png (image/png, {len(png_bytes())} bytes)]"


def test_a_list_of_text_and_images_keeps_the_text_as_the_result() -> None:
    result = result_of("chart", ["the chart:", Image(png_bytes(), "c.png"), "done"])

    assert result.content == "the chart:\ndone"
    assert [i.name for i in result.images] == ["c.png"]


def test_images_beside_values_that_are_not_text_are_a_tool_error() -> None:
    result = result_of("chart", [{"a": 1}, Image(png_bytes())])

    assert result.is_error
    assert "list of str and turnkeep.Image" in result.content


def test_a_result_with_images_survives_the_trip_to_a_worker_process() -> None:
    result = result_of("chart", Image(png_bytes(), "c.png"))

    assert pickle.loads(pickle.dumps(result)) == result
