"""The API and an approval inside a sub-agent's child turn: the parent's turn view says
`awaiting_approval`, `GET /approvals` and the parent's events list the child's request marked
with the sub-agent, and a decision on the parent's route resolves it (docs/approvals.md,
"Inside a sub-agent")."""

from __future__ import annotations

import json

from pydantic import BaseModel

from tests.support.api_client import OTHER, ApiHarness, auth
from turnkeep import Agent, Tool
from turnkeep.tools.base import ToolContext, ToolResult


class SendArgs(BaseModel):
    to: str


def _send(args: SendArgs, ctx: ToolContext) -> ToolResult:
    return ToolResult(f"sent to {args.to}")


MAILER = Agent(
    name="mailer",
    tools=[Tool("send_mail", "Send a mail.", SendArgs, _send, requires_approval=True)],
)
TASK = 'call send_mail {"to": "ops@example.com"}'


def _paused(api: ApiHarness) -> tuple[str, str]:
    api.runtime.deps.agent = Agent(name="triage", agents=[MAILER])
    sid = api.session()
    turn = api.start(sid, f"call mailer {json.dumps({'input': TASK})}")
    return sid, turn


def _pending(api: ApiHarness) -> list[dict[str, object]]:
    body = api.client.get("/approvals", headers=auth())
    assert body.status_code == 200, body.text
    pending: list[dict[str, object]] = body.json()["approvals"]
    return pending


def test_the_parent_turn_waits_and_lists_the_childs_request_marked_with_the_sub_agent(
    api: ApiHarness,
) -> None:
    sid, turn = _paused(api)

    view = api.client.get(f"/sessions/{sid}/turns/{turn}", headers=auth()).json()
    (pending,) = _pending(api)
    events = api.client.get(f"/sessions/{sid}/turns/{turn}/events", headers=auth()).json()

    assert view["status"] == "awaiting_approval"
    assert (pending["session_id"], pending["turn_id"], pending["tool"]) == (
        sid,
        turn,
        "send_mail",
    )
    assert pending["arguments"] == {"to": "ops@example.com"}
    marker = pending["subagent"]
    assert isinstance(marker, dict)
    assert marker["agent"] == "mailer"
    assert marker["path"] == ["mailer"]
    assert str(marker["session_id"]).startswith("sub-")
    asked = [e for e in events["events"] if e["kind"] == "approval_requested"]
    assert [(e["call_id"], e["tool"]) for e in asked] == [(pending["call_id"], "send_mail")]
    assert asked[0]["subagent"]["path"] == ["mailer"]
    assert _pending_for(api, OTHER) == []


def _pending_for(api: ApiHarness, user: str) -> list[object]:
    approvals: list[object] = api.client.get("/approvals", headers=auth(user)).json()["approvals"]
    return approvals


def test_approving_the_childs_request_on_the_parents_route_completes_both_turns(
    api: ApiHarness,
) -> None:
    sid, turn = _paused(api)
    (pending,) = _pending(api)

    decided = api.client.post(
        f"/sessions/{sid}/turns/{turn}/approvals/{pending['call_id']}",
        json={"decision": "approve"},
        headers=auth(),
    )

    assert decided.status_code == 202, decided.text
    view = api.client.get(f"/sessions/{sid}/turns/{turn}", headers=auth()).json()
    assert view["status"] == "completed"
    events = api.client.get(f"/sessions/{sid}/turns/{turn}/events", headers=auth()).json()
    shown = [e for e in events["events"] if e["kind"] == "approval_decided"]
    assert [(e["call_id"], e["decision"]) for e in shown] == [(pending["call_id"], "approve")]
    assert shown[0]["subagent"]["agent"] == "mailer"
    assert _pending(api) == []
    transcript = api.client.get(f"/sessions/{sid}/transcript", headers=auth()).json()
    assert "sent to ops@example.com" in json.dumps(transcript["entries"])
    marker = pending["subagent"]
    assert isinstance(marker, dict)
    child = api.client.get(f"/sessions/{marker['session_id']}", headers=auth()).json()
    assert child["turn"]["status"] == "completed"


def test_denying_the_childs_request_on_the_parents_route_gives_the_child_the_denial(
    api: ApiHarness,
) -> None:
    sid, turn = _paused(api)
    (pending,) = _pending(api)

    decided = api.client.post(
        f"/sessions/{sid}/turns/{turn}/approvals/{pending['call_id']}",
        json={"decision": "deny", "reason": "not now"},
        headers=auth(),
    )
    again = api.client.post(
        f"/sessions/{sid}/turns/{turn}/approvals/{pending['call_id']}",
        json={"decision": "approve"},
        headers=auth(),
    )

    assert decided.status_code == 202, decided.text
    assert again.status_code == 409, again.text
    transcript = api.client.get(f"/sessions/{sid}/transcript", headers=auth()).json()
    assert "the user denied this call of send_mail: not now" in json.dumps(transcript["entries"])


def test_cancelling_the_parent_while_the_child_waits_aborts_both(api: ApiHarness) -> None:
    sid, turn = _paused(api)
    (pending,) = _pending(api)
    marker = pending["subagent"]
    assert isinstance(marker, dict)

    cancelled = api.client.post(f"/sessions/{sid}/turns/{turn}/cancel", headers=auth())

    assert cancelled.status_code == 202, cancelled.text
    assert cancelled.json()["status"] == "aborted"
    child = api.client.get(f"/sessions/{marker['session_id']}", headers=auth()).json()
    assert child["turn"]["status"] == "aborted"
    assert _pending(api) == []
    late = api.client.post(
        f"/sessions/{sid}/turns/{turn}/approvals/{pending['call_id']}",
        json={"decision": "approve"},
        headers=auth(),
    )
    assert late.status_code == 409, late.text


def test_paging_a_finished_parent_one_event_at_a_time_sends_every_event_once_and_each_approval_once(
    api: ApiHarness,
) -> None:
    sid, turn = _paused(api)
    (pending,) = _pending(api)
    api.client.post(
        f"/sessions/{sid}/turns/{turn}/approvals/{pending['call_id']}",
        json={"decision": "approve"},
        headers=auth(),
    )
    route = f"/sessions/{sid}/turns/{turn}/events"
    whole = api.client.get(route, headers=auth()).json()
    assert whole["finished"] is True

    paged: list[dict[str, object]] = []
    cursor: object = 0
    for _ in range(200):  # the child's approval events are passed without being sent
        page = api.client.get(route, params={"cursor": cursor, "limit": 1}, headers=auth()).json()
        paged += page["events"]
        cursor = page["next_cursor"]
        if page["finished"]:
            break
    else:
        raise AssertionError(f"paging never finished: stuck at cursor {cursor}")

    def key(e: dict[str, object]) -> tuple[object, ...]:
        return (e["kind"], e["seq"], json.dumps(e.get("nested")))

    assert [key(e) for e in paged] == [key(e) for e in whole["events"]]
    kinds = [e["kind"] for e in paged]
    assert (kinds.count("approval_requested"), kinds.count("approval_decided")) == (1, 1)
    assert all(not e.get("nested") for e in paged if str(e["kind"]).startswith("approval"))
    assert any(e.get("nested") for e in paged)  # the child's other events are nested in
