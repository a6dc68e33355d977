"""The `make sam-local-test` scenario, run against a started SAM local stack: turns through
`sam local start-api` and the state machine, every `events/` sample through
`sam local start-lambda`, and the AWS SDK pair the layer gives the functions.

Each check records pass/fail with its reason; one failing check does not stop the others.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tools.sam_local import seed
from tools.sam_local.executor import Execution, LocalExecutor, StartLambda
from tools.sam_local.lambda_errors import TaskFailure
from tools.sam_local.stack import RUNTIME_PYTHON
from tools.sam_local.template import ROOT

USER = "sam-local-user"
FAILING_MODEL = "openai:http://127.0.0.1:9/v1#unreachable"  # allowed in events/env.json
TURN_TIMEOUT = 240.0
HTTP_TIMEOUT = 180.0
"""Per request through start-api: a function's first request builds its image and starts its
container first (over a minute on a busy machine)."""
# Both API samples are what docs/api.md documents for them, in this order.
API_SAMPLES = [
    ("create_session", 201),
    ("put_meta", 200),
    ("start_turn", 202),
    ("get_events", 200),
    ("cancel_turn", 202),
]


class CheckFailedError(AssertionError):
    """A scenario check did not hold."""


def require(condition: bool, message: str) -> None:
    """Fail the running check with `message` unless `condition`."""
    if not condition:
        raise CheckFailedError(message)


@dataclass
class Turn:
    """A turn run through start-api: its id, final view, events and execution outcome."""

    turn_id: str
    view: dict[str, Any]
    events: list[dict[str, Any]]
    execution: Execution

    def reply(self) -> str:
        """Text of the assistant entries, in order."""
        return "\n".join(
            str(part.get("text", ""))
            for event in self.events
            if event.get("kind") == "entry" and event.get("role") == "assistant"
            for part in event.get("parts") or []
            if isinstance(part, dict) and part.get("kind") == "text"
        )

    def tool_results(self) -> list[dict[str, Any]]:
        """The tool_result parts of the turn's tool entries."""
        return [
            part
            for event in self.events
            if event.get("kind") == "entry" and event.get("role") == "tool"
            for part in event.get("parts") or []
            if isinstance(part, dict) and part.get("kind") == "tool_result"
        ]


