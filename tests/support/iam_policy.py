"""Evaluate template.yaml's IAM policies against the AWS calls our code really makes.

`AwsCallLog` records every botocore API call made while a hosted Lambda handler runs (attributed
to that function through `LambdaHost.current_function`); `required_permissions` maps a call to
the IAM action(s), resource(s) and condition keys it needs; `function_statements` expands a
function's `Policies` (explicit statements, the managed policies of the template it references
and the SAM policy templates we use) with the template's intrinsics resolved to test values.
Only `Allow` statements with Action/Resource wildcards and `StringLike` /
`ForAllValues:StringLike` conditions are modelled (`dynamodb:LeadingKeys` is the partition key of
a single-item call): that is all the template uses.
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from botocore.client import BaseClient

REGION = "us-east-1"
ACCOUNT = "123456789012"


@dataclass(frozen=True)
class Permission:
    """One IAM authorization an API call needs."""

    action: str
    resource: str
    context: tuple[tuple[str, str], ...] = ()


@dataclass
class AwsCall:
    function: str
    service: str
    operation: str
    params: dict[str, Any]
    endpoint: str = ""


@dataclass
class AwsCallLog:
    calls: list[AwsCall] = field(default_factory=list)


@contextmanager
def recording_aws_calls(current_function: Callable[[], str | None]) -> Iterator[AwsCallLog]:
    """Record each botocore call made while `current_function()` names a function."""
    log = AwsCallLog()
    original = getattr(BaseClient, "_make_api_call")  # noqa: B009 - private botocore hook

    def record(self: BaseClient, operation_name: str, api_params: dict[str, Any]) -> Any:
        function = current_function()
        if function is not None:
            service = self.meta.service_model.service_name
            endpoint = str(self.meta.endpoint_url or "")
            log.calls.append(AwsCall(function, service, operation_name, dict(api_params), endpoint))
        return original(self, operation_name, api_params)

    setattr(BaseClient, "_make_api_call", record)  # noqa: B010
    try:
        yield log
    finally:
        setattr(BaseClient, "_make_api_call", original)  # noqa: B010


_TRANSACT_ACTIONS = {
    "Put": "PutItem",
    "Update": "UpdateItem",
    "Delete": "DeleteItem",
    "ConditionCheck": "ConditionCheckItem",
    "Get": "GetItem",
}


def table_arn(name: str) -> str:
    """The ARN of table `name` in the test account."""
    return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"


def required_permissions(call: AwsCall) -> list[Permission]:
    """The IAM authorizations `call` needs (the services our functions use)."""
    p = call.params
    if call.service == "dynamodb":
        if call.operation in {"TransactWriteItems", "TransactGetItems"}:
            out = []
            for item in p["TransactItems"]:
                ((kind, body),) = item.items()
                out.append(
                    Permission(f"dynamodb:{_TRANSACT_ACTIONS[kind]}", table_arn(body["TableName"]))
                )
            return out
        if call.operation in {"BatchGetItem", "BatchWriteItem"}:
            return [
                Permission(f"dynamodb:{call.operation}", table_arn(t)) for t in p["RequestItems"]
            ]
        arn = table_arn(p["TableName"])
        if p.get("IndexName"):
            arn = f"{arn}/index/{p['IndexName']}"
        item = p.get("Key") or p.get("Item") or {}
        leading = (("dynamodb:LeadingKeys", item["pk"]["S"]),) if "pk" in item else ()
        return [Permission(f"dynamodb:{call.operation}", arn, leading)]
    if call.service == "s3":
        bucket = f"arn:aws:s3:::{p['Bucket']}"
        if call.operation in {"ListObjectsV2", "ListObjects"}:
            return [Permission("s3:ListBucket", bucket, (("s3:prefix", p.get("Prefix", "")),))]
        if call.operation == "DeleteObjects":
            return [
                Permission("s3:DeleteObject", f"{bucket}/{o['Key']}")
                for o in p["Delete"]["Objects"]
            ]
        action = {"HeadObject": "GetObject"}.get(call.operation, call.operation)
        return [Permission(f"s3:{action}", f"{bucket}/{p['Key']}")]
    if call.service == "stepfunctions":
        return [Permission(f"states:{call.operation}", p.get("stateMachineArn", "*"))]
    if call.service == "apigatewaymanagementapi":
        # https://<api id>.execute-api.<region>.amazonaws.com/<stage>
        parts = urlsplit(call.endpoint)
        api_id, stage = parts.netloc.split(".", 1)[0], parts.path.strip("/")
        method = {"PostToConnection": "POST", "GetConnection": "GET"}.get(call.operation, "DELETE")
        arn = f"arn:aws:execute-api:{REGION}:{ACCOUNT}:{api_id}/{stage}/{method}/@connections/"
        return [Permission("execute-api:ManageConnections", arn + p["ConnectionId"])]
    raise AssertionError(f"no IAM mapping for {call.service}:{call.operation} in the test")


def _resolve(value: Any, refs: Mapping[str, str]) -> Any:
    if isinstance(value, list):
        return [_resolve(v, refs) for v in value]
    if isinstance(value, dict):
        if set(value) == {"Ref"}:
            return refs[value["Ref"]]
        if set(value) == {"Fn::GetAtt"}:
            target = value["Fn::GetAtt"]
            return refs[target if isinstance(target, str) else ".".join(target)]
        if set(value) == {"Fn::Sub"}:
            return re.sub(r"\$\{([^}]+)\}", lambda m: refs[m.group(1)], value["Fn::Sub"])
        return {k: _resolve(v, refs) for k, v in value.items()}
    return value


def function_statements(
    template: Mapping[str, Any], logical_id: str, refs: Mapping[str, str]
) -> list[dict[str, Any]]:
    """The Allow statements of `logical_id`'s `Policies`, intrinsics resolved with `refs`."""
    resources = template["Resources"]
    out: list[dict[str, Any]] = []
    for policy in resources[logical_id]["Properties"].get("Policies", []):
        if set(policy) == {"Ref"}:
            managed = resources[policy["Ref"]]
            assert managed["Type"] == "AWS::IAM::ManagedPolicy", policy
            out.extend(managed["Properties"]["PolicyDocument"]["Statement"])
        elif "Statement" in policy:
            out.extend(policy["Statement"])
        elif "StepFunctionsExecutionPolicy" in policy:
            name = policy["StepFunctionsExecutionPolicy"]["StateMachineName"]
            out.append(
                {
                    "Effect": "Allow",
                    "Action": ["states:StartExecution"],
                    "Resource": {
                        "Fn::Sub": "arn:${AWS::Partition}:states:${AWS::Region}:"
                        "${AWS::AccountId}:stateMachine:" + refs[name["Fn::GetAtt"]]
                    },
                }
            )
        else:
            raise AssertionError(f"{logical_id}: policy form not modelled by the test: {policy}")
    resolved: list[dict[str, Any]] = _resolve(out, refs)
    return resolved


