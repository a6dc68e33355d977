"""The template's side of Bedrock `s3Location` sources (docs/attachments.md, "S3 sources"): the
setting is a parameter reaching the model step, the bucket owner is the stack's account, and the
model step's role may read the attachments' objects, Bedrock reading them with its access, and
that statement grants nothing else."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.iam_policy import Permission, allows, function_statements, stack_refs
from tools.sam_local.template import load_template
from turnkeep.harness import HarnessLimits

BUCKET = "tk-bucket"
SID = "BedrockReadsAttachments"


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def _object(key: str) -> str:
    return f"arn:aws:s3:::{BUCKET}/{key}"


def test_the_attachment_source_parameter_offers_the_settings_values_and_reaches_the_model_step(
    template: dict[str, Any],
) -> None:
    parameter = template["Parameters"]["AttachmentSource"]
    field = HarnessLimits.model_fields["attachment_source"]
    assert parameter["Default"] == field.default == "auto"
    assert set(parameter["AllowedValues"]) == {"auto", "bytes"}
    variables = template["Resources"]["ModelStepFunction"]["Properties"]["Environment"]["Variables"]
    assert variables["TURNKEEP_ATTACHMENT_SOURCE"] == {"Ref": "AttachmentSource"}
    assert variables["TURNKEEP_ATTACHMENT_BUCKET_OWNER"] == {"Ref": "AWS::AccountId"}


def test_the_model_step_may_read_an_attachment_object_and_the_statement_grants_nothing_else(
    template: dict[str, Any],
) -> None:
    statements = function_statements(
        template, "ModelStepFunction", stack_refs("tk-table", BUCKET, "tk-turn")
    )
    (own,) = [s for s in statements if s.get("Sid") == SID]
    attachment = _object("tk/sessions/s-1/attachments/att-0123456789abcdef01234567")

    assert allows([own], Permission("s3:GetObject", attachment))
    assert not allows([own], Permission("s3:PutObject", attachment))
    assert not allows([own], Permission("s3:DeleteObject", attachment))
    # Another object of the session (its progress), another prefix, another bucket.
    assert not allows([own], Permission("s3:GetObject", _object("tk/sessions/s-1/ops/op-1/f")))
    assert not allows([own], Permission("s3:GetObject", _object("other/sessions/s/attachments/a")))
    other_bucket = "arn:aws:s3:::elsewhere/tk/sessions/s-1/attachments/att-1"
    assert not allows([own], Permission("s3:GetObject", other_bucket))


def test_no_other_function_reads_attachments_for_bedrock(template: dict[str, Any]) -> None:
    holders = [
        logical_id
        for logical_id, resource in template["Resources"].items()
        if resource["Type"] == "AWS::Serverless::Function"
        for policy in resource["Properties"].get("Policies", [])
        if isinstance(policy, dict)
        for statement in policy.get("Statement", [])
        if statement.get("Sid") == SID
    ]
    assert holders == ["ModelStepFunction"]
