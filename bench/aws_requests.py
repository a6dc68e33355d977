"""Count AWS requests under moto: per storage operation, and per whole turn with cold Lambdas.

Storage operations (issue #3): a scoped commit costs at most 2 requests, a session commit at
most 2, and retiring a scope of N objects at most 1 + 2*ceil(N/1000), counted with a botocore
hook (one per API call).

Whole turns (issue #15, the "before" table of the request cuts): a Q&A turn and a turn with two
parallel tool calls, at 10, 100 and 1,000 prior messages, started through the API Lambda and
run by moto's Step Functions interpreter executing statemachine/turn.asl.json; every Lambda
invocation (API and each step) runs cold in a fresh interpreter (fresh import, runtime and
clients) that counts its botocore calls; median of 3 turns. Every function runs with the
environment template.yaml gives it (`deployed_env`: the steps' TURNKEEP_WS_ENDPOINT and frame
interval included), DefaultModel=scripted: these turns are unwatched, as most are, on the
deployed configuration (the watched figures: bench/watched_turn.py). Also printed: the API's
turn start and one events page alone, Step Functions state transitions, and $ per turn for
Standard and Express at the on-demand prices below (docs/aws-storage.md).

    .venv/bin/python bench/aws_requests.py            # everything (several minutes)
    .venv/bin/python bench/aws_requests.py --smoke    # small sizes, one turn per case (CI)
"""

from __future__ import annotations

import argparse
import io
import json
import logging
import math
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
import zipfile
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
from moto import mock_aws
from moto.awslambda_simple.models import LambdaSimpleBackend

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from helpers.lambda_script import LOAD_HANDLER

from tests.support.aws_template import create_bucket, create_table, load_template
from turnkeep.storage import (
    append_list,
    ephemeral_scope,
    insert_entry,
    insert_usage,
    retire_scope,
    set_value,
    value,
    value_list,
)
from turnkeep.storage.aws import AwsRepository
from turnkeep.storage.aws.codec import encode_object
from turnkeep.storage.aws.instrument import RequestCounter
from turnkeep.storage.aws.keys import HEAD_SK, session_pk
from turnkeep.storage.writes import UsageRow

ROOT = Path(__file__).resolve().parents[1]
REGION = "us-east-1"
TABLE, BUCKET, PREFIX = "bench", "bench-bucket", "bench"
TURN_TABLE, TURN_BUCKET = "bench-turns", "bench-turns-bucket"
Row = tuple[str, int, str, str]
TRACE = False  # --trace: print every request of every measured invocation


def _fill_scope(repo: AwsRepository, session_id: str, scope_id: str, count: int) -> None:
    """Write `count` one-write transactions of a scope directly (uncounted set-up)."""
    head = repo.dynamodb.update_item(
        TableName=TABLE,
        Key={"pk": {"S": session_pk(session_id)}, "sk": {"S": HEAD_SK}},
        UpdateExpression="ADD last_seq :k",
        ExpressionAttributeValues={":k": {"N": str(count)}},
        ReturnValues="UPDATED_NEW",
    )
    last = int(head["Attributes"]["last_seq"]["N"])
    for seq in range(last - count + 1, last + 1):
        write = {"op": "append", "ns": "frames", "key": "", "v": f'"frame {seq}"', "seq": seq}
        repo.s3.put_object(
            Bucket=BUCKET,
            Key=repo.objects.transaction_key(session_id, scope_id, seq),
            Body=encode_object(session_id, scope_id, [write]),
        )


def _breakdown(counter: RequestCounter) -> str:
    return ", ".join(f"{name} {n}" for name, n in sorted(counter.calls.items()))


