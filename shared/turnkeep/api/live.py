"""Where a client follows turns live: `GET /live` (discovery) and `POST /live/tickets` (a
browser's single-use WebSocket ticket). Contract: docs/api.md, "Following turns live".

`GET /live` names the WebSocket API (`TURNKEEP_LIVE_URL`, the template passes the stack's
`WebSocketUrl`) and whether `GET …/stream` answers here (only where the process runs the turns:
`turnkeep serve`), so no client probes a route that cannot answer. Tickets live in the session
table (`turnkeep.live.tickets`); a server without a WebSocket API answers 404 `no_websocket`.
"""

from __future__ import annotations

from fastapi import APIRouter
from pydantic import BaseModel, Field

from turnkeep.api.context import ApiContext, Ctx, User
from turnkeep.api.errors import ApiError
from turnkeep.api.hub import LiveHub
from turnkeep.api.models import error_responses
from turnkeep.live.tickets import TICKET_TTL_S, TicketStore

router = APIRouter(prefix="/live", tags=["live"], responses=error_responses(400, 401, 405, 503))


class LiveView(BaseModel):
    """How this deployment's turns can be followed as they run."""

    websocket_url: str | None = Field(
        description="the WebSocket API to subscribe on (docs/api.md, 'WebSocket API'); null: none"
    )
    stream: bool = Field(description="whether GET /sessions/{id}/turns/{turn}/stream answers")


class LiveTicket(BaseModel):
    """A single-use credential of the WebSocket API's `$connect`, bound to the caller."""

    ticket: str = Field(description="connect with <websocket_url>?ticket=<ticket>, once")
    expires_in: int = Field(description="seconds it stays valid")
    websocket_url: str


@router.get("", response_model=LiveView)
def get_live(ctx: Ctx, user: User) -> LiveView:
    """Where turns are followed live here: the WebSocket API, the stream route, or neither."""
    return LiveView(
        websocket_url=ctx.settings.live_url or None,
        stream=isinstance(ctx.runtime.deps.live, LiveHub),
    )


@router.post(
    "/tickets",
    status_code=201,
    response_model=LiveTicket,
    responses=error_responses(404, 503),
)
def create_ticket(ctx: Ctx, user: User) -> LiveTicket:
    """A ticket for one WebSocket connection as the caller, valid about a minute."""
    if not ctx.settings.live_url:
        raise ApiError(
            404,
            "no_websocket",
            "this server has no WebSocket API: follow turns on GET .../stream or poll "
            "GET .../events (GET /live says which)",
        )
    from botocore.exceptions import BotoCoreError, ClientError

    try:
        ticket = _store(ctx).issue(user)
    except (BotoCoreError, ClientError) as exc:  # throttled, unreachable: nothing was issued
        raise ApiError(503, "unavailable", f"the ticket could not be stored: {exc}") from None
    return LiveTicket(
        ticket=ticket.value, expires_in=TICKET_TTL_S, websocket_url=ctx.settings.live_url
    )


def _store(ctx: ApiContext) -> TicketStore:
    """The ticket store in the envelope table (its client is the process's shared one)."""
    from turnkeep.live.push import envelope_table

    try:
        table = envelope_table(ctx.runtime.settings.envelope_url_or_local())
    except ValueError as exc:  # TURNKEEP_LIVE_URL set on a server without the AWS table
        message = str(exc).replace("WS_ENDPOINT", "LIVE_URL")
        raise ApiError(503, "live_unavailable", message) from None
    return TicketStore(table.client(), table.table)
