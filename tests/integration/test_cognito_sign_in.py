"""Signing in to the stack's own user pool, under moto (cognito-idp): a pool and app client
created exactly as template.yaml declares them, an invited user, `turnkeep token` answering
the first-sign-in challenge, and the API handler accepting the token's `sub` in the JWT-claims
event shape API Gateway's authorizer produces."""

from __future__ import annotations

import argparse
import base64
import copy
import io
import json
from types import ModuleType
from typing import Any

import boto3
import pytest

from tests.support.lambda_env import lambda_deployment
from tests.support.lambda_host import ROOT, FakeContext, load_function_module
from tools.sam_local.template import load_template
from turnkeep.aws_lambda import container
from turnkeep.cli.token import run_token

REGION = "us-east-1"
USER = "ada@example.com"
TEMPORARY = "Temp-passw0rd!x"
CHOSEN = "Chosen-passw0rd!y"


def _pool_kwargs(template: dict[str, Any]) -> dict[str, Any]:
    """`create_user_pool` arguments from the template's UserPool (its name is a !Sub)."""
    props = copy.deepcopy(template["Resources"]["UserPool"]["Properties"])
    props.pop("UserPoolName")
    return {"PoolName": "stack-users", **props}


def _client_kwargs(template: dict[str, Any], pool_id: str) -> dict[str, Any]:
    props = copy.deepcopy(template["Resources"]["UserPoolClient"]["Properties"])
    props["UserPoolId"] = pool_id
    return dict(props)


def _invited(
    template: dict[str, Any], attributes: list[dict[str, str]] | None = None
) -> tuple[Any, str, argparse.Namespace]:
    """The template's pool and app client with USER invited (TEMPORARY password): the
    cognito-idp client, the pool id, and `turnkeep token`'s arguments for that client."""
    idp = boto3.client("cognito-idp", region_name=REGION)
    pool_id = idp.create_user_pool(**_pool_kwargs(template))["UserPool"]["Id"]
    client_id = idp.create_user_pool_client(**_client_kwargs(template, pool_id))["UserPoolClient"][
        "ClientId"
    ]
    invite: dict[str, Any] = {"UserAttributes": attributes} if attributes is not None else {}
    idp.admin_create_user(UserPoolId=pool_id, Username=USER, TemporaryPassword=TEMPORARY, **invite)
    args = argparse.Namespace(client_id=client_id, username=USER, region=REGION, id_token=False)
    return idp, pool_id, args


def _claims(jwt: str) -> dict[str, Any]:
    payload = jwt.split(".")[1]
    decoded: dict[str, Any] = json.loads(
        base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))
    )
    return decoded


def _call(app: ModuleType, claims: dict[str, Any], method: str, path: str, body: Any = None) -> Any:
    event = json.loads((ROOT / "events" / "api" / "create_session.json").read_text("utf-8"))
    event["requestContext"]["authorizer"]["jwt"]["claims"] = claims
    event["requestContext"]["http"]["method"] = method
    event["requestContext"]["http"]["path"] = path
    event["rawPath"] = path
    event["routeKey"] = f"{method} /{{proxy+}}"
    event["body"] = json.dumps(body) if body is not None else None
    event["isBase64Encoded"] = False
    answer = app.handler(event, FakeContext(function_name="api"))
    return int(answer["statusCode"]), json.loads(answer["body"]) if answer.get("body") else None


def test_an_invited_user_gets_a_token_whose_sub_the_api_accepts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    template = load_template()
    with lambda_deployment(monkeypatch, "turnkeep-sessions", "turnkeep-progress"):
        idp, pool_id, args = _invited(template, [{"Name": "email", "Value": USER}])
        client_id = args.client_id
        sub = next(
            a["Value"]
            for a in idp.admin_get_user(UserPoolId=pool_id, Username=USER)["UserAttributes"]
            if a["Name"] == "sub"
        )

        out, err = io.StringIO(), io.StringIO()
        prompts: list[str] = []
        status = run_token(
            args,
            out,
            err,
            prompt=lambda text: prompts.append(text) or TEMPORARY,
            environ={"TURNKEEP_NEW_PASSWORD": CHOSEN},
        )
        assert status == 0, err.getvalue()
        assert prompts == [f"Password for {USER}: "]  # the new password came from the env
        token = out.getvalue().strip()
        claims = _claims(token)
        assert claims["sub"] == sub
        assert claims["client_id"] == client_id  # what the HTTP API's authorizer checks
        # The issuer the template wires into the authorizer for its own pool.
        assert claims["iss"] == f"https://cognito-idp.{REGION}.amazonaws.com/{pool_id}"

        # The API handler, in the claims shape API Gateway's JWT authorizer gives it.
        sfn = boto3.client("stepfunctions")
        arn = sfn.create_state_machine(
            name="turn",
            definition=json.dumps({"StartAt": "P", "States": {"P": {"Type": "Pass", "End": True}}}),
            roleArn="arn:aws:iam::123456789012:role/turn",
        )["stateMachineArn"]
        monkeypatch.setenv("TURNKEEP_STATE_MACHINE_ARN", arn)
        container.reset_runtime()
        app = load_function_module("api")
        status_code, created = _call(app, claims, "POST", "/sessions", {"title": "signed in"})
        assert status_code == 201, created
        status_code, listed = _call(app, claims, "GET", "/sessions")
        assert status_code == 200
        assert [s["session_id"] for s in listed["sessions"]] == [created["session_id"]]

        # Signed in again with the chosen password: the same user, no challenge.
        again = io.StringIO()
        assert run_token(args, again, err, environ={"TURNKEEP_PASSWORD": CHOSEN}) == 0
        assert _claims(again.getvalue().strip())["sub"] == sub


