"""Whole turns through the local orchestrator (`run_turn`) on fresh memory storage, for the
providers' wire-level tests: the provider is real, only its server is local."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from turnkeep.envelope import MemoryEnvelopeStore
from turnkeep.harness import HarnessDeps, TurnResult, run_turn
from turnkeep.harness.state import load_head
from turnkeep.harness.transcript import entry_message
from turnkeep.providers.base import Message, ModelProvider
from turnkeep.storage import open_storage

SESSION = "wire-session"
USER = "wire-user"


@dataclass
class WireSession:
    """One session's storage and envelopes; `turn` runs a turn, `transcript` reads the branch."""

    provider: ModelProvider
    url: str = ""

    def __post_init__(self) -> None:
        self.url = f"memory://wire-{uuid.uuid4().hex}"
        self.envelopes = MemoryEnvelopeStore()
        self.envelopes.create(SESSION, USER, {})
        self.deps = HarnessDeps(
            open_storage=lambda session_id: open_storage(self.url, session_id),
            envelopes=self.envelopes,
            provider=self.provider,
        )

    def turn(self, text: str) -> TurnResult:
        return run_turn(self.deps, SESSION, USER, text, op_id=f"op-{uuid.uuid4().hex[:12]}")

    def entries(self) -> list[tuple[Message, dict[str, object]]]:
        """Every message of the branch with its entry data, oldest first."""
        storage = self.deps.open_storage(SESSION)
        try:
            head = load_head(storage)
            out: list[tuple[Message, dict[str, object]]] = []
            for entry in storage.scan_branch(head) if head else []:
                message = entry_message(entry)
                if message is not None:
                    out.append((message, entry.data if isinstance(entry.data, dict) else {}))
            return out
        finally:
            storage.close()

    def close(self) -> None:
        self.envelopes.close()
