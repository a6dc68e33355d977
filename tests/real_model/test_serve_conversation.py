"""A conversation with SmolLM2 on llama-server through a real `turnkeep serve`: streaming, the
usage the server reported, its prompt cache, the working notes in the rendered prompt, cancel.

The model's words are never asserted (nobody chose them); what the server received and reported
is, read from the recording relay between turnkeep and the server and from the server's own
`/apply-template` endpoint.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.real_model.conftest import serve, spec_for
from tests.real_model.proxy import Exchange, RecordingProxy
from tests.real_model.turns import api, converse, follow, interrupted, new_session
from tools.real_model.server import LlamaServer

PROMPTS = (
    "Hello! My name is Ada. Say hello back in one sentence.",
    "Tell me one short fact about the ocean.",
    "Now one short fact about mountains.",
)


@pytest.fixture
def served(tmp_path: Path, proxy: RecordingProxy, llama: LlamaServer) -> Iterator[str]:
    """`turnkeep serve` whose default model is SmolLM2 behind the relay; `scripted` allowed."""
    model = spec_for(proxy.url, llama.ctx_size, "max_tokens=48", "temperature=0")
    server = serve(tmp_path / "data", model, TURNKEEP_ALLOWED_MODELS=json.dumps(["scripted"]))
    url = server.start()
    try:
        yield url
    finally:
        server.stop()
    assert server.tracebacks() == ""


def _usage_of(exchange: Exchange) -> dict[str, int]:
    """The server's usage in turnkeep's terms (input excludes the cached prompt tokens)."""
    usage = exchange.usage()
    cached = int((usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0)
    return {
        "input_tokens": usage["prompt_tokens"] - cached,
        "output_tokens": usage["completion_tokens"],
        "cache_read_tokens": cached,
    }


def test_a_three_turn_conversation_streams_each_reply_and_reports_the_servers_usage(
    served: str, proxy: RecordingProxy
) -> None:
    with api(served) as client:
        session = new_session(client)
        turns = [converse(client, session, text) for text in PROMPTS]

    assert len(proxy.exchanges) == len(PROMPTS), [e.status for e in proxy.exchanges]
    for turn, exchange in zip(turns, proxy.exchanges, strict=True):
        assert turn.end["status"] == "completed", turn.end
        assert exchange.status == 200
        # Streamed: more than one live piece, and the settled reply is exactly what the
        # server streamed, joined.
        assert len(turn.deltas()) > 1, turn.kinds
        assert turn.reply() == "".join(exchange.text_deltas())
        assert turn.reply().strip()
        usage = turn.end["usage"]
        assert {k: usage[k] for k in ("input_tokens", "output_tokens", "cache_read_tokens")} == (
            _usage_of(exchange)
        )
        assert usage["estimated"] is False
    # Each later turn re-sends the conversation, whose prefix the server has cached.
    for later in proxy.exchanges[1:]:
        assert _usage_of(later)["cache_read_tokens"] > 0
    # The whole conversation went to the server: the third request carries both earlier turns.
    third = [m["content"] for m in proxy.exchanges[2].body["messages"] if m["role"] == "user"]
    assert third == list(PROMPTS)


def test_the_working_notes_are_folded_into_the_prompt_the_server_renders(
    served: str, proxy: RecordingProxy, llama: LlamaServer
) -> None:
    with api(served) as client:
        session = new_session(client)
        # The scripted model writes the note (SmolLM2 calls no tools, docs/providers.md).
        noted = converse(
            client, session, "remember the deploy region is eu-west-1", model="scripted"
        )
        assert noted.end["status"] == "completed", noted.end
        assert "eu-west-1" in client.get(f"/sessions/{session}/notes").json()["notes"]
        asked = converse(client, session, "Which region do we deploy to?")

    assert asked.end["status"] == "completed", asked.end
    [exchange] = proxy.exchanges
    rendered = httpx.post(
        f"{llama.url}/apply-template", json={"messages": exchange.body["messages"]}, timeout=30
    ).json()["prompt"]
    # SmolLM2's ChatML template: the notes sit inside the system block, before the question.
    system_block = rendered.split("<|im_end|>", 1)[0]
    assert system_block.startswith("<|im_start|>system")
    assert "eu-west-1" in system_block
    assert rendered.index("eu-west-1") < rendered.index("Which region do we deploy to?")


def test_a_reply_cancelled_mid_stream_ends_aborted_and_the_next_turn_completes(
    served: str, proxy: RecordingProxy
) -> None:
    with api(served) as client:
        session = new_session(client)
        cancels: list[httpx.Response] = []
        turn, rest = interrupted(
            client,
            session,
            "Write a long story about a dragon who learns to bake bread.",
            lambda turn: cancels.append(client.post(f"/sessions/{session}/turns/{turn}/cancel")),
        )
        view = client.get(f"/sessions/{session}/turns/{turn}").json()
        after = converse(client, session, "Say hi in three words.")

    [cancel] = cancels
    assert cancel.status_code == 202, cancel.text
    assert any(line.startswith("event: end") for line in rest)
    assert view["status"] == "aborted"
    # The cancel landed while the server streamed: it takes effect at the round's end (the
    # model step checks it before each round), so the reply in flight is read to its end and
    # the turn ends without another round (docs/providers.md, "A real model in the tests").
    assert proxy.exchanges[0].text_deltas()
    assert len(proxy.exchanges) == 2
    assert after.end["status"] == "completed", after.end
    assert proxy.exchanges[-1].status == 200


def test_the_event_stream_of_a_finished_real_turn_replays_the_same_reply(
    served: str, proxy: RecordingProxy
) -> None:
    with api(served) as client:
        session = new_session(client)
        first = converse(client, session, PROMPTS[1])
        replay = follow(client, session, first.turn_id)

    assert replay.end == first.end
    assert replay.reply() == first.reply() == "".join(proxy.exchanges[0].text_deltas())