def test_a_wrong_password_is_one_line_and_exit_status_1(monkeypatch: pytest.MonkeyPatch) -> None:
    template = load_template()
    with lambda_deployment(monkeypatch, "turnkeep-sessions", "turnkeep-progress"):
        _, _, args = _invited(template)
        out, err = io.StringIO(), io.StringIO()
        status = run_token(args, out, err, environ={"TURNKEEP_PASSWORD": "Wrong-passw0rd!"})
        assert status == 1
        assert out.getvalue() == ""
        assert err.getvalue().startswith("turnkeep token: sign-in refused (NotAuthorizedException)")
        assert err.getvalue().count("\n") == 1


def test_the_pool_the_template_declares_has_a_strong_password_policy_and_no_self_sign_up() -> None:
    template = load_template()
    pool = template["Resources"]["UserPool"]
    client = template["Resources"]["UserPoolClient"]
    policy = pool["Properties"]["Policies"]["PasswordPolicy"]
    assert policy["MinimumLength"] >= 12
    assert all(policy[k] for k in ("RequireLowercase", "RequireUppercase", "RequireNumbers"))
    assert pool["Properties"]["AdminCreateUserConfig"]["AllowAdminCreateUserOnly"] is True
    assert client["Properties"]["GenerateSecret"] is False
    assert pool["Condition"] == client["Condition"] == "CreateUserPool"
    # Created only when neither JwtIssuer nor JwtAudience is given; both default to empty.
    assert template["Conditions"]["CreateUserPool"] == {
        "Fn::And": [
            {"Fn::Equals": [{"Ref": "JwtIssuer"}, ""]},
            {"Fn::Equals": [{"Ref": "JwtAudience"}, ""]},
        ]
    }
    assert template["Parameters"]["JwtIssuer"]["Default"] == ""
    jwt = template["Resources"]["HttpApi"]["Properties"]["Auth"]["Authorizers"]["Jwt"]
    issuer = jwt["JwtConfiguration"]["issuer"]["Fn::If"]
    assert issuer[0] == "CreateUserPool"
    assert issuer[2] == {"Ref": "JwtIssuer"}
    audience = jwt["JwtConfiguration"]["audience"][0]["Fn::If"]
    assert audience == ["CreateUserPool", {"Ref": "UserPoolClient"}, {"Ref": "JwtAudience"}]
    outputs = template["Outputs"]
    assert outputs["UserPoolClientId"]["Condition"] == "CreateUserPool"


def test_cross_origin_calls_are_allowed_only_for_the_configured_origins() -> None:
    template = load_template()
    assert template["Parameters"]["CorsAllowOrigins"]["Default"] == ""
    cors = template["Resources"]["HttpApi"]["Properties"]["CorsConfiguration"]["Fn::If"]
    assert cors[0] == "HasCorsOrigins"
    assert cors[2] == {"Ref": "AWS::NoValue"}  # none by default
    assert cors[1]["AllowOrigins"] == {"Fn::Split": [",", {"Ref": "CorsAllowOrigins"}]}
    assert "authorization" in cors[1]["AllowHeaders"]
    assert "retry-after" in cors[1]["ExposeHeaders"]


def test_with_an_identity_provider_given_no_pool_is_created_and_the_authorizer_takes_it() -> None:
    from tools.sam_local.template import render

    template = load_template()
    own = render(template)
    assert {"UserPool", "UserPoolClient"} <= set(own["Resources"])
    issuer = own["Resources"]["HttpApi"]["Properties"]["Auth"]["Authorizers"]["Jwt"][
        "JwtConfiguration"
    ]["issuer"]
    assert issuer == {"Fn::Sub": "https://cognito-idp.${AWS::Region}.${AWS::URLSuffix}/${UserPool}"}

    given = render(template, {"JwtIssuer": "https://idp.example/", "JwtAudience": "app-1"})
    assert "UserPool" not in given["Resources"]
    assert "UserPoolClient" not in given["Resources"]
    assert "UserPoolClientId" not in given["Outputs"]
    jwt = given["Resources"]["HttpApi"]["Properties"]["Auth"]["Authorizers"]["Jwt"]
    assert jwt["JwtConfiguration"] == {
        "issuer": {"Ref": "JwtIssuer"},
        "audience": [{"Ref": "JwtAudience"}],
    }
    assert "CorsConfiguration" not in given["Resources"]["HttpApi"]["Properties"]
    with_cors = render(template, {"CorsAllowOrigins": "http://127.0.0.1:8787"})
    assert "CorsConfiguration" in with_cors["Resources"]["HttpApi"]["Properties"]
