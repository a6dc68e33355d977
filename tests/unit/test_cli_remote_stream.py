"""The remote chat against the real app while a round is streaming: frames are printed as they
arrive and the settled entry adds only the rest, so the reply reads exactly once."""

from __future__ import annotations

import io
import threading
import uuid
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from turnkeep.api import LocalDevAuthenticator, LocalLauncher, create_app
from turnkeep.cli.printer import StreamPrinter
from turnkeep.cli.remote import RemoteChat
from turnkeep.providers.base import ModelRequest, StreamEvent, TextDelta
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.runtime.build import build_runtime
from turnkeep.runtime.settings import TurnkeepSettings

GATE_TIMEOUT_S = 30.0


class GatedProvider(ScriptedProvider):
    """The scripted model, holding each round after its first two text deltas until `gate`."""

    def __init__(self, gate: threading.Event) -> None:
        super().__init__(words_per_frame=1)
        self.gate = gate

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        texts = 0
        for event in super().stream(request):
            if isinstance(event, TextDelta):
                texts += 1
                if texts == 3:
                    # Bounded: if the client never shows the frames, the round goes on and the
                    # test's first-piece assertion fails instead of hanging.
                    self.gate.wait(GATE_TIMEOUT_S)
            yield event


class RecordingPrinter(StreamPrinter):
    """Records every text piece; opens the gate once some streamed text was shown."""

    def __init__(self, out: io.StringIO, gate: threading.Event) -> None:
        super().__init__(out)
        self.gate = gate
        self.pieces: list[str] = []

    def text(self, piece: str) -> None:
        self.pieces.append(piece)
        super().text(piece)
        self.gate.set()


@pytest.fixture
def gate() -> threading.Event:
    return threading.Event()


@pytest.fixture
def client(gate: threading.Event) -> Iterator[TestClient]:
    name = f"remote-{uuid.uuid4().hex[:10]}"
    settings = TurnkeepSettings(
        storage_url=f"memory://{name}", envelope_url=f"memory://{name}", frame_interval_ms=0
    )
    runtime = build_runtime(settings, provider=GatedProvider(gate))
    launcher = LocalLauncher(runtime.deps, workers=1)
    app = create_app(runtime, launcher, LocalDevAuthenticator())
    try:
        with TestClient(app, headers={"Authorization": "Bearer dev-alice"}) as test_client:
            yield test_client
    finally:
        gate.set()
        launcher.shutdown(wait=True)
        runtime.close()


def test_streamed_frames_print_as_they_arrive_and_the_entry_adds_only_the_rest(
    client: TestClient, gate: threading.Event
) -> None:
    out = io.StringIO()
    printer = RecordingPrinter(out, gate)
    chat = RemoteChat(client, printer, turn_wall_s=60)
    chat.open_session(None)

    status = chat.turn("hello streaming world")

    assert status == "completed"
    reply = "You said: hello streaming world"
    assert printer.pieces[0] != reply  # the first piece came from a frame, mid-round
    assert "".join(printer.pieces) == reply  # every piece exactly once, nothing repeated
    assert out.getvalue().startswith(f"assistant> {reply}\n[turn op-")