def measure(retire_sizes: list[int], cold_objects: int) -> list[Row]:
    """Run every measured operation once and return (operation, requests, goal, breakdown)."""
    rows: list[Row] = []
    ddb = boto3.client("dynamodb", region_name=REGION)
    s3 = boto3.client("s3", region_name=REGION)
    create_table(ddb, TABLE)
    create_bucket(s3, BUCKET)
    repo = AwsRepository(TABLE, BUCKET, PREFIX, dynamodb_client=ddb, s3_client=s3)
    counter = RequestCounter().attach(ddb, s3)
    op = ephemeral_scope("op-1")

    counter.reset()
    st = repo.open("s1")
    rows.append(("open (nothing pending)", counter.total, "-", _breakdown(counter)))

    counter.reset()
    st.commit(
        [
            insert_entry("m1", None, "message", {"role": "user", "text": "hi"}),
            set_value(value("op", "state"), {"phase": "model"}),
            insert_usage(UsageRow(input_tokens=10, output_tokens=5, cost_micros=1_000)),
        ]
    )
    rows.append(("session commit (head cached)", counter.total, "<= 2", _breakdown(counter)))

    rival = AwsRepository(TABLE, BUCKET, PREFIX, dynamodb_client=ddb, s3_client=s3).open("s1")
    rival.commit([set_value(value("rival"), 1)])
    counter.reset()
    st.commit([insert_entry("m2", "m1", "message", {"role": "assistant"})])
    rows.append(("session commit after a rival write", counter.total, "-", _breakdown(counter)))
    rival.close()

    counter.reset()
    st.commit([append_list(value_list("frames", "", op), {"delta": "tok"})])
    rows.append(("scoped commit", counter.total, "<= 2", _breakdown(counter)))

    counter.reset()
    st.commit(
        [append_list(value_list("frames", "", op), {"delta": "ok"})], guard=value("op", "state")
    )
    rows.append(("guarded scoped commit", counter.total, "<= 2", _breakdown(counter)))
    st.close()

    for size in retire_sizes:
        session_id = f"retire-{size}"
        _fill_scope(repo, session_id, op.id, size)
        with repo.open(session_id) as handle:
            counter.reset()
            handle.commit([retire_scope(op), set_value(value("op", "state"), "done")])
            # docs/aws-storage.md: 2 + 2 per 1000 objects (the commit, a list and a delete per
            # page, the head update), + 1 head read: the handle was opened cold.
            goal = 3 + 2 * math.ceil(size / 1000)
            rows.append(
                (f"retirement of {size} objects", counter.total, f"<= {goal}", _breakdown(counter))
            )

    _fill_scope(repo, "cold", op.id, cold_objects)
    counter.reset()
    cold = AwsRepository(TABLE, BUCKET, PREFIX, dynamodb_client=ddb, s3_client=s3).open("cold")
    frames = cold.read_list(value_list("frames", "", op))
    assert len(frames) == cold_objects, "cold read must see every transaction"
    rows.append(
        (
            f"cold open + read of a scope of {cold_objects} txns",
            counter.total,
            f"{cold_objects + 3} (3 + 1 GET each)",
            _breakdown(counter),
        )
    )
    counter.reset()
    cold.read_list(value_list("frames", "", op))
    rows.append(("repeated read of that scope", counter.total, "0", _breakdown(counter) or "-"))
    cold.close()
    return rows


# -- whole turns, every Lambda invocation cold ---------------------------------------------------
#
# moto runs as a server on 127.0.0.1 (in this process) and executes the real state machine; each
# Lambda invocation (the API's and every step's) runs in a fresh interpreter that imports the
# handler file, builds its runtime and clients and counts its botocore calls. Prices: us-east-1,
# on-demand list prices (stated once here and in docs/aws-storage.md).

PRICE_WRU = 0.625 / 1e6  # DynamoDB on-demand, per write request unit
PRICE_RRU = 0.125 / 1e6  # DynamoDB on-demand, per read request unit
PRICE_S3_PUT_LIST = 0.005 / 1000  # S3 Standard PUT, COPY, POST, LIST
PRICE_S3_GET = 0.0004 / 1000  # S3 Standard GET and all other requests (DELETE is free)
PRICE_TRANSITION = 0.025 / 1000  # Step Functions Standard, per state transition
PRICE_EXPRESS_REQUEST = 1.0 / 1e6  # Step Functions Express, per execution
PRICE_EXPRESS_GB_SECOND = 0.00001667  # Express duration, first tier, billed per 64 MB
EXPRESS_MEMORY_GB = 64 / 1024
PRICE_LAMBDA_REQUEST = 0.20 / 1e6  # per invocation (duration excluded: it is the model's time)
S3_FREE = {"DeleteObject", "DeleteObjects"}
S3_PUT_CLASS = {"PutObject", "CopyObject", "ListObjectsV2", "ListObjects", "CreateMultipartUpload"}

