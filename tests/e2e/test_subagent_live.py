"""A sub-agent's child turn reaches the parent's watchers while it runs, under a real
`turnkeep serve`: the parent's SSE stream shows the child's tool call (nested under the call)
before the parent's tool result, a stream resumed from any event's id sends the rest once,
and `turnkeep chat` (in-process and `--url`) prints the child's tool call and result indented
under the call (docs/api.md, "Sub-agent events"). The writer's tool waits for a flag file, so
the child is seen running without sleeps."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from tests.support.real_server import RealServer, repo_pythonpath
from turnkeep.cli.sse import SseEvent, read_sse

ALICE = {"Authorization": "Bearer dev-alice"}
AGENT = "tests.support.subagent_agents:agent"
TASK = json.dumps({"input": "call wait_for_go {}"})


def _server(tmp_path: Path, flags: Path) -> RealServer:
    return RealServer(
        tmp_path / "local",
        command=[sys.executable, "-m", "turnkeep.cli", "serve", "--agent", AGENT],
        extra_env={"PYTHONPATH": repo_pythonpath(), "SUBAGENT_FLAG_DIR": str(flags)},
    )


def _nested_tool_call(event: SseEvent) -> bool:
    data: dict[str, Any] = event.data
    return bool(data.get("nested")) and any(
        p.get("kind") == "tool_call" and p.get("name") == "wait_for_go"
        for p in data.get("parts") or []
    )


def _is_parent_result(event: SseEvent) -> bool:
    return (
        event.kind == "entry" and event.data.get("role") == "tool" and not event.data.get("nested")
    )


def _key(event: SseEvent) -> tuple[str, int, tuple[str, ...]]:
    """An event with an id: what it is, whichever cursor spelling its id has."""
    ops = tuple(n["op_id"] for n in event.data.get("nested") or [])
    return event.kind, int(event.data["seq"]), ops


def test_the_parent_stream_shows_the_child_tool_call_before_the_parent_tool_result(
    tmp_path: Path,
) -> None:
    flags = tmp_path / "flags"
    flags.mkdir()
    server = _server(tmp_path, flags)
    seen: list[SseEvent] = []
    try:
        server.start()
        with httpx.Client(base_url=server.url, headers=ALICE, timeout=30) as client:
            sid = client.post("/sessions", json={}).json()["session_id"]
            started = client.post(f"/sessions/{sid}/turns", json={"text": f"call writer {TASK}"})
            assert started.status_code == 202, started.text
            turn = started.json()["turn_id"]
            path = f"/sessions/{sid}/turns/{turn}/stream"
            with client.stream("GET", path) as answer:
                for event in read_sse(answer.iter_lines()):
                    seen.append(event)
                    if _nested_tool_call(event):
                        # The child is held in its tool: the parent has no result yet.
                        assert not [e for e in seen if _is_parent_result(e)]
                        assert (flags / "started").exists()
                        (flags / "go").touch()
            # Resumed from each event's id, the stream sends exactly the events after it.
            with_ids = [e for e in seen if e.id is not None]
            resumed = {}
            for index in (0, len(with_ids) // 2, len(with_ids) - 2):
                headers = {"Last-Event-ID": str(with_ids[index].id)}
                with client.stream("GET", path, headers=headers) as again:
                    events = read_sse(again.iter_lines())
                    resumed[index] = [_key(e) for e in events if e.id is not None]
    finally:
        server.stop()
    assert server.tracebacks() == ""

    kinds = [e.kind for e in seen]
    assert kinds[0] == "status"
    assert kinds[-1] == "end"
    assert seen[-1].data["status"] == "completed"
    call_at = next(i for i, e in enumerate(seen) if _nested_tool_call(e))
    result_at = next(i for i, e in enumerate(seen) if _is_parent_result(e))
    assert call_at < result_at
    nested = seen[call_at].data["nested"]
    assert [(n["agent"], n["depth"], n["call_id"]) for n in nested] == [
        ("writer", 1, seen[result_at].data["parts"][0]["call_id"])
    ]
    # The child's own tool result is nested too, and comes before the parent's.
    child_results = [
        i
        for i, e in enumerate(seen)
        if e.kind == "entry" and e.data.get("role") == "tool" and e.data.get("nested")
    ]
    assert child_results
    assert max(child_results) < result_at
    assert seen[result_at].data["parts"][0]["content"] == "Tool wait_for_go returned: went"
    assert any(isinstance(e.id, str) for e in with_ids)  # ids that hold the child's place
    for index, rest in resumed.items():
        assert rest == [_key(e) for e in with_ids[index + 1 :]], index


def _chat(args: list[str], cwd: Path, stdin: str, flags: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TURNKEEP_")}
    env["PYTHONPATH"] = repo_pythonpath()
    env["SUBAGENT_FLAG_DIR"] = str(flags)
    return subprocess.run(
        [sys.executable, "-m", "turnkeep.cli", "chat", *args],
        cwd=cwd,
        env=env,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _assert_child_lines_under_the_call(out: str) -> None:
    lines = out.splitlines()
    call = lines.index("    [writer] call wait_for_go {}")
    result = lines.index("    [writer] wait_for_go returned: went")
    parent_result = next(i for i, line in enumerate(lines) if "<- writer [ok]" in line)
    assert call < result < parent_result, out


def test_the_local_chat_prints_the_child_tool_call_and_result_indented_under_the_call(
    tmp_path: Path,
) -> None:
    flags = tmp_path / "flags"
    flags.mkdir()
    (flags / "go").touch()

    done = _chat(["--agent", AGENT], tmp_path, f"call writer {TASK}\n/quit\n", flags)

    assert done.returncode == 0, done.stdout + done.stderr
    _assert_child_lines_under_the_call(done.stdout)


def test_the_remote_chat_prints_the_child_tool_call_and_result_indented_under_the_call(
    tmp_path: Path,
) -> None:
    flags = tmp_path / "flags"
    flags.mkdir()
    (flags / "go").touch()
    server = _server(tmp_path, flags)
    try:
        server.start()
        done = _chat(
            ["--url", server.url, "--user", "alice"],
            tmp_path,
            f"call writer {TASK}\n/quit\n",
            flags,
        )
    finally:
        server.stop()

    assert done.returncode == 0, done.stdout + done.stderr
    _assert_child_lines_under_the_call(done.stdout)
    assert done.stdout.count("[writer] call wait_for_go") == 1
