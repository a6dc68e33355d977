"""Local turn owners: a turn whose process is gone is resumed or ended by the next opener; a
turn a live process drives is left alone; an ended turn's envelope is repaired."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.owners import dead_owner
from turnkeep.api.launch import LocalLauncher
from turnkeep.api.serve import resume_unfinished
from turnkeep.cli.chat import LocalChat, repl
from turnkeep.cli.printer import StreamPrinter
from turnkeep.harness import StartTurnInput, run_turn, start_turn, turn_result
from turnkeep.harness.local_owner import (
    Owner,
    current_owner,
    inspect_turn,
    load_owner,
    owner_alive,
    record_owner,
)
from turnkeep.harness.state import load_state
from turnkeep.providers.base import ModelRequest, StreamEvent
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.runtime.build import Runtime, build_runtime
from turnkeep.runtime.settings import TurnkeepSettings

SID = "s-owned"


@pytest.fixture
def runtime(tmp_path: Path) -> Iterator[Runtime]:
    built = build_runtime(TurnkeepSettings(local_dir=tmp_path))
    built.envelopes.create(SID, "u1")
    try:
        yield built
    finally:
        built.close()


def _left_running(runtime: Runtime, op: str, owner: Owner | None, text: str = "hello") -> None:
    """A turn started and then left: its driver stopped before the first model round."""
    if owner is not None:
        with runtime.deps.open_storage(SID) as storage:
            record_owner(storage, op, owner)
    start_turn(
        runtime.deps,
        StartTurnInput(session_id=SID, op_id=op, user_id="u1", text=text, model="scripted"),
    )


def test_this_process_is_alive_and_an_exited_one_is_not() -> None:
    assert owner_alive(current_owner()) is True
    assert owner_alive(dead_owner()) is False


def test_a_reused_pid_with_another_start_time_is_not_the_owner() -> None:
    reused = current_owner().model_copy(update={"process_start": "1"})

    assert owner_alive(reused) is False


def test_an_owner_on_another_host_cannot_be_told_here() -> None:
    elsewhere = current_owner().model_copy(update={"host": "another-host.invalid"})

    assert owner_alive(elsewhere) is None


def test_the_verdicts_of_a_running_turn_follow_its_owner(runtime: Runtime) -> None:
    _left_running(runtime, "op-dead", dead_owner())
    finding = inspect_turn(runtime.deps, SID)
    assert finding is not None
    assert (finding.op_id, finding.verdict) == ("op-dead", "orphaned")
    assert "which is gone" in finding.describe()

    with runtime.deps.open_storage(SID) as storage:
        record_owner(storage, "op-dead", current_owner())
    finding = inspect_turn(runtime.deps, SID)
    assert finding is not None
    assert finding.verdict == "live"


def test_a_turn_without_an_owner_record_is_left_alone(runtime: Runtime) -> None:
    _left_running(runtime, "op-nobody", None)

    finding = inspect_turn(runtime.deps, SID)

    assert finding is not None
    assert finding.verdict == "unknown"


def test_server_start_up_leaves_a_turn_a_live_process_drives_alone(runtime: Runtime) -> None:
    _left_running(runtime, "op-live", current_owner())  # e.g. a `turnkeep chat` on the file
    launcher = LocalLauncher(runtime.deps)
    try:
        assert resume_unfinished(runtime, launcher) == []
        assert launcher.pending() == 0
    finally:
        launcher.shutdown()
    with runtime.deps.open_storage(SID) as storage:
        assert load_state(storage, "op-live") is not None


def test_server_start_up_resumes_a_dead_owners_turn_with_the_model_it_started_with(
    runtime: Runtime,
) -> None:
    _left_running(runtime, "op-dead", dead_owner())
    asked: list[str | None] = []
    resolve = runtime.deps.provider

    def recording(spec: str | None) -> object:
        asked.append(spec)
        return resolve(spec)  # type: ignore[operator]

    runtime.deps.provider = recording  # type: ignore[assignment]
    launcher = LocalLauncher(runtime.deps)
    try:
        assert resume_unfinished(runtime, launcher) == [f"{SID}/op-dead"]
        assert launcher.wait_idle(30)
    finally:
        launcher.shutdown()
    result = turn_result(runtime.deps, SID, "op-dead")
    assert result is not None
    assert result.status == "completed"
    assert set(asked) == {"scripted"}
    with runtime.deps.open_storage(SID) as storage:
        assert load_owner(storage, "op-dead") is None  # forgotten once the turn ended


def test_a_chat_message_ends_a_dead_owners_turn_first_and_then_runs(runtime: Runtime) -> None:
    _left_running(runtime, "op-dead", dead_owner())
    out = io.StringIO()
    chat = LocalChat(runtime, SID, "u1", "scripted", StreamPrinter(out))

    notice = chat.opening_notice()
    repl(io.StringIO("remember the sky is blue\n/quit\n"), out, chat)

    assert notice is not None
    assert "op-dead was left running by pid" in notice
    assert "/resume continues it, /cancel ends it" in notice
    text = out.getvalue()
    assert "ended it: failed" in text
    assert "already has a turn in progress" not in text
    dead = turn_result(runtime.deps, SID, "op-dead")
    assert dead is not None
    assert dead.status == "failed"
    assert dead.error is not None
    assert dead.error.startswith("abandoned:")
    envelope = runtime.envelopes.get(SID)
    assert envelope is not None
    assert envelope.meta["turnStatus"] == "completed"


def _chat(runtime: Runtime, typed: str) -> str:
    """What `turnkeep chat` on SID prints for the lines `typed` (its REPL, in-process)."""
    out = io.StringIO()
    repl(io.StringIO(typed), out, LocalChat(runtime, SID, "u1", "scripted", StreamPrinter(out)))
    return out.getvalue()


def test_chat_resume_drives_a_dead_owners_turn_to_its_end(runtime: Runtime) -> None:
    _left_running(runtime, "op-dead", dead_owner(), text='call echo {"text": "resumed!"}')
    text = _chat(runtime, "/resume\n/quit\n")

    assert "[resuming turn op-dead]" in text
    assert "<- echo [ok] resumed!" in text
    assert "[turn op-dead: completed" in text


def test_chat_cancel_ends_a_dead_owners_turn_as_aborted(runtime: Runtime) -> None:
    _left_running(runtime, "op-dead", dead_owner())
    text = _chat(runtime, "/cancel\n/cancel\n/quit\n")

    assert "[turn op-dead cancelled: aborted]" in text
    assert "[no turn is running]" in text
    result = turn_result(runtime.deps, SID, "op-dead")
    assert result is not None
    assert result.status == "aborted"


def test_chat_leaves_a_turn_a_live_process_drives_alone(runtime: Runtime) -> None:
    _left_running(runtime, "op-live", current_owner())
    text = _chat(runtime, "hello\n/resume\n/quit\n")

    assert "op-live is running, driven by pid" in text
    assert "not resumed" in text
    with runtime.deps.open_storage(SID) as storage:
        assert load_state(storage, "op-live") is not None


def test_an_ended_turn_with_a_lagging_envelope_is_repaired_on_open(runtime: Runtime) -> None:
    result = run_turn(runtime.deps, SID, "u1", "hello", op_id="op-done", model="scripted")
    # The envelope update after the terminal commit was lost (the process died in between).
    runtime.envelopes.update_worker_meta(SID, {"turnStatus": "running", "turnRunId": "op-done"})
    chat = LocalChat(runtime, SID, "u1", "scripted", StreamPrinter(io.StringIO()))

    assert chat.opening_notice() is None

    envelope = runtime.envelopes.get(SID)
    assert envelope is not None
    assert envelope.meta["turnStatus"] == result.status == "completed"


def test_chat_commands_are_never_sent_to_the_model(runtime: Runtime) -> None:
    text = _chat(runtime, "/help\n/notes\n/frobnicate\n/quit\nnever sent\n")

    assert "/cancel   cancel the session's running turn" in text
    assert "(no working notes)" in text
    assert "unknown command /frobnicate" in text
    with runtime.deps.open_storage(SID) as storage:
        assert storage.get_stats().entry_count == 0


def test_the_server_takes_over_a_dead_owners_turn_when_a_turn_start_finds_it(
    runtime: Runtime,
) -> None:
    from fastapi.testclient import TestClient

    from turnkeep.api import LocalDevAuthenticator, create_app

    _left_running(runtime, "op-dead", dead_owner())
    launcher = LocalLauncher(runtime.deps)
    app = create_app(runtime, launcher, LocalDevAuthenticator())
    headers = {"Authorization": "Bearer dev-u1"}
    try:
        with TestClient(app) as client:
            refused = client.post(f"/sessions/{SID}/turns", json={"text": "hi"}, headers=headers)
            assert launcher.wait_idle(30)
            accepted = client.post(f"/sessions/{SID}/turns", json={"text": "hi"}, headers=headers)
            assert launcher.wait_idle(30)
    finally:
        launcher.shutdown()

    assert refused.status_code == 409
    assert "resumed now: the process that drove it is gone" in refused.json()["error"]["message"]
    resumed = turn_result(runtime.deps, SID, "op-dead")
    assert resumed is not None
    assert resumed.status == "completed"
    assert accepted.status_code == 202


def test_a_turn_start_repairs_an_ended_turns_lagging_envelope_and_goes_on(
    runtime: Runtime,
) -> None:
    from fastapi.testclient import TestClient

    from turnkeep.api import LocalDevAuthenticator, create_app

    run_turn(runtime.deps, SID, "u1", "hello", op_id="op-done", model="scripted")
    runtime.envelopes.update_worker_meta(SID, {"turnStatus": "running", "turnRunId": "op-done"})
    launcher = LocalLauncher(runtime.deps)
    app = create_app(runtime, launcher, LocalDevAuthenticator())
    try:
        with TestClient(app) as client:
            answer = client.post(
                f"/sessions/{SID}/turns",
                json={"text": "hi"},
                headers={"Authorization": "Bearer dev-u1"},
            )
            assert launcher.wait_idle(30)
    finally:
        launcher.shutdown()

    assert answer.status_code == 202, answer.text


class _CtrlCOnce(ScriptedProvider):
    """Streams the scripted reply, but the first turn is interrupted at its first frame."""

    def __init__(self) -> None:
        super().__init__()
        self.interrupted = False

    def stream(self, request: ModelRequest) -> Iterator[StreamEvent]:
        for event in super().stream(request):
            if not self.interrupted:
                self.interrupted = True
                raise KeyboardInterrupt
            yield event


def test_ctrl_c_in_an_in_process_turn_aborts_that_turn_and_the_chat_goes_on(
    tmp_path: Path,
) -> None:
    built = build_runtime(TurnkeepSettings(local_dir=tmp_path), provider=_CtrlCOnce())
    try:
        built.envelopes.create(SID, "u1")
        out = io.StringIO()
        chat = LocalChat(built, SID, "u1", "scripted", StreamPrinter(out))

        repl(io.StringIO("hello\nremember the sky is blue\n/quit\n"), out, chat)

        text = out.getvalue()
        assert "[interrupted: the turn was cancelled (aborted)]" in text
        assert "assistant> Noted." in text
        envelope = built.envelopes.get(SID)
        assert envelope is not None
        assert envelope.meta["turnStatus"] == "completed"
        with built.deps.open_storage(SID) as storage:
            records = [v.value for v in storage.scan_values("turn.result", "")]
        assert sorted(r["status"] for r in records) == ["aborted", "completed"]  # type: ignore[index]
    finally:
        built.close()


def test_an_api_turn_without_a_model_records_the_servers_default_with_the_turn() -> None:
    from tests.support.api_client import auth, make_api_harness

    for api in make_api_harness(run_turns=False):
        sid = api.session()
        started = api.client.post(f"/sessions/{sid}/turns", json={"text": "hi"}, headers=auth())
        assert started.status_code == 202
        with api.runtime.deps.open_storage(sid) as storage:
            state = load_state(storage, started.json()["turn_id"])
        assert state is not None
        assert state.model == api.runtime.settings.model == "scripted"
