"""The template's answers to the security scan (checkov 3): access logs on the HTTP API,
reserved concurrency as a parameter, and every finding that does not fit the design skipped on
its own resource with its reason (no blanket skips)."""

from __future__ import annotations

from typing import Any

import pytest

from tools.sam_local.template import ROOT, load_template


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def test_the_http_api_writes_access_logs_to_a_log_group_with_retention(
    template: dict[str, Any],
) -> None:
    api = template["Resources"]["HttpApi"]["Properties"]
    destination = api["AccessLogSettings"]["DestinationArn"]
    group_id = destination["Fn::GetAtt"].split(".")[0]
    group = template["Resources"][group_id]
    assert group["Type"] == "AWS::Logs::LogGroup"
    assert group["Properties"]["RetentionInDays"] == {"Ref": "AccessLogRetentionDays"}
    assert "$context.status" in api["AccessLogSettings"]["Format"]


def test_reserved_concurrency_is_a_parameter_that_can_reserve_nothing(
    template: dict[str, Any],
) -> None:
    parameter = template["Parameters"]["ReservedConcurrency"]
    assert parameter["Type"] == "Number"
    assert parameter["Default"] == 0  # a low-quota account must still deploy
    setting = template["Globals"]["Function"]["ReservedConcurrentExecutions"]
    condition, when_set, otherwise = setting["Fn::If"]
    assert when_set == {"Ref": "ReservedConcurrency"}
    assert otherwise == {"Ref": "AWS::NoValue"}
    assert template["Conditions"][condition] == {
        "Fn::Not": [{"Fn::Equals": [{"Ref": "ReservedConcurrency"}, 0]}]
    }


def test_every_scanner_skip_names_one_check_on_its_resource_with_a_reason(
    template: dict[str, Any],
) -> None:
    skipped = 0
    for logical_id, resource in template["Resources"].items():
        skips = resource.get("Metadata", {}).get("checkov", {}).get("skip", [])
        ids = [skip["id"] for skip in skips]
        assert len(ids) == len(set(ids)), logical_id
        for skip in skips:
            assert skip["id"].startswith("CKV_AWS_"), (logical_id, skip)
            assert len(skip.get("comment", "")) >= 40, (logical_id, skip)
        skipped += len(skips)
    assert skipped > 0
    # No file-wide or configuration-wide suppression.
    assert "checkov:skip" not in (ROOT / "template.yaml").read_text(encoding="utf-8")
    assert not (ROOT / ".checkov.yaml").exists()
    assert not (ROOT / ".checkov.yml").exists()
