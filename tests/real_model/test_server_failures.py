"""The real server failing under a running turn: killed mid-stream, then started again; and a
small `--ctx-size` overflowing, which turnkeep compacts with a summary SmolLM2 writes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.real_model.conftest import new_llama, serve, spec_for
from tests.real_model.proxy import RecordingProxy
from tests.real_model.turns import api, converse, interrupted, new_session
from tools.real_model.server import LlamaServer

SMALL_CTX = 1024
# About 250 tokens of text: three of them with the replies do not fit SMALL_CTX.
FILLER = " ".join(
    f"Note {i}: the warehouse in town {i} stores {i * 7} crates of apples and pears."
    for i in range(16)
)


@pytest.fixture
def own_llama(llama_files: tuple[Path, Path], tmp_path: Path) -> Iterator[LlamaServer]:
    """A server of this test's own (it gets killed), stopped by its pid after."""
    server = new_llama(llama_files, tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


def test_the_server_killed_mid_stream_fails_the_turn_and_a_restarted_server_serves_the_next(
    tmp_path: Path, own_llama: LlamaServer
) -> None:
    model = spec_for(own_llama.url, own_llama.ctx_size, "temperature=0")
    server = serve(tmp_path / "data", model)
    url = server.start()
    try:
        with api(url) as client:
            session = new_session(client)
            turn, rest = interrupted(
                client,
                session,
                "Write a long story about a lighthouse keeper.",
                lambda _turn: own_llama.kill9(),
            )
            view = client.get(f"/sessions/{session}/turns/{turn}").json()
            envelope = client.get(f"/sessions/{session}").json()
            own_llama.start()  # the same port: the spec turnkeep has still points at it
            after = converse(client, session, "Say hello in one sentence.")
    finally:
        server.stop()

    assert any(line.startswith("event: end") for line in rest)
    assert view["status"] == "failed"
    assert "connection" in view["error"], view["error"]
    assert envelope["turn"]["status"] == "failed"  # nothing left `running`
    assert after.end["status"] == "completed", after.end
    assert after.reply().strip()
    assert server.tracebacks() == ""


def test_a_small_server_window_overflows_and_the_turn_compacts_with_a_real_summary(
    tmp_path: Path, llama_files: tuple[Path, Path]
) -> None:
    small = new_llama(llama_files, tmp_path, ctx_size=SMALL_CTX)
    small.start()
    try:
        with RecordingProxy(small.url) as proxy:
            # turnkeep is told a larger window than the server runs (as with Ollama's num_ctx),
            # so only the server's refusal can tell it the prompt is too long.
            model = spec_for(proxy.url, 8192, "max_tokens=48", "temperature=0")
            server = serve(tmp_path / "data", model)
            url = server.start()
            try:
                with api(url) as client:
                    session = new_session(client)
                    turns = [
                        converse(client, session, f"Part {n}. {FILLER} Reply with one sentence.")
                        for n in range(1, 5)
                    ]
            finally:
                server.stop()
            exchanges = list(proxy.exchanges)
    finally:
        small.stop()

    assert [t.end["status"] for t in turns] == ["completed"] * 4, [t.end for t in turns]
    refused = [i for i, e in enumerate(exchanges) if e.status == 400]
    assert refused, [e.status for e in exchanges]
    assert "exceed_context_size_error" in exchanges[refused[0]].answer
    compacted = [t for t in turns if t.entries("compaction")]
    assert compacted, "no turn compacted"
    for turn in compacted:
        [marker] = turn.entries("compaction")
        assert marker["parts"][0]["summary"].strip()
        assert marker["parts"][0]["dropped_turns"] >= 1
    # Each refusal is followed by the compaction request (no tools) the server answered with
    # the summary turnkeep kept, then the same round again, which fitted.
    summaries = [t.entries("compaction")[0]["parts"][0]["summary"] for t in compacted]
    for index in refused:
        summary, retry = exchanges[index + 1], exchanges[index + 2]
        written = "".join(summary.text_deltas()).strip()
        assert not summary.body.get("tools")
        assert summary.status == 200
        assert written
        assert any(written[:40] in s for s in summaries), written
        assert retry.status == 200
        assert retry.body.get("tools")
    # The turn after the first compaction fitted too (the history it sends is summarized).
    assert turns.index(compacted[0]) < len(turns) - 1