USER = "bench-user"
QA_TEXT = "hello, how are you?"  # the scripted model answers in one round, no tool
TOOLS_TEXT = 'call calculator {"expression": "6*7"}\ncall echo {"text": "hi"}'

# Runs in the fresh interpreter of one invocation: count every botocore call (and estimate the
# DynamoDB request units it consumes from the items it sent or received), import the handler
# from its file as Lambda does, invoke it once, write the outcome as JSON to argv[3].
COLD_INVOKE = (
    r"""
import collections, importlib.util, json, math, sys, time, uuid
started = time.perf_counter()
calls = collections.Counter()
units = {"rru": 0.0, "wru": 0.0}

def _size(value):
    if isinstance(value, dict):
        if len(value) == 1:
            (kind, inner), = value.items()
            if kind in ("S", "B"):
                return len(inner.encode() if isinstance(inner, str) else inner)
            if kind == "N":
                return len(inner) // 2 + 1
            if kind in ("SS", "NS", "BS"):
                return sum(len(str(v)) for v in inner)
            if kind in ("BOOL", "NULL"):
                return 1
            if kind == "M":
                return 3 + sum(len(k) + _size(v) for k, v in inner.items())
            if kind == "L":
                return 3 + sum(_size(v) for v in inner)
        return sum(len(k) + _size(v) for k, v in value.items())
    return 0

def _wu(item, factor=1):
    return factor * max(1, math.ceil(_size(item) / 1024))

def _ru(items, factor=1):
    return factor * max(1, math.ceil(sum(_size(i) for i in items) / 4096))

def _estimate(op, params, response):
    if op == "GetItem":
        units["rru"] += _ru([response.get("Item", {})])
    elif op == "Query":
        units["rru"] += _ru(response.get("Items", []))
    elif op == "BatchGetItem":
        for items in response.get("Responses", {}).values():
            units["rru"] += sum(_ru([i]) for i in items)
    elif op in ("PutItem",):
        units["wru"] += _wu(params.get("Item", {}))
    elif op in ("UpdateItem", "DeleteItem"):
        units["wru"] += _wu(params.get("ExpressionAttributeValues", {}))
    elif op == "BatchWriteItem":
        for requests in params.get("RequestItems", {}).values():
            for r in requests:
                units["wru"] += _wu(r.get("PutRequest", {}).get("Item", {}))
    elif op == "TransactWriteItems":
        for action in params.get("TransactItems", []):
            (kind, body), = action.items()
            units["wru"] += _wu(body.get("Item", body.get("ExpressionAttributeValues", {})), 2)
    elif op == "TransactGetItems":
        units["rru"] += sum(_ru([r.get("Item", {})], 2) for r in response.get("Responses", []))

import botocore.client
_original = botocore.client.BaseClient._make_api_call

trace = []

def _what(params):
    # The items or objects a request touches, for --trace (sort keys, S3 keys).
    parts = []
    def walk(value):
        if isinstance(value, dict):
            for k, v in value.items():
                if k == "sk" and isinstance(v, dict) and "S" in v:
                    parts.append(v["S"])
                elif k in ("Key", "Prefix") and isinstance(v, str):
                    tail = v.rsplit("/", 2)
                    parts.append("/".join(tail[-2:]) if "/" in v else v)
                elif k == ":sk" or k == ":prefix":
                    parts.append(str(v.get("S", v)) + "*")
                else:
                    walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)
    walk(params)
    return " ".join(parts[:12]) + (" …" if len(parts) > 12 else "")

stamps = []

def _counted(self, operation, params):
    service = self.meta.service_model.service_name
    calls[service + ":" + operation] += 1
    trace.append(service + ":" + operation + " " + _what(params))
    if service == "apigatewaymanagementapi":
        # When each push left, and what it was (bench/watched_turn.py's cadence figures).
        stamps.append([time.time(), json.loads(params.get("Data") or b"{}").get("event")])
    response = _original(self, operation, params)
    if service == "dynamodb":
        _estimate(operation, params, response)
    return response

botocore.client.BaseClient._make_api_call = _counted
path, attribute, out = sys.argv[1:4]
event = json.load(sys.stdin)
"""
    + LOAD_HANDLER
    + r"""
try:
    result, error = getattr(module, attribute)(event, Context()), None
except Exception as exc:
    result, error = None, {"errorType": type(exc).__name__, "errorMessage": str(exc)}
with open(out, "w", encoding="utf-8") as fh:
    json.dump({"result": result, "error": error, "calls": calls, "units": units, "trace": trace,
               "stamps": stamps, "seconds": time.perf_counter() - started}, fh)
"""
)


