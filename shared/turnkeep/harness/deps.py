"""What every step function needs: storage, envelopes, model, tools, clock and limits."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from turnkeep.agent.definition import Agent, demo_agent
from turnkeep.agent.session_tools import session_registry
from turnkeep.envelope import EnvelopeStore
from turnkeep.harness.live import LiveSink
from turnkeep.harness.tool_images import SessionAttachmentImages, ToolImageStore
from turnkeep.harness.tool_results import read_tool_result_tool
from turnkeep.harness.transcript import TranscriptCache
from turnkeep.notes import working_notes_tools
from turnkeep.providers.base import ModelProvider
from turnkeep.spend.budgets import Budgets
from turnkeep.spend.ledger import Charge, SpendLedger
from turnkeep.storage import Storage
from turnkeep.tools.base import Tool
from turnkeep.tools.isolation import InProcessRunner, ToolRunner
from turnkeep.tools.registry import ToolRegistry

ProviderResolver = Callable[[str | None], ModelProvider]
ToolFactory = Callable[[str, str], Iterable[Tool[Any]]]
"""(session_id, user_id) -> the session's tools besides the always-on working-notes tools (a
low-level hook that replaces the agent's own tools; its tool sources are still listed)."""


class HarnessLimits(BaseModel):
    """Caps of one turn and the progress cadence."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_steps: int = Field(default=16, ge=1, le=1000, description="model rounds per turn")
    wall_clock_seconds: float = Field(default=300.0, gt=0, description="turn deadline")
    frame_interval_ms: int = Field(
        default=2000, ge=0, description="recovery frames: at most one persisted per interval"
    )
    frame_max_bytes: int = Field(
        default=16384, ge=1, description="recovery frames: persisted early at this much text"
    )
    live_interval_ms: int = Field(
        default=100, ge=0, le=1000, description="live deltas to watchers: one per interval"
    )
    max_interrupted_rounds: int = Field(
        default=2, ge=0, description="consecutive interrupted model rounds before the turn fails"
    )
    model_retries: int = Field(
        default=2, ge=0, description="in-process retries of a retryable model error"
    )
    model_retry_interval_seconds: float = Field(
        default=1.0,
        ge=0,
        description="in-process wait before the first model retry, doubled for each next one, "
        "with full jitter (a Step Functions Retry's IntervalSeconds, BackoffRate 2, "
        "JitterStrategy FULL)",
    )
    tool_parallelism: int = Field(default=4, ge=1, description="in-process parallel tool steps")
    stale_turn_seconds: float = Field(
        default=3600.0,
        ge=60,
        description="a running turn with no end this long after its deadline is abandoned: "
        "a new turn of the session fails it and takes over (longer than any orchestrator "
        "retry; a turn waiting for an approval counts from its last request's expiry)",
    )
    max_tool_calls_per_round: int = Field(
        default=32,
        ge=1,
        le=256,
        description="tool calls of one model round that run; the rest get an error result "
        "(keeps the step payload small)",
    )
    approval_timeout_seconds: float = Field(
        default=86400.0,
        gt=0,
        description="a tool call awaiting approval this long is denied as timed out",
    )
    workflow_type: Literal["STANDARD", "EXPRESS"] = Field(
        default="STANDARD",
        description="the Step Functions workflow driving the turn: EXPRESS cannot wait for an "
        "approval, so a call needing one fails clearly",
    )
    child_turns: Literal["inline", "execution"] = Field(
        default="inline",
        description="where a sub-agent call's child turn runs: `inline` in the tool step's "
        "process (local), or `execution`: the tool step starts it and the state machine runs "
        "it as a nested execution while the parent waits at zero compute (docs/agent.md)",
    )
    tool_lease_seconds: float = Field(
        default=0.0,
        ge=0,
        description="a tool call `started` this recently is taken to be running in another "
        "delivery (a concurrent duplicate waits for its result); older, its delivery died. "
        "0: deliveries never overlap (one local orchestrator per turn)",
    )
    max_tool_result_bytes: int = Field(
        default=524_288,
        ge=4096,
        description="a tool result is stored whole up to this size; a longer one is cut there "
        "(the model's preview says so)",
    )
    tool_result_share: float = Field(
        default=0.05,
        gt=0,
        le=0.5,
        description="share of the model's input budget a tool result's preview (and a page of "
        "read_tool_result) may use; a longer result is kept whole in storage",
    )
    context_strategy: Literal["compaction", "window"] = Field(
        default="compaction",
        description="when the request outgrows the threshold: summarize the oldest turns into "
        "a compaction entry, or leave them out (a context_window entry)",
    )
    context_threshold: float = Field(
        default=0.8,
        gt=0,
        le=1,
        description="share of the model's input budget (context - output reserve) a request "
        "may use before older turns are compacted or left out",
    )
    context_keep: float = Field(
        default=0.5,
        gt=0,
        le=1,
        description="share of the input budget a request uses right after a compaction or "
        "window (room to grow before the next one)",
    )
    attachment_source: Literal["auto", "bytes"] = Field(
        default="auto",
        description="how a Bedrock round sends attachments: `auto` as their S3 object "
        "(`s3Location`) where the store is S3 and the model family takes it (Amazon Nova "
        "Lite/Pro/Premier), else the bytes; `bytes`: always the bytes (docs/attachments.md)",
    )
    attachment_bucket_owner: str = Field(
        default="",
        pattern=r"^([0-9]{12})?$",
        description="the account id of the S3 bucket's owner, sent as an `s3Location`'s "
        "`bucketOwner` (Bedrock then reads only a bucket of that account); '' = not sent",
    )

    @model_validator(mode="after")
    def _keep_below_threshold(self) -> HarnessLimits:
        if self.context_keep > self.context_threshold:
            raise ValueError(
                f"context_keep ({self.context_keep}) must not exceed context_threshold "
                f"({self.context_threshold}): a shrunk request would trigger again at once"
            )
        return self


@dataclass
class HarnessDeps:
    """Dependencies of the step functions; steps hold no other state.

    `open_storage(session_id)` returns a Storage the step closes when done. `provider` is one
    provider or a resolver from the turn's model spec (None = default) to a provider. One deps
    object serves one storage location (its transcript cache is keyed by session id).
    `agent` is what its turns run (instructions, tools, sources, model settings); `tools`, when
    set, replaces the agent's own tools (tests and embedding code).
    """

    open_storage: Callable[[str], Storage]
    envelopes: EnvelopeStore
    provider: ModelProvider | ProviderResolver
    tools: ToolFactory | None = None
    clock: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    """How the in-process orchestrator waits between model retries (tests inject it)."""
    jitter: Callable[[float], float] = field(default=lambda cap: random.uniform(0.0, cap))
    """A wait between 0 and `cap` seconds (full jitter; tests inject it)."""
    limits: HarnessLimits = field(default_factory=HarnessLimits)
    agent: Agent = field(default_factory=demo_agent)
    tool_runner: ToolRunner = field(default_factory=InProcessRunner)
    """Where tool handlers run: in the step's thread (default; Lambda isolates each tool step),
    or a `ProcessPoolRunner` in the local server (time-limited, killable)."""
    transcripts: TranscriptCache = field(default_factory=TranscriptCache)
    """Decoded transcript entries, so a model round reads only entries new since the last one."""
    ledger: SpendLedger | None = None
    """Where each priced round is charged to its user's UTC day (None: not charged; the daily
    budgets then have nothing to read; docs/usage.md)."""
    on_charge: Callable[[Charge], None] | None = None
    """Sees each round the ledger counted (once; not a redelivery): the Lambdas publish it as
    CloudWatch metrics (turnkeep/aws_lambda/spend_metrics.py)."""
    budgets: Budgets | None = None
    """The deployment's budgets (settings, template parameters); the agent's own apply too."""
    live: LiveSink | None = None
    """Where watchers of a running turn get its live text and committed events (None: nobody
    watches but through storage; docs/api.md, "Live events")."""
    tool_images: ToolImageStore | None = field(default_factory=SessionAttachmentImages)
    """Where images a tool returns are kept as the session's attachments (None: left out with a
    note in the result; docs/attachments.md, "Images from tools")."""

    @property
    def default_system(self) -> str:
        """The prompt the system folds start from: the agent's instructions or the default."""
        return self.agent.system_prompt

    def provider_for(self, model: str | None) -> ModelProvider:
        """The provider that runs a turn whose model spec is `model`."""
        if isinstance(self.provider, ModelProvider):
            return self.provider
        return self.provider(model)

    def registry(self, session_id: str, user_id: str) -> ToolRegistry:
        """The always-on working-notes tools bound to the session, the agent's tools (or the
        `tools` hook's), what the agent's sources list now (`unavailable`: those that could not
        list; each caller applies the failure rule of docs/agent.md) and `read_tool_result`."""
        notes = working_notes_tools(self.envelopes, user_id, session_id)
        extra = self.tools(session_id, user_id) if self.tools is not None else None
        registry = session_registry(self.agent, notes, extra)
        if self.agent.agents:
            from turnkeep.harness.subagents import subagent_tools  # it drives turns: deferred

            registry.extend(subagent_tools(self), source="agent")
        registry.register(read_tool_result_tool(self.open_storage, session_id), source="builtin")
        return registry
