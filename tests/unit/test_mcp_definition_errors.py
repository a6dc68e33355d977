"""A bad `mcp_server(...)` in an agent module is the agent's definition error: one line naming
the reference when the agent is loaded (`TURNKEEP_AGENT`, `--agent`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from turnkeep.runtime.agent_loading import forget_agents, load_agent
from turnkeep.runtime.config_errors import ConfigError


def test_a_bad_mcp_server_definition_is_one_line_naming_the_agent_reference(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = tmp_path / "bad_mcp_agent"
    package.mkdir()
    (package / "__init__.py").write_text(
        "from turnkeep import Agent, mcp_server\n"
        "agent = Agent(mcp_servers=[mcp_server('docs', url='http://x/mcp', command='srv')])\n",
        encoding="utf-8",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    forget_agents()
    try:
        with pytest.raises(ConfigError) as caught:
            load_agent("bad_mcp_agent:agent")
    finally:
        forget_agents()
    text = str(caught.value)
    assert "\n" not in text
    assert "bad_mcp_agent:agent" in text
    assert "the agent definition is not accepted: mcp_server 'docs': give exactly one of" in text
