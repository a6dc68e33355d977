"""The example triage agent (`turnkeep_agents.release_assistant.triage:agent`) in the harness: a
typed parent whose two sub-agents run as child turns, the typed one's `Readiness` reaching it as
JSON and the writer's text as it is, then its own `Triage` (docs/agent.md, "Sub-agents")."""

from __future__ import annotations

import json
from pathlib import Path

from tests.integration.turns_support import USER, make_turn_harness
from tests.support.triage_scripts import (
    DECISION,
    READINESS_TASK,
    VERDICT,
    WRITER_TASK,
    both_sub_agents,
)
from turnkeep.harness import run_turn
from turnkeep.harness.state import load_head, load_record
from turnkeep.harness.subagents import child_ids
from turnkeep.harness.transcript import branch_messages
from turnkeep.providers.base import ToolResultPart
from turnkeep.storage import open_storage


def test_the_triage_agent_asks_both_sub_agents_then_submits_its_own_typed_decision(
    tmp_path: Path,
) -> None:
    from turnkeep_agents.release_assistant.readiness import Readiness
    from turnkeep_agents.release_assistant.triage import Triage, agent

    h = make_turn_harness(tmp_path)
    h.deps.agent = agent

    result = run_turn(h.deps, h.session_id, USER, both_sub_agents())

    assert result.status == "completed", result.error
    assert Triage.model_validate(result.output) == Triage.model_validate(DECISION)
    parts = {p.name: p for m in h.transcript() for p in m.parts if isinstance(p, ToolResultPart)}
    assert set(parts) == {"check_readiness", "write_changelog", "final_result"}
    assert not any(p.is_error for p in parts.values())
    # The typed child's validated Readiness is the call's result, as JSON.
    readiness = Readiness.model_validate(json.loads(parts["check_readiness"].content))
    assert readiness == Readiness.model_validate(VERDICT)
    assert parts["write_changelog"].content.startswith("Tool ticket_summary returned: REL-101: ")
    tasks = {"check_readiness": READINESS_TASK, "write_changelog": WRITER_TASK}
    outputs = {}
    for name in ("check_readiness", "write_changelog"):
        child_session, child_op = child_ids(h.session_id, result.op_id, parts[name].call_id)
        with open_storage(h.storage_url, child_session) as storage:
            record = load_record(storage, child_op)
            messages = branch_messages(storage, load_head(storage))
        assert record.status == "completed"
        # The child's own transcript starts with its task, exactly.
        assert (messages[0].role, messages[0].text) == ("user", tasks[name])
        outputs[name] = record.output
    assert outputs == {"check_readiness": VERDICT, "write_changelog": None}
    assert result.subagent_usage.input_tokens > 0