@dataclass
class Scenario:
    """Checks against one stack; `results` holds (name, passed, detail)."""

    api_url: str
    moto_url: str
    lambdas: StartLambda
    executor: LocalExecutor
    names: seed.LocalNames
    sam_logs: list[Path]
    layer_python: Path
    results: list[tuple[str, bool, str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.http = httpx.Client(
            base_url=self.api_url,
            timeout=HTTP_TIMEOUT,
            headers={"Authorization": f"Bearer dev-{USER}"},
        )
        self.s3 = seed.client("s3", self.moto_url)

    # -- running checks ------------------------------------------------------------------------
    def check(self, name: str, body: Callable[[], str | None]) -> None:
        """Run one check; a raised exception is its failure."""
        try:
            detail = body() or ""
            self.results.append((name, True, detail))
            print(f"ok    {name}{': ' + detail if detail else ''}", flush=True)
        except Exception as exc:  # the report names every failure, the run goes on
            reason = f"{type(exc).__name__}: {exc}"
            if not isinstance(exc, CheckFailedError):
                reason += "\n" + "".join(traceback.format_exception(exc)[-3:])
            self.results.append((name, False, reason))
            print(f"FAIL  {name}: {reason}", flush=True)

    def run(self) -> list[tuple[str, bool, str]]:
        """Every check, in order."""
        session: dict[str, str] = {}
        self.check("start-api without a token answers 401",
                   self._unauthenticated_is_401)  # fmt: skip
        self.check("create a session through start-api", lambda: self._create_session(session))
        self.check("turn 'remember my cat is Rex' completes",
                   lambda: self._remember(session["id"]))  # fmt: skip
        self.check("turn 'what do you remember?' replies with the note",
                   lambda: self._recall(session["id"]))  # fmt: skip
        self.check("turn with two parallel tool calls completes",
                   lambda: self._parallel_tools(session["id"]))  # fmt: skip
        self.check("a step that fails ends the turn failed with its message",
                   lambda: self._failing_step(session["id"]))  # fmt: skip
        self.check("turn step samples (events/turn_steps) on a fresh turn", self._step_samples)
        self.check("API samples (events/api) answer their documented status", self._api_samples)
        self.check("boto3/botocore inside the Lambda container are the layer's pair",
                   self._sdk_versions)  # fmt: skip
        self.check("the layer's python3.12 bytecode is used on a read-only copy",
                   self._bytecode)  # fmt: skip
        return self.results

    def run_agent(self) -> list[tuple[str, bool, str]]:
        """The checks of the example agent's stack (AgentRef set on every function)."""
        session: dict[str, str] = {}
        self.check("GET /agent names the example agent", self._agent_view)
        self.check("create a session of the example agent", lambda: self._create_session(session))
        self.check("turn calling the example agent's sync and async function tools completes",
                   lambda: self._agent_tools(session["id"]))  # fmt: skip
        self.check("turn calling a function tool and an MCP tool of the example agent completes",
                   lambda: self._agent_mcp_tools(session["id"]))  # fmt: skip
        self.check("a call needing approval waits, the decision through start-api releases its "
                   "task token and the turn completes",
                   lambda: self._approval(session["id"]))  # fmt: skip
        self.check("a sub-agent call runs as a child turn in an execution of its own, the parent "
                   "waits on its task token and completes with the child's result",
                   lambda: self._sub_agent(session["id"]))  # fmt: skip
        return self.results

    # -- helpers -------------------------------------------------------------------------------
    def _turn(self, session_id: str, text: str, model: str | None = None) -> Turn:
        return self._ended(session_id, self._start(session_id, text, model))

    def _start(self, session_id: str, text: str, model: str | None = None) -> str:
        body: dict[str, Any] = {"text": text}
        if model:
            body["model"] = model
        started = self.http.post(f"/sessions/{session_id}/turns", json=body)
        require(started.status_code == 202, f"start answered {started.status_code}: {started.text}")
        turn_id: str = started.json()["turn_id"]
        return turn_id

    def _ended(self, session_id: str, turn_id: str) -> Turn:
        """The turn once its execution ended: its events, final view and scope retired."""
        execution = self.executor.wait(turn_id, TURN_TIMEOUT)
        events: list[dict[str, Any]] = []
        cursor = 0
        for _ in range(200):
            page = self.http.get(
                f"/sessions/{session_id}/turns/{turn_id}/events",
                params={"cursor": cursor, "limit": 50},
            )
            require(page.status_code == 200, f"events answered {page.status_code}: {page.text}")
            data = page.json()
            events += data["events"]
            cursor = data["next_cursor"]
            if data["finished"]:
                break
        else:
            raise CheckFailedError("the events never reported finished")
        view = self.http.get(f"/sessions/{session_id}/turns/{turn_id}").json()
        self._require_scope_retired(session_id, turn_id)
        return Turn(turn_id, view, events, execution)

    def _require_scope_retired(self, session_id: str, turn_id: str) -> None:
        from turnkeep.harness.state import op_scope

        scope_id = op_scope(turn_id).id
        prefix = f"{self.names.prefix}/sessions/{session_id}/"
        pages = self.s3.get_paginator("list_objects_v2").paginate(
            Bucket=self.names.bucket, Prefix=prefix
        )
        left = [o["Key"] for p in pages for o in p.get("Contents", []) if scope_id in o["Key"]]
        require(not left, f"{len(left)} object(s) left under the turn's scope: {left[:3]}")

    # -- checks --------------------------------------------------------------------------------
    def _unauthenticated_is_401(self) -> str:
        answer = httpx.post(f"{self.api_url}/sessions", json={"title": "x"}, timeout=HTTP_TIMEOUT)
        require(answer.status_code == 401, f"answered {answer.status_code}: {answer.text}")
        return "401 unauthenticated"

    def _create_session(self, session: dict[str, str]) -> str:
        answer = self.http.post("/sessions", json={"title": "sam local"})
        require(answer.status_code == 201, f"answered {answer.status_code}: {answer.text}")
        session["id"] = answer.json()["session_id"]
        return session["id"]

    def _completed(self, turn: Turn) -> None:
        require(turn.execution.status == "SUCCEEDED", f"execution {turn.execution}")
        require(turn.view.get("status") == "completed", f"turn view {turn.view}")

    def _remember(self, session_id: str) -> str:
        turn = self._turn(session_id, "remember my cat is Rex")
        self._completed(turn)
        require("Noted." in turn.reply(), f"reply {turn.reply()!r}")
        return f"{turn.turn_id}: {turn.reply()!r}"

    def _recall(self, session_id: str) -> str:
        turn = self._turn(session_id, "what do you remember?")
        self._completed(turn)
        require("my cat is Rex" in turn.reply(), f"reply {turn.reply()!r}")
        return f"{turn.turn_id}: reply quotes the note"

    def _parallel_tools(self, session_id: str) -> str:
        text = 'call echo {"text": "left"}\ncall calculator {"expression": "6*7"}'
        turn = self._turn(session_id, text)
        self._completed(turn)
        results = turn.tool_results()
        contents = sorted(str(r.get("content")) for r in results)
        require(len(results) == 2, f"tool results {results}")
        require(any("left" in c for c in contents) and any("42" in c for c in contents),
                f"tool results {contents}")  # fmt: skip
        return f"{turn.turn_id}: {contents}"

    def _agent_view(self) -> str:
        answer = self.http.get("/agent")
        require(answer.status_code == 200, f"answered {answer.status_code}: {answer.text}")
        body = answer.json()
        require(body["name"] == "release_assistant", f"agent {body['name']!r}")
        tools = {t["name"]: t["source"] for t in body["tools"]}
        require(tools.get("check_ci") == "function", f"tools {tools}")
        # The API function's container lists the docs MCP server (docs-mcp on the network).
        require(tools.get("docs_search") == "mcp:docs", f"tools {tools}")
        require(not body["unavailable_sources"], f"unavailable {body['unavailable_sources']}")
        return f"{body['name']}: {sorted(tools)}"

    def _agent_tools(self, session_id: str) -> str:
        text = 'call lookup_ticket {"ticket_id": "REL-101"}\ncall check_ci {"limit": 1}'
        turn = self._turn(session_id, text)
        self._completed(turn)
        contents = [str(r.get("content")) for r in turn.tool_results()]
        require(len(contents) == 2, f"tool results {contents}")
        require('"id":"REL-101"' in contents[0], f"lookup_ticket {contents[0]!r}")
        require('"run":8812' in contents[1], f"check_ci {contents[1]!r}")
        return f"{turn.turn_id}: {[c[:40] for c in contents]}"

    def _agent_mcp_tools(self, session_id: str) -> str:
        text = 'call lookup_ticket {"ticket_id": "REL-102"}\ncall docs_search {"query": "hotfix"}'
        turn = self._turn(session_id, text)
        self._completed(turn)
        results = {str(r.get("name")): r for r in turn.tool_results()}
        ticket, docs = results.get("lookup_ticket"), results.get("docs_search")
        if ticket is None or docs is None:
            raise CheckFailedError(f"tool results {results}")
        require(not ticket.get("is_error"), f"tool results {results}")
        require('"id":"REL-102"' in str(ticket["content"]), f"lookup_ticket {ticket}")
        require(not docs.get("is_error"), f"tool results {results}")
        require(docs["content"] == "hotfix: Hotfixes", f"docs_search {docs}")
        # Each tool call ran in a ToolStepFunction container (the MCP call from inside it).
        calls = self.lambdas.calls_for(turn.turn_id)
        tool_steps = [c for c in calls if c[0] == "ToolStepFunction"]
        require(tool_steps == [("ToolStepFunction", "ok")] * 2, f"invocations {calls}")
        require(all(outcome == "ok" for _f, outcome in calls), f"invocations {calls}")
        return f"{turn.turn_id}: lookup_ticket + docs_search ({len(calls)} Lambda invocations)"

    def _approval(self, session_id: str) -> str:
        arguments = {"version": "2.4.0", "notes": "- Faster checkout (REL-101)"}
        turn_id = self._start(session_id, "call publish_release_notes " + json.dumps(arguments))
        pending = self._pending_approval(turn_id)
        call_id = str(pending["call_id"])
        require(pending["tool"] == "publish_release_notes", f"pending {pending}")
        decided = self.http.post(
            f"/sessions/{session_id}/turns/{turn_id}/approvals/{call_id}",
            json={"decision": "approve"},
        )
        require(
            decided.status_code == 202, f"decision answered {decided.status_code}: {decided.text}"
        )
        turn = self._ended(session_id, turn_id)
        self._completed(turn)
        (result,) = [r for r in turn.tool_results() if r.get("call_id") == call_id]
        content = str(result.get("content"))
        require(not result.get("is_error") and content.startswith("published 2.4.0"),
                f"result {result}")  # fmt: skip
        calls = self.lambdas.calls_for(turn_id)
        tool_steps = [f for f, _o in calls if f == "ToolStepFunction"]
        # asked (awaiting_approval), the wait's hold of its token, the call run once decided
        require(len(tool_steps) == 3, f"invocations {calls}")
        return f"{turn_id}: approved {call_id}: {content!r}; {_count(calls)}"

    def _pending_approval(self, turn_id: str) -> dict[str, Any]:
        """The turn's request in GET /approvals, once there (read every 0.5 s, bounded)."""
        deadline = time.monotonic() + TURN_TIMEOUT
        while time.monotonic() < deadline:
            answer = self.http.get("/approvals")
            require(answer.status_code == 200, f"approvals answered {answer.status_code}")
            for pending in answer.json()["approvals"]:
                if pending["turn_id"] == turn_id:
                    found: dict[str, Any] = pending
                    return found
            ended = self.executor.outcomes().get(turn_id)
            require(ended is None or ended.status == "RUNNING", f"turn ended unasked: {ended}")
            time.sleep(0.5)
        raise CheckFailedError(f"no approval request of {turn_id} within {TURN_TIMEOUT:.0f} s")

    def _sub_agent(self, session_id: str) -> str:
        from turnkeep.harness.subagents import child_ids

        task = 'call ticket_summary {"ticket_id": "REL-101"}'  # the child's first user message
        turn = self._turn(session_id, "call write_changelog " + json.dumps({"input": task}))
        self._completed(turn)
        results = [r for r in turn.tool_results() if r.get("name") == "write_changelog"]
        require(len(results) == 1 and not results[0].get("is_error"), f"results {results}")
        content = str(results[0]["content"])
        require(content.startswith("Tool ticket_summary returned: REL-101:"), f"result {content!r}")
        child_session, child_op = child_ids(session_id, turn.turn_id, str(results[0]["call_id"]))
        child = self.executor.outcomes().get(child_op)
        if child is None:
            raise CheckFailedError(f"no execution {child_op}: {sorted(self.executor.outcomes())}")
        require(child.status == "SUCCEEDED", f"child execution {child}")
        require(child.input.get("session_id") == child_session, f"child input {child.input}")
        child_status = (child.output or {}).get("status")
        require(child_status == "completed", f"child turn {child.output}")
        self._require_scope_retired(child_session, child_op)
        parent_calls = self.lambdas.calls_for(turn.turn_id)
        child_calls = self.lambdas.calls_for(child_op)
        require(all(o == "ok" for _f, o in parent_calls + child_calls),
                f"invocations {parent_calls} {child_calls}")  # fmt: skip
        # The parent's tool step ran three times for the call: started the child turn, kept the
        # wait's token and started the child's execution, recorded the child's result.
        require(_count(parent_calls).get("ToolStepFunction") == 3, f"parent {parent_calls}")
        require(_count(child_calls).get("ModelStepFunction") == 2, f"child {child_calls}")
        delivered = [c for c in self.executor.callbacks if c == ("SendTaskSuccess", "delivered")]
        require(bool(delivered), f"no task token came back: {self.executor.callbacks}")
        final = (turn.execution.output or {}) if isinstance(turn.execution.output, dict) else {}
        lines = [
            f"parent {turn.turn_id} ({turn.execution.status}, turn {turn.view.get('status')}): "
            f"{_count(parent_calls)}",
            f"child {child_op} ({child.status}, turn {child_status}) in {child_session}: "
            f"{_count(child_calls)}",
            f"tool result {content[:70]!r}; parent reply {turn.reply()[:70]!r}",
            f"subagent_usage {final.get('subagent_usage')}",
        ]
        return "\n      ".join(lines)

    def _failing_step(self, session_id: str) -> str:
        # The model step cannot reach the model: a retryable error, retried by the definition,
        # then caught into FailTurn, which ends the turn with the Lambda's own message.
        turn = self._turn(session_id, "hello", model=FAILING_MODEL)
        require(turn.execution.status == "SUCCEEDED", f"execution {turn.execution}")
        require(turn.view.get("status") == "failed", f"turn view {turn.view}")
        error = str(turn.view.get("error") or "")
        require(error.startswith("RetryableStepError:"), f"error {error!r}")
        # The definition's Retry (4 more attempts of RetryableStepError) saw the handler's own
        # errorType, although start-lambda reports it without x-amz-function-error.
        calls = self.lambdas.calls_for(turn.turn_id)
        expected = [("ModelStepFunction", "RetryableStepError")] * 5 + [("FailTurnFunction", "ok")]
        require(calls == expected, f"invocations {calls}")
        return f"{turn.turn_id}: model step retried 4 times, then FailTurn: {error[:80]!r}"

    def _invoke(self, function_id: str, payload: dict[str, Any]) -> Any:
        result = self.lambdas.invoke(function_id, json.dumps(payload).encode())
        if isinstance(result, TaskFailure):
            raise CheckFailedError(f"{function_id} failed: {result.error}: {result.cause[:300]}")
        return result.value

    def _sample(self, folder: str, name: str) -> dict[str, Any]:
        path = ROOT / "events" / folder / f"{name}.json"
        data: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
        return data

    def _step_samples(self) -> str:
        session_id, op_id = seed.seed_step_samples(self.moto_url, self.names)
        model = self._invoke("ModelStepFunction", self._sample("turn_steps", "model_step"))
        require(model.get("next") == "tools", f"model_step {model}")
        tool_call = self._sample("turn_steps", "tool_step")
        require(model.get("call_ids") == [tool_call["call_id"]], f"model_step {model}")
        tool = self._invoke("ToolStepFunction", tool_call)
        require(tool.get("status") == "done" and tool.get("is_error") is False, f"tool {tool}")
        # execution_input.json: the same turn through the state machine (the samples' rounds
        # are redelivered and answered from what they settled, the next round finishes the turn).
        remote = seed.client("stepfunctions", self.moto_url)
        remote.start_execution(
            stateMachineArn=self.names.state_machine_arn,
            name=op_id,
            input=json.dumps(self._sample("turn_steps", "execution_input")),
        )
        execution = self.executor.wait(op_id, TURN_TIMEOUT)
        require(execution.status == "SUCCEEDED", f"execution {execution}")
        finish = self._invoke("FinishTurnFunction", self._sample("turn_steps", "finish_turn"))
        require(finish.get("status") == "completed", f"finish_turn {finish}")
        fail = self._invoke("FailTurnFunction", self._sample("turn_steps", "fail_turn"))
        require(fail.get("status") == "completed", f"fail_turn after the end {fail}")
        self._require_scope_retired(session_id, op_id)
        return "model_step, tool_step, execution_input (state machine), finish_turn, fail_turn"

    def _api_samples(self) -> str:
        answers: list[str] = []
        for name, expected in API_SAMPLES:
            if name == "get_events":
                # The turn the remaining samples name, started as a second start would have.
                seed.seed_api_sample_turn(self.moto_url, self.names)
            answer = self._invoke("ApiFunction", self._sample("api", name))
            status = int(answer["statusCode"])
            require(status == expected, f"{name} answered {status}: {answer.get('body')}")
            answers.append(f"{name} {status}")
            if name == "start_turn":
                turn_id = json.loads(answer["body"])["turn_id"]
                execution = self.executor.wait(turn_id, TURN_TIMEOUT)
                require(execution.status == "SUCCEEDED", f"start_turn's execution {execution}")
        return ", ".join(answers)

    def _sdk_versions(self) -> str:
        pins = _layer_pins()
        seen: list[dict[str, Any]] = []
        for log in self.sam_logs:
            for line in log.read_text(encoding="utf-8", errors="replace").splitlines():
                if '"aws sdk"' in line:
                    seen.append(json.loads(line[line.index("{") :]))
        require(bool(seen), "no 'aws sdk' log line from a Lambda container")
        for record in seen:
            for package in ("boto3", "botocore"):
                require(record.get(package) == pins[package],
                        f"{package} {record.get(package)} in the container, layer pins "
                        f"{pins[package]}: {record}")  # fmt: skip
                require(str(record.get(f"{package}_path", "")).startswith("/opt/python/"),
                        f"{package} not loaded from the layer: {record}")  # fmt: skip
        return f"boto3 {pins['boto3']} + botocore {pins['botocore']} from /opt/python ({len(seen)})"

    def _bytecode(self) -> str:
        from tools.sam_local.bytecode import probe

        python = shutil.which(RUNTIME_PYTHON)
        require(python is not None, f"{RUNTIME_PYTHON} (the Lambda runtime's Python) not on PATH")
        compiled, loaded = probe(self.layer_python, str(python), HANDLER_IMPORTS)
        require(loaded > 0, f"nothing imported from {self.layer_python}")
        require(not compiled, f"{len(compiled)} module(s) compiled from source: {compiled[:5]}")
        return f"{loaded} modules loaded from the layer, 0 compiled from source"


# What the handlers import at cold start (functions/*/app.py).
HANDLER_IMPORTS = [
    "turnkeep.api",
    "turnkeep.aws_lambda.container",
    "turnkeep.aws_lambda.step_events",
    "aws_lambda_powertools.metrics",
    "mangum",
    "boto3",
]


def _count(calls: list[tuple[str, str]]) -> dict[str, int]:
    """Invocations per function."""
    counts: dict[str, int] = {}
    for function_id, _outcome in calls:
        counts[function_id] = counts.get(function_id, 0) + 1
    return counts


def _layer_pins() -> dict[str, str]:
    text = (ROOT / "layers" / "turnkeep" / "requirements.txt").read_text(encoding="utf-8")
    pins = dict(re.findall(r"^(boto3|botocore)==(\S+)", text, flags=re.MULTILINE))
    if set(pins) != {"boto3", "botocore"}:
        raise CheckFailedError("layers/turnkeep/requirements.txt must pin boto3 and botocore")
    return pins
