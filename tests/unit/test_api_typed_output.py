"""The API and typed results: `GET /agent` shows the output schema, a turn's validated result
is in its turn view, its events page once finished and the SSE `end` event, a turn start may
pass its own `output_schema` only where the agent allows it (a 422 naming the field otherwise,
and nothing starts) (docs/agent.md, "Typed results"; docs/api.md)."""

from __future__ import annotations

import json
from typing import Any, Literal

import pytest
from pydantic import BaseModel

from tests.support.api_client import ApiHarness, auth
from turnkeep import Agent
from turnkeep.agent.output import MAX_OUTPUT_SCHEMA_BYTES
from turnkeep.api.hub import LiveHub


class Verdict(BaseModel):
    label: Literal["bug", "feature"]
    confidence: float


VALID = 'call final_result {"label": "bug", "confidence": 0.9}'
COUNT = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


def _sse_events(text: str) -> list[tuple[str, Any]]:
    out = []
    for block in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in block.splitlines() if ": " in line)
        out.append((lines.get("event", ""), json.loads(lines.get("data", "null"))))
    return out


def test_get_agent_shows_the_output_schema_and_whether_a_turn_may_pass_one(
    api: ApiHarness,
) -> None:
    api.runtime.deps.agent = Agent(output_type=Verdict, output_retries=3)

    body = api.client.get("/agent", headers=auth()).json()

    assert body["output_schema"] == Verdict.model_json_schema()
    assert body["output_retries"] == 3
    assert body["turn_output_schema"] is False
    assert "final_result" not in {t["name"] for t in body["tools"]}  # offered per turn


def test_a_typed_turns_result_is_in_its_view_its_events_page_and_its_sse_end(
    api: ApiHarness,
) -> None:
    api.runtime.deps.agent = Agent(output_type=Verdict)
    api.runtime.deps.live = LiveHub()  # what `turnkeep serve` streams from
    sid = api.session()
    turn = api.start(sid, VALID)
    expected = {"label": "bug", "confidence": 0.9}

    view = api.client.get(f"/sessions/{sid}/turns/{turn}", headers=auth()).json()
    page = api.client.get(f"/sessions/{sid}/turns/{turn}/events", headers=auth()).json()
    stream = api.client.get(f"/sessions/{sid}/turns/{turn}/stream", headers=auth())

    assert (view["status"], view["output"], view["error_code"]) == ("completed", expected, None)
    assert page["finished"] is True
    assert page["output"] == expected
    assert stream.status_code == 200, stream.text
    ends = [data for kind, data in _sse_events(stream.text) if kind == "end"]
    assert len(ends) == 1
    assert ends[0]["output"] == expected


def test_a_turn_failed_output_invalid_says_so_in_its_view(api: ApiHarness) -> None:
    api.runtime.deps.agent = Agent(output_type=Verdict, output_retries=0)
    sid = api.session()
    turn = api.start(sid, 'call final_result {"label": "question", "confidence": 1}')

    view = api.client.get(f"/sessions/{sid}/turns/{turn}", headers=auth()).json()

    assert (view["status"], view["error_code"], view["output"]) == (
        "failed",
        "output_invalid",
        None,
    )
    assert "label: Input should be 'bug' or 'feature'" in view["error"]


def test_a_turn_passes_its_own_output_schema_where_the_agent_allows_it(api: ApiHarness) -> None:
    api.runtime.deps.agent = Agent(turn_settings=["max_tokens", "output_schema"])
    sid = api.session()

    response = api.client.post(
        f"/sessions/{sid}/turns",
        json={"text": 'call final_result {"n": 7}', "output_schema": COUNT},
        headers=auth(),
    )

    assert response.status_code == 202, response.text
    turn = response.json()["turn_id"]
    view = api.client.get(f"/sessions/{sid}/turns/{turn}", headers=auth()).json()
    assert (view["status"], view["output"]) == ("completed", {"n": 7})


@pytest.mark.parametrize(
    ("settings", "schema", "text"),
    [
        (None, COUNT, "this agent does not let a turn set it"),
        (["output_schema"], {"type": "objekt"}, "not a valid JSON Schema"),
        (
            ["output_schema"],
            {"type": "object", "description": "x" * MAX_OUTPUT_SCHEMA_BYTES},
            f"the limit is {MAX_OUTPUT_SCHEMA_BYTES}",
        ),
        (["output_schema"], [1, 2], "valid dictionary"),
    ],
)
def test_a_refused_output_schema_is_422_naming_it_and_nothing_starts(
    paused_api: ApiHarness, settings: list[str] | None, schema: object, text: str
) -> None:
    if settings is not None:
        paused_api.runtime.deps.agent = Agent(turn_settings=settings)
    sid = paused_api.session()
    before = paused_api.snapshot(sid)

    response = paused_api.client.post(
        f"/sessions/{sid}/turns", json={"text": "hi", "output_schema": schema}, headers=auth()
    )

    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert error["field"] == "output_schema"
    assert text in error["message"]
    assert paused_api.snapshot(sid) == before
    assert paused_api.launcher.launched == []
