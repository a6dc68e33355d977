"""events/env.json (`sam local ... --env-vars`) agrees with template.yaml: SAM passes a function
only the variables its template declares, so an undeclared name would be dropped silently."""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest

from tools.sam_local.scenario import FAILING_MODEL
from tools.sam_local.seed import ENV_FILE, LocalNames
from tools.sam_local.stack import MOTO_ALIAS, MOTO_PORT, SFN_RELAY_ENDPOINT
from tools.sam_local.template import (
    TEMPLATE,
    declared_environment,
    function_ids,
    load_template,
)


@pytest.fixture(scope="module")
def env() -> dict[str, dict[str, str]]:
    data: dict[str, dict[str, str]] = json.loads(ENV_FILE.read_text(encoding="utf-8"))
    return data


@pytest.fixture(scope="module")
def template() -> dict[str, Any]:
    return load_template()


def test_every_function_of_the_template_has_an_entry_and_nothing_else(
    env: dict[str, dict[str, str]], template: dict[str, Any]
) -> None:
    assert set(env) == set(function_ids(template))


def test_every_variable_set_is_one_the_template_declares_for_that_function(
    env: dict[str, dict[str, str]], template: dict[str, Any]
) -> None:
    for function_id, variables in env.items():
        undeclared = set(variables) - set(declared_environment(template, function_id))
        assert not undeclared, f"{function_id}: SAM would drop {sorted(undeclared)}"
        assert all(isinstance(v, str) for v in variables.values()), function_id


def test_every_function_is_pointed_at_the_local_aws_endpoint(
    env: dict[str, dict[str, str]], template: dict[str, Any]
) -> None:
    # Deployed, the declared empty value means each SDK's default endpoint.
    assert template["Globals"]["Function"]["Environment"]["Variables"]["AWS_ENDPOINT_URL"] == ""
    for function_id, variables in env.items():
        assert variables["AWS_ENDPOINT_URL"] == f"http://{MOTO_ALIAS}:{MOTO_PORT}", function_id


def test_every_function_sends_its_step_functions_calls_through_the_relay(
    env: dict[str, dict[str, str]], template: dict[str, Any]
) -> None:
    # The task tokens of executions run on the host come back only through the relay.
    declared = template["Globals"]["Function"]["Environment"]["Variables"]
    assert declared["AWS_ENDPOINT_URL_SFN"] == ""
    for function_id, variables in env.items():
        assert variables["AWS_ENDPOINT_URL_SFN"] == SFN_RELAY_ENDPOINT, function_id


def test_every_function_uses_the_same_table_bucket_and_prefix(
    env: dict[str, dict[str, str]],
) -> None:
    names = LocalNames.from_env_file()
    for function_id, variables in env.items():
        storage = parse_qs(urlsplit(variables["TURNKEEP_STORAGE_URL"]).query)
        assert storage == {
            "table": [names.table],
            "bucket": [names.bucket],
            "prefix": [names.prefix],
        }, function_id
        assert variables["TURNKEEP_ENVELOPE_URL"] == f"aws://?table={names.table}", function_id


def test_the_model_is_the_scripted_one_and_the_api_can_start_the_state_machine(
    env: dict[str, dict[str, str]],
) -> None:
    assert env["ModelStepFunction"]["TURNKEEP_MODEL"] == "scripted"
    api = env["ApiFunction"]
    assert api["TURNKEEP_MODEL"] == "scripted"
    assert api["TURNKEEP_STATE_MACHINE_ARN"].startswith("arn:aws:states:us-east-1:")
    # The scenario's failing turn names a model the API must allow.
    assert FAILING_MODEL in json.loads(api["TURNKEEP_ALLOWED_MODELS"])


def test_nothing_in_the_template_or_env_file_enables_dev_tokens() -> None:
    # Only SAM's own containers set AWS_SAM_LOCAL; declaring it would let a deployment accept
    # dev tokens.
    assert "AWS_SAM_LOCAL" not in TEMPLATE.read_text(encoding="utf-8")
    assert "AWS_SAM_LOCAL" not in ENV_FILE.read_text(encoding="utf-8")
