"""The API and the agent: `GET /agent` describes it in the console's fixed shape, a turn start
takes the agent's allowed model settings (422 otherwise) and honours the session's
`selectedModel`, `POST /sessions` takes a persona, and an edit of a call whose tool source cannot
list now answers 503."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from tests.support import function_tools as ft
from tests.support.api_client import USER, ApiHarness, auth, make_api_harness
from turnkeep import Agent, Tool, tool
from turnkeep.api import ApiSettings
from turnkeep.harness.state import load_state
from turnkeep.storage import open_storage
from turnkeep.tools.sources import ToolSourceError


class FakeSource:
    """A tool source in the test; `failing` makes its listing fail."""

    def __init__(self, name: str, tools: Sequence[Tool[Any]]) -> None:
        self._name, self.tools, self.failing = name, list(tools), False

    @property
    def name(self) -> str:
        return self._name

    def list_tools(self) -> Sequence[Tool[Any]]:
        if self.failing:
            raise ToolSourceError(self._name, "HTTP 502 from http://127.0.0.1:9/mcp")
        return self.tools


def _search(query: str) -> str:
    """Search the docs."""
    return f"pages about {query}"


# GET /agent's fields, in the order the console and docs/api.md show them.
AGENT_VIEW_FIELDS = [
    "name",
    "description",
    "instructions",
    "model",
    "allowed_models",
    "model_settings",
    "tools",
    "unavailable_sources",
    "sub_agents",
    "output_schema",
    "output_retries",
    "turn_output_schema",
]


@pytest.fixture
def api() -> Iterator[ApiHarness]:
    yield from make_api_harness(settings=ApiSettings(allowed_models=["scripted?delay_ms=1"]))


def test_get_agent_describes_the_demo_agent_in_the_consoles_shape(api: ApiHarness) -> None:
    response = api.client.get("/agent", headers=auth())

    assert response.status_code == 200, response.text
    body = response.json()
    assert list(body) == AGENT_VIEW_FIELDS
    assert body["name"] == "demo"
    assert body["instructions"].startswith("You are turnkeep's agent.")
    assert body["model"] == "scripted"
    assert body["allowed_models"] == ["scripted", "scripted?delay_ms=1"]
    assert body["model_settings"] == {}
    assert body["unavailable_sources"] == []
    assert body["sub_agents"] == []
    sources = {t["name"]: t["source"] for t in body["tools"]}
    assert sources == {
        "working_notes_get": "notes",
        "working_notes_update": "notes",
        "working_notes_clear": "notes",
        "clock_now": "builtin",
        "calculator": "builtin",
        "echo": "builtin",
        "read_tool_result": "builtin",
    }
    calculator = next(t for t in body["tools"] if t["name"] == "calculator")
    assert list(calculator) == [
        "name",
        "description",
        "source",
        "requires_approval",
        "replay_safe",
        "input_schema",
    ]
    assert calculator["replay_safe"] is True
    assert calculator["input_schema"]["required"] == ["expression"]
    assert api.client.get("/agent").status_code == 401


def test_get_agent_lists_function_and_source_tools_and_a_source_that_cannot_list(
    api: ApiHarness,
) -> None:
    docs, wiki = FakeSource("docs", [tool(name="docs_search")(_search)]), FakeSource("wiki", [])
    wiki.failing = True
    api.runtime.deps.agent = Agent(
        name="helper",
        instructions="Help.",
        tools=[tool(requires_approval=True)(ft.bare_add)],
        mcp_servers=[docs, wiki],
        model_settings={"temperature": 0.2},
    )

    body = api.client.get("/agent", headers=auth()).json()

    assert body["instructions"] == "Help."
    assert body["model_settings"] == {"temperature": 0.2}
    tools = {t["name"]: (t["source"], t["requires_approval"]) for t in body["tools"]}
    assert tools["bare_add"] == ("function", True)
    assert tools["docs_search"] == ("mcp:docs", False)
    assert body["unavailable_sources"] == [
        {"name": "wiki", "error": "tool source 'wiki': HTTP 502 from http://127.0.0.1:9/mcp"}
    ]


def test_get_agent_names_a_source_whose_clashing_tools_are_left_out_and_lists_its_others(
    api: ApiHarness,
) -> None:
    grocer = FakeSource(
        "grocer", [tool(name="grocer_price")(_search), tool(name="grocer_stock")(_search)]
    )
    api.runtime.deps.agent = Agent(
        tools=[tool(name="grocer_price")(ft.bare_add)], mcp_servers=[grocer]
    )

    body = api.client.get("/agent", headers=auth()).json()

    tools = {t["name"]: t["source"] for t in body["tools"]}
    assert tools["grocer_price"] == "function"
    assert tools["grocer_stock"] == "mcp:grocer"
    assert body["unavailable_sources"] == [
        {
            "name": "grocer",
            "error": "tool source 'grocer': its tool 'price', named 'grocer_price', clashes with "
            "the agent's function tool 'grocer_price': rename one, or leave the server's out "
            "with deny=['price']",
        }
    ]


def _recorded(api: ApiHarness, sid: str, turn: str) -> Any:
    storage = open_storage(api.runtime.storage_url, sid)
    try:
        return load_state(storage, turn)
    finally:
        storage.close()


@pytest.fixture
def paused() -> Iterator[ApiHarness]:
    yield from make_api_harness(
        run_turns=False, settings=ApiSettings(allowed_models=["scripted?delay_ms=1"])
    )


def test_a_turn_takes_allowed_model_settings_and_records_them(paused: ApiHarness) -> None:
    paused.runtime.deps.agent = Agent(model_settings={"max_tokens": 512})
    sid = paused.session()

    response = paused.client.post(
        f"/sessions/{sid}/turns",
        json={"text": "hi", "model_settings": {"temperature": 0.3}},
        headers=auth(),
    )

    assert response.status_code == 202, response.text
    state = _recorded(paused, sid, response.json()["turn_id"])
    assert state.model_settings == {"max_tokens": 512, "temperature": 0.3}


@pytest.mark.parametrize(
    ("settings", "field", "text"),
    [
        ({"extra": {"x": 1}}, "model_settings.extra", "this agent does not let a turn set it"),
        ({"temperature": 9}, "model_settings.temperature", "less than or equal to 2"),
        ({"nonsense": 1}, "model_settings.nonsense", "does not let a turn set it"),
    ],
)
def test_a_refused_model_setting_is_422_naming_it_and_nothing_starts(
    paused: ApiHarness, settings: dict[str, Any], field: str, text: str
) -> None:
    sid = paused.session()
    before = paused.snapshot(sid)

    response = paused.client.post(
        f"/sessions/{sid}/turns", json={"text": "hi", "model_settings": settings}, headers=auth()
    )

    assert response.status_code == 422, response.text
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("validation_error", field)
    assert text in error["message"]
    assert paused.snapshot(sid) == before
    assert paused.launcher.launched == []


def test_the_sessions_selected_model_runs_when_the_turn_names_none(paused: ApiHarness) -> None:
    sid = paused.session()
    put = paused.client.put(
        f"/sessions/{sid}/meta", json={"selectedModel": "scripted?delay_ms=1"}, headers=auth()
    )
    assert put.status_code == 200, put.text

    turn = paused.start(sid, "hi")

    assert _recorded(paused, sid, turn).model == "scripted?delay_ms=1"


def test_a_selected_model_no_longer_offered_is_the_same_422_at_the_turn_start(
    paused: ApiHarness,
) -> None:
    sid = paused.session()
    # Stored while the server offered it (the PUT refuses it now): a redeploy dropped it since.
    paused.runtime.envelopes.put_host_meta(sid, USER, {"selectedModel": "scripted?delay_ms=99"})

    response = paused.client.post(f"/sessions/{sid}/turns", json={"text": "hi"}, headers=auth())

    assert response.status_code == 422
    error = response.json()["error"]
    assert (error["code"], error["field"]) == ("model_not_allowed", "selectedModel")
    assert paused.launcher.launched == []


def test_an_agents_allowed_models_join_the_servers(paused: ApiHarness) -> None:
    paused.runtime.deps.agent = Agent(allowed_models=["scripted?words_per_frame=2"])
    sid = paused.session()

    response = paused.client.post(
        f"/sessions/{sid}/turns",
        json={"text": "hi", "model": "scripted?words_per_frame=2"},
        headers=auth(),
    )

    assert response.status_code == 202, response.text


def test_a_session_can_be_created_with_a_persona(api: ApiHarness) -> None:
    response = api.client.post(
        "/sessions",
        json={"session_id": "s-persona", "personaSnapshot": "Be terse."},
        headers=auth(),
    )

    assert response.status_code == 201, response.text
    envelope = api.runtime.envelopes.get("s-persona")
    assert envelope is not None
    assert envelope.meta["personaSnapshot"] == "Be terse."
    too_big = api.client.post("/sessions", json={"personaSnapshot": "x" * 200_000}, headers=auth())
    assert too_big.status_code == 422
    assert too_big.json()["error"]["field"] == "personaSnapshot"


def test_an_edit_whose_tool_source_cannot_list_now_is_503_and_decides_nothing(
    api: ApiHarness,
) -> None:
    docs = FakeSource("docs", [tool(name="docs_search", requires_approval=True)(_search)])
    api.runtime.deps.agent = Agent(mcp_servers=[docs])
    sid = api.session()
    turn = api.start(sid, 'call docs_search {"query": "refunds"}')
    (pending,) = api.client.get("/approvals", headers=auth()).json()["approvals"]
    docs.failing = True

    edit = api.client.post(
        f"/sessions/{sid}/turns/{turn}/approvals/{pending['call_id']}",
        json={"decision": "edit", "arguments": {"query": "returns"}},
        headers=auth(),
    )

    assert edit.status_code == 503, edit.text
    assert edit.json()["error"]["code"] == "unavailable"
    assert "tool source 'docs'" in edit.json()["error"]["message"]
    assert edit.headers["Retry-After"] == "5"
    still = api.client.get("/approvals", headers=auth()).json()["approvals"]
    assert [p["call_id"] for p in still] == [pending["call_id"]]


def test_the_openapi_schema_documents_the_agent_view_in_its_fixed_shape(api: ApiHarness) -> None:
    schema = api.client.get("/openapi.json").json()

    operation = schema["paths"]["/agent"]["get"]
    ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok == {"$ref": "#/components/schemas/AgentView"}
    components = schema["components"]["schemas"]
    assert list(components["AgentView"]["properties"]) == AGENT_VIEW_FIELDS
    assert list(components["AgentTool"]["properties"]) == [
        "name",
        "description",
        "source",
        "requires_approval",
        "replay_safe",
        "input_schema",
    ]
    assert list(components["UnavailableSource"]["properties"]) == ["name", "error"]
    assert {"401", "503"} <= set(operation["responses"])


def test_get_agent_lists_the_sub_agents_as_agent_tools_and_describes_each(api: ApiHarness) -> None:
    editor = Agent(name="editor", description="Edits.", tools=[ft.bare_add])
    writer = Agent(name="writer", description="Writes.", model="scripted", agents=[editor])
    api.runtime.deps.agent = Agent(
        name="triage", agents=[writer, writer.as_tool(name="drafter", description="Drafts.")]
    )

    body = api.client.get("/agent", headers=auth()).json()

    sources = {t["name"]: t["source"] for t in body["tools"]}
    assert sources["writer"] == sources["drafter"] == "agent"
    drafter = next(t for t in body["tools"] if t["name"] == "drafter")
    assert drafter["description"] == "Drafts."
    assert drafter["replay_safe"] is True
    assert drafter["input_schema"]["required"] == ["input"]
    assert [s["name"] for s in body["sub_agents"]] == ["writer", "drafter"]
    first = body["sub_agents"][0]
    assert first == {
        "name": "writer",
        "description": "Writes.",
        "agent": "writer",
        "model": "scripted",
        "tools": ["editor"],
        "sub_agents": [
            {
                "name": "editor",
                "description": "Edits.",
                "agent": "editor",
                "model": None,
                "tools": ["bare_add"],
                "sub_agents": [],
                "output_schema": None,
            }
        ],
        "output_schema": None,
    }