@dataclass
class Invocation:
    """One cold invocation: the function, its event's op id and what it cost."""

    function: str
    op_id: str
    calls: Counter[str]
    rru: float
    wru: float
    trace: list[str] = field(default_factory=list)
    pushes: list[tuple[float, str]] = field(default_factory=list)
    """(wall-clock time, event kind) of each management-API post, as sent."""


@dataclass
class ColdLambdas:
    """Runs every invocation of a function name in a fresh interpreter (see COLD_INVOKE), with
    the bench's environment, then the function's as the template deploys it, then `overrides`."""

    env: dict[str, str]
    handlers: dict[str, tuple[str, str]]  # function name -> (file, attribute)
    invocations: list[Invocation] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    deployed: dict[str, dict[str, str]] = field(default_factory=dict)
    """function name -> the environment template.yaml gives it (`deployed_env`)."""
    overrides: dict[str, str] = field(default_factory=dict)

    def environment(self, function: str) -> dict[str, str]:
        """What an invocation of `function` runs with: of the bench's own TURNKEEP_ variables
        only those the template declares for it (no pusher in the API, as deployed)."""
        deployed = self.deployed.get(function)
        if deployed is None:
            return {**self.env, **self.overrides}
        base = {k: v for k, v in self.env.items() if not k.startswith("TURNKEEP_") or k in deployed}
        return {**base, **deployed, **self.overrides}

    def invoke(self, function: str, event: Any) -> tuple[Any, dict[str, str] | None]:
        path, attribute = self.handlers[function]
        with tempfile.TemporaryDirectory(prefix="cold-invoke-") as tmp:
            out = Path(tmp) / "out.json"
            subprocess.run(
                [sys.executable, "-c", COLD_INVOKE, path, attribute, str(out)],
                input=json.dumps(event).encode(),
                env=self.environment(function),
                cwd=tmp,
                stdout=subprocess.DEVNULL,
                check=True,
            )
            outcome = json.loads(out.read_text(encoding="utf-8"))
        op_id = event.get("op_id", "") if isinstance(event, dict) else ""
        record = Invocation(
            function,
            op_id,
            Counter(outcome["calls"]),
            outcome["units"]["rru"],
            outcome["units"]["wru"],
            outcome["trace"],
            [(float(at), str(kind)) for at, kind in outcome.get("stamps", [])],
        )
        with self.lock:
            self.invocations.append(record)
        return outcome["result"], outcome["error"]


@contextmanager
def cold_lambda_backend(cold: ColdLambdas) -> Iterator[None]:
    """Make moto's Docker-free Lambda backend run `cold`'s handlers."""

    def invoke(  # noqa: PLR0917 - moto's signature
        self: LambdaSimpleBackend,
        function_name: str,
        qualifier: str | None,
        body: Any,
        headers: Any,
        response_headers: Any,
    ) -> bytes:
        name = function_name.rsplit(":", 1)[-1]
        result, error = cold.invoke(name, json.loads(body) if body else {})
        if error is not None:
            response_headers["x-amz-function-error"] = "Unhandled"
            payload = json.dumps(error).encode()
        else:
            payload = json.dumps(result).encode()
        response_headers["Content-Length"] = str(len(payload))
        return payload

    original = LambdaSimpleBackend.invoke
    LambdaSimpleBackend.invoke = invoke  # type: ignore[method-assign]
    try:
        yield
    finally:
        LambdaSimpleBackend.invoke = original  # type: ignore[method-assign]


def _api_event(method: str, path: str, body: Any = None, query: str = "") -> dict[str, Any]:
    """An API Gateway HTTP API (payload 2.0) event of the JWT-authorized caller USER."""
    event: dict[str, Any] = json.loads((ROOT / "events" / "api" / "get_events.json").read_text())
    event["rawPath"] = event["requestContext"]["http"]["path"] = path
    event["requestContext"]["http"]["method"] = method
    event["rawQueryString"] = query
    event["requestContext"]["authorizer"]["jwt"]["claims"]["sub"] = USER
    event["requestContext"]["requestId"] = uuid.uuid4().hex
    if body is None:
        event.pop("body", None)
    else:
        event["body"] = json.dumps(body)
        event["headers"]["content-type"] = "application/json"
    event["isBase64Encoded"] = False
    return event


