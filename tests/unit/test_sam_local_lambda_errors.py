"""start-lambda answers mapped to what Step Functions raises (tools/sam_local/lambda_errors.py)."""

from __future__ import annotations

import json

from tools.sam_local.lambda_errors import (
    TIMEOUT_ERROR,
    TaskFailure,
    TaskResult,
    connection_failure,
    outcome,
)


def _body(value: object) -> bytes:
    return json.dumps(value).encode()


def test_a_handler_that_raised_is_a_failure_named_by_its_error_type_despite_no_header() -> None:
    raised = {"errorType": "RetryableStepError", "errorMessage": "head moved", "stackTrace": []}
    body = _body(raised)

    result = outcome(200, {}, body)

    assert result == TaskFailure("RetryableStepError", body.decode())


def test_a_function_error_header_is_a_failure_as_lambda_reports_it() -> None:
    body = _body({"errorType": "ValueError", "errorMessage": "bad"})

    assert outcome(200, {"X-Amz-Function-Error": "Unhandled"}, body) == TaskFailure(
        "ValueError", body.decode()
    )
    assert outcome(200, {"x-amz-function-error": "Unhandled"}, b"oops").error == "Lambda.Unknown"


def test_the_bare_timeout_text_is_the_timeout_error_lambda_reports() -> None:
    result = outcome(200, {}, b"Task timed out after 300.00 seconds")

    assert isinstance(result, TaskFailure)
    assert result.error == TIMEOUT_ERROR == "Sandbox.Timedout"
    assert json.loads(result.cause)["errorMessage"] == "Task timed out after 300.00 seconds"


def test_start_lambdas_own_failures_are_lambda_service_errors() -> None:
    not_found = outcome(
        404,
        {"x-amzn-errortype": "ResourceNotFoundException:http://internal.amazon.com/"},
        _body({"Type": "User", "Message": "Function not found: arn:...:Missing"}),
    )
    assert not_found == TaskFailure(
        "Lambda.ResourceNotFoundException", "Function not found: arn:...:Missing"
    )
    assert outcome(500, {}, b"").error == "Lambda.ServiceException"
    assert outcome(502, {}, b"bad gateway") == TaskFailure("Lambda.ServiceException", "bad gateway")
    assert outcome(429, {}, b"slow down").error == "Lambda.TooManyRequestsException"
    assert outcome(400, {}, b"").error == "Lambda.AWSLambdaException"


def test_an_unreachable_start_lambda_is_a_client_side_sdk_error() -> None:
    assert connection_failure("refused").error == "Lambda.SdkClientException"


def test_a_result_that_merely_mentions_error_type_is_a_result() -> None:
    value = {"errorType": "x", "errorMessage": "y", "status": "done"}

    assert outcome(200, {}, _body(value)) == TaskResult(value)


def test_results_of_any_json_shape_pass_through_and_non_json_stays_text() -> None:
    assert outcome(200, {}, _body({"next": "finish"})) == TaskResult({"next": "finish"})
    assert outcome(200, {}, b"[1, 2]") == TaskResult([1, 2])
    assert outcome(200, {}, b"null") == TaskResult(None)
    assert outcome(200, {}, b"") == TaskResult(None)
    assert outcome(200, {}, b"plain words") == TaskResult("plain words")


def test_a_failure_becomes_lambdas_error_payload_for_the_interpreter() -> None:
    raised = TaskFailure("ValueError", json.dumps({"errorType": "ValueError", "errorMessage": "m"}))
    service = TaskFailure("Lambda.ServiceException", "start-lambda crashed")

    assert raised.payload() == {"errorType": "ValueError", "errorMessage": "m"}
    assert service.payload() == {
        "errorType": "Lambda.ServiceException",
        "errorMessage": "start-lambda crashed",
    }
