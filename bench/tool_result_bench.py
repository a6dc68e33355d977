"""What a large tool result costs the turns after it: input tokens a later turn sends.

A session's first turn calls a tool returning ~200 KB (the `dump_pantry` of issue #28); its
later turns only chat. For each model window (an 8k local model, the scripted 128k, a 200k
Claude) this prints the characters of that result the later turns carry (the preview, sized to
`tool_result_share` of the input budget), the provider-reported input tokens of a later turn
(scripted model: 4 characters a token; its replies quote the result, so the preview counts
twice), the whole result at the same estimate (what the 64 KiB cut turnkeep carried before
capped at 16,384 tokens a copy), and the median time of the first turn, which stores the whole
result (SQLite, in-process). `--smoke` runs one window and 3 turns (CI). Prints figures;
asserts nothing about speed.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from turnkeep import Agent, tool
from turnkeep.envelope import open_envelope_store
from turnkeep.harness import HarnessDeps, run_turn
from turnkeep.harness.deps import HarnessLimits
from turnkeep.harness.tool_results import preview_chars
from turnkeep.providers.context import ContextWindow
from turnkeep.providers.scripted import ScriptedProvider
from turnkeep.storage import open_storage

WINDOWS = {
    "local 8k": ContextWindow(8_192, 2_048),
    "scripted 128k": ContextWindow(128_000, 1_024),
    "claude 200k": ContextWindow(200_000, 4_096),
}


@tool(isolation="in_process")
def dump_pantry(kb: int) -> str:
    """Everything in the pantry: about `kb` KB of listing."""
    return "\n".join(f"shelf {n:05}: rice, oats, tea, beans" for n in range(kb * 27))


def _session(window: ContextWindow, db: Path, later_turns: int) -> tuple[int, int, float]:
    """(carried characters, input tokens of the last later turn, ms of the dump turn)."""
    provider = ScriptedProvider()
    provider.context = window
    envelopes = open_envelope_store(f"memory://{uuid.uuid4().hex}")
    session_id = f"bench-{uuid.uuid4().hex[:8]}"
    envelopes.create(session_id, "alice")
    url = f"sqlite:///{db}"
    deps = HarnessDeps(
        open_storage=lambda sid: open_storage(url, sid),
        envelopes=envelopes,
        provider=provider,
        limits=HarnessLimits(),
        agent=Agent(tools=[dump_pantry]),
    )
    started = time.perf_counter()
    run_turn(deps, session_id, "alice", 'call dump_pantry {"kb": 200}')
    dump_ms = (time.perf_counter() - started) * 1000
    last = None
    for n in range(later_turns):
        last = run_turn(deps, session_id, "alice", f"and now {n}?")
    assert last is not None
    return preview_chars(window, 0.05), last.usage.input_tokens, dump_ms


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--smoke", action="store_true", help="one window, 3 turns (CI)")
    parser.add_argument("--runs", type=int, default=5, help="sessions per window (medians)")
    args = parser.parse_args()
    windows = {"scripted 128k": WINDOWS["scripted 128k"]} if args.smoke else WINDOWS
    runs, later = (1, 2) if args.smoke else (args.runs, 5)
    print(f"a ~200 KB tool result in turn 1, then {later} chat turns; medians of {runs} run(s)")
    whole = len(dump_pantry.function(200))
    print(f"the result: {whole:,} characters, ~{whole // 4:,} tokens at 4 characters a token")
    print(f"{'window':<15} {'carried chars':>13} {'later turn in tokens':>21} {'turn 1 ms':>10}")
    with tempfile.TemporaryDirectory() as tmp:
        for name, window in windows.items():
            results = [_session(window, Path(tmp) / f"{i}.db", later) for i in range(runs)]
            carried = results[0][0]
            tokens = int(statistics.median(r[1] for r in results))
            dump_ms = statistics.median(r[2] for r in results)
            print(f"{name:<15} {carried:>13,} {tokens:>21,} {dump_ms:>10.1f}")


if __name__ == "__main__":
    main()