@dataclass(frozen=True)
class TurnCost:
    """Requests and price of one turn (or one API call)."""

    requests: dict[str, int]  # per invocation label: DynamoDB + S3 requests
    other: Counter[str]  # StartExecution and other non-storage calls
    transitions: int
    rru: float
    wru: float
    s3_put_list: int
    s3_get: int
    lambdas: int

    @property
    def storage_total(self) -> int:
        return sum(self.requests.values())

    def dollars(self, express_seconds: float) -> tuple[float, float]:
        """(Standard, Express) $ of this turn."""
        shared = (
            self.rru * PRICE_RRU
            + self.wru * PRICE_WRU
            + self.s3_put_list * PRICE_S3_PUT_LIST
            + self.s3_get * PRICE_S3_GET
            + self.lambdas * PRICE_LAMBDA_REQUEST
        )
        standard = shared + self.transitions * PRICE_TRANSITION
        express = (
            shared
            + PRICE_EXPRESS_REQUEST
            + EXPRESS_MEMORY_GB * max(0.1, express_seconds) * PRICE_EXPRESS_GB_SECOND
        )
        return standard, express


def _cost(invocations: list[Invocation], transitions: int) -> TurnCost:
    requests: dict[str, int] = {}
    other: Counter[str] = Counter()
    s3_put_list = s3_get = 0
    for inv in invocations:
        storage = 0
        for name, n in inv.calls.items():
            service, operation = name.split(":", 1)
            if service == "dynamodb":
                storage += n
            elif service == "s3":
                storage += n
                if operation in S3_PUT_CLASS:
                    s3_put_list += n
                elif operation not in S3_FREE:
                    s3_get += n
            else:
                other[operation] += n
        label = inv.function
        index = 2
        while label in requests:
            label = f"{inv.function} {index}"
            index += 1
        requests[label] = storage
    return TurnCost(
        requests,
        other,
        transitions,
        sum(i.rru for i in invocations),
        sum(i.wru for i in invocations),
        s3_put_list,
        s3_get,
        len(invocations),
    )


@dataclass
class Stack:
    """The deployment inside the moto server: clients of the bench itself (uncounted)."""

    sfn: Any
    machine_arn: str
    cold: ColdLambdas


WS_API_ID = "wsbench01"
"""The WebSocket API's id in the bench's deployed environment (its endpoint is never called by
an unwatched turn; bench/watched_turn.py points it at its stand-in)."""


def deployed_env(template: dict[str, Any], function: str, machine_arn: str) -> dict[str, str]:
    """The environment template.yaml gives `function` (the WebSocket endpoint included), on the
    bench's table and bucket, DefaultModel=scripted; AWS_ENDPOINT_URL is left to the bench."""
    from tools.sam_local.template import deployed_environment

    refs = {
        name: str(spec.get("Default", "")) for name, spec in template.get("Parameters", {}).items()
    }
    refs |= {
        "DefaultModel": "scripted",
        "SessionTable": TURN_TABLE,
        "ProgressBucket": TURN_BUCKET,
        "StoragePrefix": "tk",
        "WebSocketApi": WS_API_ID,
        "TurnStateMachine": machine_arn,
        "AWS::Region": REGION,
        "AWS::URLSuffix": "amazonaws.com",
        # The tool step's own machine ARN, `${AWS::StackName}-turn` (template.yaml).
        "AWS::Partition": machine_arn.split(":")[1],
        "AWS::AccountId": machine_arn.split(":")[4],
        "AWS::StackName": machine_arn.rsplit(":", 1)[-1].removesuffix("-turn"),
    }
    env = deployed_environment(template, function, refs)
    env.pop("AWS_ENDPOINT_URL", None)  # empty in the template: the SDK's default (moto here)
    return env


