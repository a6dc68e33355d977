"""The `make sam-local-test` scenario, run against a started SAM local stack: turns through
`sam local start-api` and the state machine, every `events/` sample through
`sam local start-lambda`, and the AWS SDK pair the layer gives the functions.

Each check records pass/fail with its reason; one failing check does not stop the others.
"""

from __future__ import annotations

import json
import re
import shutil
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tools.sam_local import seed
from tools.sam_local.executor import Execution, LocalExecutor, StartLambda
from tools.sam_local.lambda_errors import TaskFailure
from tools.sam_local.template import ROOT

USER = "sam-local-user"
FAILING_MODEL = "openai:http://127.0.0.1:9/v1#unreachable"  # allowed in events/env.json
TURN_TIMEOUT = 240.0
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
            timeout=60,
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
        return self.results

    # -- helpers -------------------------------------------------------------------------------
    def _turn(self, session_id: str, text: str, model: str | None = None) -> Turn:
        body: dict[str, Any] = {"text": text}
        if model:
            body["model"] = model
        started = self.http.post(f"/sessions/{session_id}/turns", json=body)
        require(started.status_code == 202, f"start answered {started.status_code}: {started.text}")
        turn_id = started.json()["turn_id"]
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
        answer = httpx.post(f"{self.api_url}/sessions", json={"title": "x"}, timeout=60)
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


RUNTIME_PYTHON = "python3.12"
# What the handlers import at cold start (functions/*/app.py).
HANDLER_IMPORTS = [
    "turnkeep.api",
    "turnkeep.aws_lambda.container",
    "turnkeep.aws_lambda.step_events",
    "aws_lambda_powertools.metrics",
    "mangum",
    "boto3",
]


def _layer_pins() -> dict[str, str]:
    text = (ROOT / "layers" / "turnkeep" / "requirements.txt").read_text(encoding="utf-8")
    pins = dict(re.findall(r"^(boto3|botocore)==(\S+)", text, flags=re.MULTILINE))
    if set(pins) != {"boto3", "botocore"}:
        raise CheckFailedError("layers/turnkeep/requirements.txt must pin boto3 and botocore")
    return pins
