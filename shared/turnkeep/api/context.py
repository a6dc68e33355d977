"""What every route needs: the runtime, the launcher, the authenticator, the API settings."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Annotated

from fastapi import Depends, Path, Request

from turnkeep.api.auth import Authenticator
from turnkeep.api.errors import not_found
from turnkeep.api.launch import Launcher
from turnkeep.api.models import TURN_ID_PATTERN
from turnkeep.api.settings import ApiSettings
from turnkeep.envelope import Envelope
from turnkeep.harness import reconcile_envelope
from turnkeep.harness.envelope_io import read_ahead
from turnkeep.runtime.build import Runtime
from turnkeep.session_ids import SESSION_ID_PATTERN
from turnkeep.storage import Storage, Value


@dataclass
class ApiContext:
    """The app's collaborators (one per app; routes reach it through `request.app.state`)."""

    runtime: Runtime
    launcher: Launcher
    authenticator: Authenticator
    settings: ApiSettings

    @contextmanager
    def storage(self, session_id: str) -> Iterator[Storage]:
        """A storage handle on the session, closed after use."""
        handle = self.runtime.deps.open_storage(session_id)
        try:
            yield handle
        finally:
            handle.close()

    def owned(self, user_id: str, session_id: str) -> Envelope:
        """The caller's envelope of `session_id`; 404 when absent or another user's.

        An envelope that still says a turn runs which storage says has ended (a lost envelope
        update) is repaired first, so no route acts on a stale `running`.
        """
        envelope = self.runtime.envelopes.get_for_owner(user_id, session_id)
        if envelope is None:
            raise not_found("session")
        return reconcile_envelope(self.runtime.deps, envelope)

    def owned_ahead(
        self,
        user_id: str,
        storage: Storage,
        *,
        values: Sequence[Value] = (),
        entries: Sequence[str] = (),
        head: bool = False,
    ) -> Envelope:
        """`owned`, with what the route reads next from `storage` read in the same request
        where the stores share a table (`read_ahead`); 404 when absent or another user's."""
        envelope = read_ahead(self.runtime.deps, storage, values=values, entries=entries, head=head)
        if envelope is None or envelope.owner_id != user_id:
            raise not_found("session")
        return reconcile_envelope(self.runtime.deps, envelope, storage)

    def now_ms(self) -> int:
        """The harness clock in epoch milliseconds (tests inject a fake clock)."""
        return int(self.runtime.deps.clock() * 1000)


def get_context(request: Request) -> ApiContext:
    """The app's ApiContext."""
    ctx: ApiContext = request.app.state.turnkeep
    return ctx


def get_user(request: Request, ctx: Annotated[ApiContext, Depends(get_context)]) -> str:
    """The authenticated caller (401 otherwise)."""
    return ctx.authenticator.user_id(request)


Ctx = Annotated[ApiContext, Depends(get_context)]
User = Annotated[str, Depends(get_user)]
SessionId = Annotated[
    str,
    Path(pattern=SESSION_ID_PATTERN, max_length=128, description="session id"),
]
TurnId = Annotated[
    str,
    Path(pattern=TURN_ID_PATTERN, max_length=100, description="turn (operation) id"),
]