def _deploy(endpoint: str, env: dict[str, str]) -> Stack:
    """Table, bucket, the four step functions, the API function and the state machine."""
    session = boto3.session.Session(region_name=REGION)
    ddb = session.client("dynamodb", endpoint_url=endpoint)
    s3 = session.client("s3", endpoint_url=endpoint)
    create_table(ddb, TURN_TABLE)
    create_bucket(s3, TURN_BUCKET)
    role = session.client("iam", endpoint_url=endpoint).create_role(
        RoleName="bench", AssumeRolePolicyDocument="{}"
    )["Role"]["Arn"]
    awslambda = session.client("lambda", endpoint_url=endpoint)
    template = load_template()
    machine = next(
        r for r in template["Resources"].values() if r["Type"] == "AWS::Serverless::StateMachine"
    )
    handlers: dict[str, tuple[str, str]] = {}
    definition = (ROOT / "statemachine" / "turn.asl.json").read_text(encoding="utf-8")
    for name, ref in machine["Properties"]["DefinitionSubstitutions"].items():
        logical_id = ref["Fn::GetAtt"].split(".")[0]
        props = template["Resources"][logical_id]["Properties"]
        attribute = props["Handler"].split(".")[1]
        arn = awslambda.create_function(
            FunctionName=logical_id,
            Runtime="python3.12",
            Role=role,
            Handler=props["Handler"],
            Code={"ZipFile": _dummy_zip()},
        )["FunctionArn"]
        handlers[logical_id] = (str(ROOT / props["CodeUri"] / "app.py"), attribute)
        definition = definition.replace("${" + name + "}", arn)
    handlers["ApiFunction"] = (str(ROOT / "functions" / "api" / "app.py"), "handler")
    sfn = session.client("stepfunctions", endpoint_url=endpoint)
    arn = sfn.create_state_machine(name="turnkeep-turn", definition=definition, roleArn=role)[
        "stateMachineArn"
    ]
    env["TURNKEEP_STATE_MACHINE_ARN"] = arn
    deployed = {function: deployed_env(template, function, arn) for function in handlers}
    return Stack(sfn, arn, ColdLambdas(env, handlers, deployed=deployed))


def _dummy_zip() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("app.py", "def handler(event, context):\n    return event\n")
    return buffer.getvalue()


def _forget_moto_model_copies() -> None:
    """Let moto's DynamoDB model copies go. moto deep-copies every table of a TransactWriteItems
    (its rollback) and registers each copied object for its dashboard (`instances_tracked`),
    so without this the bench's server grows by a table copy per transaction: over 20 GB
    while seeding 1,000 messages. Only the dashboard reads that list."""
    from moto.core.model_instances import model_data

    for model in model_data.get("dynamodb", {}).values():
        model.instances_tracked = []  # type: ignore[attr-defined]


def _seed(session_id: str, messages: int) -> int:
    """Grow the session to at least `messages` transcript messages with real in-process turns
    (created if new); returns its message count."""
    from turnkeep.aws_lambda import container
    from turnkeep.harness import run_turn

    deps = container.runtime().deps
    if deps.envelopes.get(session_id) is None:
        deps.envelopes.create(session_id, USER)
    while True:
        storage = deps.open_storage(session_id)
        try:
            count = storage.get_stats().message_count
        finally:
            storage.close()
        if count >= messages:
            return count
        result = run_turn(deps, session_id, USER, f"remember fact {uuid.uuid4().hex[:8]}")
        assert result.status == "completed", result
        _forget_moto_model_copies()


def _api(stack: Stack, method: str, path: str, body: Any = None, query: str = "") -> Any:
    result, error = stack.cold.invoke("ApiFunction", _api_event(method, path, body, query))
    if error is not None or int(result["statusCode"]) >= 400:
        raise RuntimeError(f"{method} {path}: {error or result}")
    return json.loads(result["body"]) if result.get("body") else None


def wait_execution(stack: Stack, op_id: str) -> int:
    """Wait for the turn's execution to succeed (10 min at most); its state transitions."""
    execution_arn = f"{stack.machine_arn.replace(':stateMachine:', ':execution:')}:{op_id}"
    deadline = time.monotonic() + 600
    while True:
        described = stack.sfn.describe_execution(executionArn=execution_arn)
        if described["status"] != "RUNNING":
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"execution {op_id} still running")
        time.sleep(0.1)
    if described["status"] != "SUCCEEDED":
        raise RuntimeError(f"execution {op_id}: {described}")
    history = stack.sfn.get_execution_history(executionArn=execution_arn, maxResults=1000)
    return sum(1 for e in history["events"] if e["type"].endswith("StateEntered"))


