"""Stubbing Bedrock ConverseStream with botocore's Stubber, honestly.

Stubber validates a stubbed response against the operation's output shape, and for
ConverseStream that shape declares `stream` as ONE event structure, while the real client returns
an EventStream that yields many such events. `EventStreamStubber` therefore validates every event
separately against that same event-stream shape (exactly one member per event, as on the wire)
and hands the provider an iterable of event dicts, which is what botocore's EventStream yields.
In-stream exception events are raised as `EventStreamError` with the camelCase event name as
the error code, exactly as botocore's event-stream parser does.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from botocore.exceptions import EventStreamError
from botocore.stub import Stubber
from botocore.validate import validate_parameters

_EXCEPTION_EVENTS = {
    "internalServerException",
    "modelStreamErrorException",
    "validationException",
    "throttlingException",
    "serviceUnavailableException",
}


class EventStreamStub:
    """Iterates event dicts like botocore's EventStream; exception events raise like it does."""

    def __init__(self, events: list[dict[str, Any]], *, then: Exception | None = None) -> None:
        self.events = events
        self.then = then
        self.closed = False

    def __iter__(self) -> Iterator[dict[str, Any]]:
        for event in self.events:
            (name,) = event
            if name in _EXCEPTION_EVENTS:
                raise EventStreamError(
                    {"Error": {"Code": name, "Message": event[name].get("message", "")}},
                    "ConverseStream",
                )
            yield event
        if self.then is not None:
            raise self.then

    def close(self) -> None:
        self.closed = True


class EventStreamStubber(Stubber):
    """Stubber that validates ConverseStream's events one by one against the service model."""

    def _validate_operation_response(self, operation_name: str, service_response: Any) -> None:
        if operation_name != "ConverseStream":
            super()._validate_operation_response(operation_name, service_response)
            return
        output_shape = self.client.meta.service_model.operation_model(operation_name).output_shape
        stream_shape = output_shape.members["stream"]
        rest = {k: v for k, v in service_response.items() if k != "stream"}
        self._validate_response(output_shape, rest)
        stub = service_response["stream"]
        assert isinstance(stub, EventStreamStub)
        for event in stub.events:
            assert len(event) == 1, f"an event carries exactly one member: {event}"
            validate_parameters(event, stream_shape)
