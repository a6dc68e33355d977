"""`turnkeep chat` with SmolLM2 on llama-server: two turns in the terminal, each ending with
the token figures the server reported (the second with its cached prompt tokens)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.real_model.conftest import spec_for
from tests.real_model.proxy import RecordingProxy
from tools.real_model.server import LlamaServer
from turnkeep.cli.usage_line import usage_text

TURN_LINE = re.compile(r"^\[turn \S+: (\w+), .*\]$", re.MULTILINE)


def test_two_chat_turns_complete_and_print_the_servers_usage_with_the_cached_tokens(
    tmp_path: Path, proxy: RecordingProxy, llama: LlamaServer
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TURNKEEP_")}
    env["TURNKEEP_LOCAL_DIR"] = str(tmp_path / "data")
    env["TURNKEEP_MODEL"] = spec_for(proxy.url, llama.ctx_size, "max_tokens=32", "temperature=0")
    done = subprocess.run(
        [sys.executable, "-m", "turnkeep.cli", "chat", "--session", "real-chat"],
        input="Hi, I am Ada. Greet me in one sentence.\nWhat is my name?\n/quit\n",
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )

    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    assert TURN_LINE.findall(done.stdout) == ["completed", "completed"], done.stdout
    assert len(proxy.exchanges) == 2
    for exchange in proxy.exchanges:
        usage = exchange.usage()
        cached = usage["prompt_tokens_details"]["cached_tokens"]
        figure = usage_text(
            usage["prompt_tokens"] - cached, usage["completion_tokens"], cached, estimated=False
        )
        assert figure in done.stdout, (figure, done.stdout)
        # The reply printed is the text the server streamed.
        assert "".join(exchange.text_deltas()).strip() in done.stdout
    assert proxy.exchanges[1].usage()["prompt_tokens_details"]["cached_tokens"] > 0