def _turn(stack: Stack, session_id: str, text: str) -> tuple[TurnCost, TurnCost, TurnCost]:
    """Run one turn through the API and the state machine: (whole turn, API turn start,
    one events page)."""
    before = len(stack.cold.invocations)
    started = _api(stack, "POST", f"/sessions/{session_id}/turns", {"text": text})
    op_id = started["turn_id"]
    transitions = wait_execution(stack, op_id)
    turn_invocations = stack.cold.invocations[before:]
    start_only = _cost(turn_invocations[:1], 0)
    whole = _cost(turn_invocations, transitions)
    mark = len(stack.cold.invocations)
    page = _api(stack, "GET", f"/sessions/{session_id}/turns/{op_id}/events", query="limit=200")
    if not page.get("finished"):
        raise RuntimeError(f"events page of a finished turn says unfinished: {page}")
    events = _cost(stack.cold.invocations[mark:], 0)
    _forget_moto_model_copies()
    if TRACE:
        for inv in stack.cold.invocations[before:]:
            print(f"  {inv.function} ({sum(inv.calls.values())} calls)")
            for line in inv.trace:
                print(f"    {line}")
    return whole, start_only, events


def measure_turns(
    sizes: list[int],
    repeats: int,
    progress: Callable[[str, int, list[TurnCost]], None] | None = None,
) -> list[tuple[str, int, list[TurnCost]]]:
    """(kind, prior messages before the first measured turn, [(turn, start, events page)
    costs per repeat]) per case."""
    from moto.core.config import default_user_config
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    saved = dict(os.environ)
    config_saved = json.dumps(default_user_config)
    default_user_config["lambda"]["use_docker"] = False
    default_user_config["stepfunctions"]["execute_state_machine"] = True
    env = {
        **os.environ,
        "MOTO_PORT": str(port),  # moto's state machine interpreter invokes Lambda through it
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_DEFAULT_REGION": REGION,
        "AWS_ACCESS_KEY_ID": "bench",
        "AWS_SECRET_ACCESS_KEY": "bench",
        # This process's own runtime (seeding); each Lambda runs with its template environment.
        "TURNKEEP_STORAGE_URL": f"aws://?table={TURN_TABLE}&bucket={TURN_BUCKET}&prefix=tk",
        "TURNKEEP_ENVELOPE_URL": f"aws://?table={TURN_TABLE}",
        "TURNKEEP_MODEL": "scripted",
        "POWERTOOLS_TRACE_DISABLED": "true",
        "POWERTOOLS_METRICS_NAMESPACE": "turnkeep",
        "POWERTOOLS_SERVICE_NAME": "turnkeep",
        "POWERTOOLS_LOG_LEVEL": "WARNING",
        "PYTHONPATH": str(ROOT / "shared"),
    }
    os.environ.update(env)
    results: list[tuple[str, int, list[TurnCost]]] = []
    try:
        stack = _deploy(endpoint, env)
        with cold_lambda_backend(stack.cold):
            # One session per kind, grown from size to size: seeding 1,000 messages through real
            # turns is the slow part, so each message is seeded once.
            sessions = {kind: f"bench-{uuid.uuid4().hex[:8]}" for kind in ("Q&A", "2 tools")}
            for size in sizes:
                for kind, text in (("Q&A", QA_TEXT), ("2 tools", TOOLS_TEXT)):
                    prior = _seed(sessions[kind], size)
                    runs = [_turn(stack, sessions[kind], text) for _ in range(repeats)]
                    results.append((kind, prior, [c for run in runs for c in run]))
                    if progress is not None:
                        progress(*results[-1])
    finally:
        from turnkeep.aws_lambda import container

        container.reset_runtime()
        os.environ.clear()
        os.environ.update(saved)
        default_user_config.update(json.loads(config_saved))
        server.stop()
    return results