def _listed(value: Any) -> list[str]:
    return value if isinstance(value, list) else [value]


def allows(statements: list[dict[str, Any]], permission: Permission) -> bool:
    """Whether an Allow statement grants `permission` (action, resource and conditions)."""
    context = dict(permission.context)
    for statement in statements:
        if statement.get("Effect") != "Allow":
            continue
        if not any(fnmatch.fnmatchcase(permission.action, a) for a in _listed(statement["Action"])):
            continue
        if not any(
            fnmatch.fnmatchcase(permission.resource, r) for r in _listed(statement["Resource"])
        ):
            continue
        conditions = statement.get("Condition", {})
        if set(conditions) - {"StringLike", "ForAllValues:StringLike"}:
            raise AssertionError(f"condition operator not modelled: {conditions}")
        like = conditions.get("StringLike", {})
        every = conditions.get("ForAllValues:StringLike", {})
        if all(
            key in context and _like(context[key], patterns) for key, patterns in like.items()
        ) and all(
            # IAM's ForAllValues holds when the key is absent: a call without a partition key
            # (Scan) would pass, so the statements it guards grant single-item actions only.
            key not in context or _like(context[key], patterns)
            for key, patterns in every.items()
        ):
            return True
    return False


def _like(value: str, patterns: Any) -> bool:
    return any(fnmatch.fnmatchcase(value, pattern) for pattern in _listed(patterns))


def stack_refs(table: str, bucket: str, state_machine_name: str) -> dict[str, str]:
    """Test values for the template's intrinsics: the fixture's table, bucket (storage prefix
    `tk`) and state machine (both workflow types), WebSocket API `wsapi01`, this account."""
    return {
        "SessionTable": table,
        "SessionTable.Arn": f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{table}",
        "ProgressBucket": bucket,
        "ProgressBucket.Arn": f"arn:aws:s3:::{bucket}",
        "StoragePrefix": "tk",
        "TurnStateMachine.Name": state_machine_name,
        "TurnExpressStateMachine.Name": state_machine_name,
        "AWS::Partition": "aws",
        "AWS::Region": REGION,
        "AWS::AccountId": ACCOUNT,
        # The standard machine is named `${AWS::StackName}-turn` (template.yaml).
        "AWS::StackName": state_machine_name.removesuffix("-turn"),
        "WebSocketApi": "wsapi01",
    }


def checked_permissions(
    template: Mapping[str, Any], log: AwsCallLog, refs: Mapping[str, str]
) -> Iterator[tuple[str, Permission, bool]]:
    """Each permission each recorded call needed: (function, permission, whether its template
    `Policies` allow it)."""
    for call in log.calls:
        statements = function_statements(template, call.function, refs)
        for permission in required_permissions(call):
            yield call.function, permission, allows(statements, permission)
