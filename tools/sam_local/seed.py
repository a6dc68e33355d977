"""Create what the SAM local stack needs in the moto container, as template.yaml and
events/env.json name it: the table and bucket (exactly as the template declares them), the
state machine record the API starts executions of, and the turns the `events/` samples name."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import boto3

from tools.sam_local.executor import REGION, ROLE_ARN, substitute
from tools.sam_local.template import (
    ROOT,
    create_bucket,
    create_table,
    load_template,
    state_machine_definition,
    state_machine_wiring,
)

ENV_FILE = ROOT / "events" / "env.json"
EVENTS = ROOT / "events"


@dataclass(frozen=True, slots=True)
class LocalNames:
    """Table, bucket, storage prefix and state machine the functions are pointed at."""

    table: str
    bucket: str
    prefix: str
    state_machine_arn: str
    storage_url: str
    envelope_url: str

    @classmethod
    def from_env_file(cls, path: Path = ENV_FILE) -> LocalNames:
        """Read the names from events/env.json (the API function's entry)."""
        env = json.loads(path.read_text(encoding="utf-8"))["ApiFunction"]
        storage = parse_qs(urlsplit(env["TURNKEEP_STORAGE_URL"]).query)
        return cls(
            table=storage["table"][0],
            bucket=storage["bucket"][0],
            prefix=storage["prefix"][0],
            state_machine_arn=env["TURNKEEP_STATE_MACHINE_ARN"],
            storage_url=env["TURNKEEP_STORAGE_URL"],
            envelope_url=env["TURNKEEP_ENVELOPE_URL"],
        )


def client(service: str, endpoint: str) -> Any:
    """A boto3 client of the moto container (dummy credentials: moto checks none)."""
    return boto3.session.Session().client(
        service,  # type: ignore[call-overload]
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="sam-local",
        aws_secret_access_key="sam-local",
    )


def create_resources(endpoint: str, names: LocalNames) -> str:
    """Table, bucket and state machine in the container; returns the substituted ASL (the
    definition the executor runs)."""
    template = load_template()
    create_table(client("dynamodb", endpoint), names.table, template)
    create_bucket(client("s3", endpoint), names.bucket, template)
    definition = substitute(state_machine_definition(template), state_machine_wiring(template))
    client("stepfunctions", endpoint).create_state_machine(
        name=names.state_machine_arn.rsplit(":", 1)[-1], definition=definition, roleArn=ROLE_ARN
    )
    return definition


def _with_endpoint(url: str, endpoint: str) -> str:
    return f"{url}&region={REGION}&endpoint={endpoint}"


def _start(endpoint: str, names: LocalNames, session_id: str, op_id: str, *, user: str,
           text: str, create_session: bool) -> None:  # fmt: skip
    from turnkeep.harness import StartTurnInput, start_turn
    from turnkeep.runtime.build import build_runtime
    from turnkeep.runtime.settings import TurnkeepSettings

    settings = TurnkeepSettings(
        storage_url=_with_endpoint(names.storage_url, endpoint),
        envelope_url=_with_endpoint(names.envelope_url, endpoint),
        model="scripted",
    )
    runtime = build_runtime(settings)
    try:
        if create_session:
            runtime.deps.envelopes.create(session_id, user)
        start_turn(
            runtime.deps,
            StartTurnInput(session_id=session_id, op_id=op_id, user_id=user, text=text),
        )
    finally:
        runtime.close()


STEP_SAMPLE_USER = "user-sample"
# The step samples' turn: one echo call, whose id is the one events/turn_steps/tool_step.json
# names (first call of round 0 of the session's first turn).
STEP_SAMPLE_TEXT = 'call echo {"text": "from the sam local samples"}'


def seed_step_samples(endpoint: str, names: LocalNames) -> tuple[str, str]:
    """Start the turn events/turn_steps/*.json name (session and op of execution_input.json)."""
    execution = json.loads((EVENTS / "turn_steps" / "execution_input.json").read_text("utf-8"))
    session_id, op_id = execution["session_id"], execution["op_id"]
    _start(endpoint, names, session_id, op_id, user=STEP_SAMPLE_USER, text=STEP_SAMPLE_TEXT,
           create_session=True)  # fmt: skip
    return session_id, op_id


def api_sample_turn() -> tuple[str, str, str]:
    """(session, turn, user) that events/api/get_events.json and cancel_turn.json name."""
    event = json.loads((EVENTS / "api" / "get_events.json").read_text("utf-8"))
    parts = event["rawPath"].strip("/").split("/")  # sessions/{id}/turns/{turn}/events
    user = event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"]
    return parts[1], parts[3], user


def seed_api_sample_turn(endpoint: str, names: LocalNames) -> tuple[str, str]:
    """Start the turn the get_events/cancel_turn samples name, in the session create_session.json
    made (as a second start would have; its earlier turn must have ended)."""
    session_id, op_id, user = api_sample_turn()
    _start(endpoint, names, session_id, op_id, user=user, text="hello", create_session=False)
    return session_id, op_id