def _median_cost(costs: list[TurnCost]) -> TurnCost:
    """The run whose DynamoDB + S3 total is the median (a real run, not a blend of runs)."""
    ordered = sorted(costs, key=lambda c: c.storage_total)
    return ordered[(len(ordered) - 1) // 2]


def print_turns(results: list[tuple[str, int, list[TurnCost]]], express_seconds: float) -> None:
    """Print the whole-turn table, then the turn starts and events pages alone."""
    print()
    print(
        "whole turns, every Lambda invocation cold (fresh interpreter: import, runtime, clients);"
        " DynamoDB + S3 requests per invocation; median of the runs by total"
    )
    head = (
        f"{'turn':<8} {'prior':>6} {'total':>6} {'transitions':>11} {'WRU':>6} {'RRU':>6} "
        f"{'$ Standard':>11} {'$ Express':>10}  per invocation (+ other calls)"
    )
    print(head)
    print("-" * len(head))
    for kind, size, costs in results:
        turn = _median_cost(costs[0::3])
        standard, express = turn.dollars(express_seconds)
        per = ", ".join(f"{k} {v}" for k, v in turn.requests.items())
        other = ", ".join(f"{k} {v}" for k, v in sorted(turn.other.items()))
        print(
            f"{kind:<8} {size:>6} {turn.storage_total:>6} {turn.transitions:>11} "
            f"{turn.wru:>6.0f} {turn.rru:>6.0f} {standard:>11.6f} {express:>10.6f}  {per}"
            + (f" (+ {other})" if other else "")
        )
    print()
    print(f"{'alone':<28} {'prior':>6} {'DynamoDB+S3':>11}  other calls")
    for kind, size, costs in results:
        start = _median_cost(costs[1::3])
        page = _median_cost(costs[2::3])
        for name, cost in ((f"turn start ({kind})", start), (f"events page ({kind})", page)):
            other = ", ".join(f"{k} {v}" for k, v in sorted(cost.other.items())) or "-"
            print(f"{name:<28} {size:>6} {cost.storage_total:>11}  {other}")
    print()
    print(
        "prices (us-east-1, on-demand): DynamoDB $0.625/M write units, $0.125/M read units "
        "(units estimated from item sizes: 1 KB writes, 4 KB strongly consistent reads, "
        "transactions x2); S3 $0.005/1k PUT/LIST, $0.0004/1k GET, DELETE free; Lambda "
        "$0.20/M invocations (duration excluded: it is the model's latency); Step Functions "
        "Standard $0.025/1k state transitions (StateEntered events of the moto execution); "
        f"Express $1.00/M executions + $0.00001667/GB-s at 64 MB for an assumed "
        f"{express_seconds:g} s turn."
    )


def main() -> None:
    """Print the storage request table, then the whole-turn table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="small sizes, one turn per case")
    parser.add_argument("--no-turns", action="store_true", help="storage operations only")
    parser.add_argument(
        "--sizes",
        type=lambda text: [int(n) for n in text.split(",")],
        default=[10, 100, 1000],
        help="prior message counts of the whole-turn cases (default 10,100,1000)",
    )
    parser.add_argument(
        "--trace", action="store_true", help="print every request of every measured invocation"
    )
    parser.add_argument(
        "--express-seconds", type=float, default=10.0, help="assumed Express turn duration"
    )
    args = parser.parse_args()
    global TRACE  # noqa: PLW0603 - a command-line switch read by _turn
    TRACE = args.trace
    sizes, cold = ([1, 1001], 20) if args.smoke else ([1, 100, 5000], 200)
    with mock_aws():
        rows = measure(sizes, cold)
    width = max(len(r[0]) for r in rows)
    print(f"{'operation':<{width}}  {'requests':>8}  {'goal':<20}  breakdown")
    for name, count, goal, breakdown in rows:
        print(f"{name:<{width}}  {count:>8}  {goal:<20}  {breakdown}")
    if args.no_turns:
        return
    turn_sizes, repeats = ([10], 1) if args.smoke else (args.sizes, 3)

    def progress(kind: str, prior: int, costs: list[TurnCost]) -> None:
        # Seeding 1,000 messages takes long on a loaded machine: show each case as it lands.
        turn = _median_cost(costs[0::3])
        print(
            f"measured: {kind} at {prior} prior messages: {turn.storage_total} requests "
            f"({', '.join(f'{k} {v}' for k, v in turn.requests.items())}), "
            f"{turn.transitions} transitions",
            flush=True,
        )

    print_turns(measure_turns(turn_sizes, repeats, progress), args.express_seconds)


if __name__ == "__main__":
    main()
