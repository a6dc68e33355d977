"""Build the harness dependencies of one process from settings (local mode and Lambda alike)."""

from __future__ import annotations

from dataclasses import dataclass, field

from turnkeep.agent.definition import Agent
from turnkeep.envelope import EnvelopeStore, open_envelope_store
from turnkeep.harness import HarnessDeps, HarnessLimits
from turnkeep.harness.deps import ProviderResolver
from turnkeep.providers.base import ModelProvider
from turnkeep.runtime.agent_settings import with_agent
from turnkeep.runtime.settings import TurnkeepSettings
from turnkeep.spend.factory import open_ledger
from turnkeep.storage import Storage, open_repository, open_storage


def limits_from_settings(settings: TurnkeepSettings) -> HarnessLimits:
    """The turn caps and progress cadence the settings ask for."""
    return settings.limits


def provider_resolver(default_model: str) -> ProviderResolver:
    """Resolve a turn's model spec (None = `default_model`) to a provider, lazily."""

    def resolve(spec: str | None) -> ModelProvider:
        from turnkeep.providers.factory import provider_from_config

        return provider_from_config(spec or default_model)

    return resolve


@dataclass
class Runtime:
    """Harness deps plus what the process holds open for them."""

    settings: TurnkeepSettings
    deps: HarnessDeps
    envelopes: EnvelopeStore
    storage_url: str
    held: list[Storage] = field(default_factory=list)

    def close(self) -> None:
        """Release the envelope store and any held storage handle."""
        self.envelopes.close()
        if self.deps.ledger is not None:
            self.deps.ledger.close()
        for handle in self.held:
            handle.close()


def build_runtime(
    settings: TurnkeepSettings | None = None,
    *,
    provider: ModelProvider | ProviderResolver | None = None,
    agent: Agent | None = None,
) -> Runtime:
    """Open the envelope store and wire HarnessDeps for `settings` (default: the environment).

    Empty storage/envelope URLs mean local SQLite under `settings.local_dir` (created here).
    The agent is `agent`, else the one `settings.agent` names (ConfigError when it cannot be
    loaded); the default model is TURNKEEP_MODEL's when set, else the agent's.
    """
    settings = settings or TurnkeepSettings()
    settings, loaded = with_agent(settings, agent=agent)
    if not settings.storage_url or not settings.envelope_url:
        settings.local_dir.mkdir(parents=True, exist_ok=True)
    storage_url = settings.storage_url_or_local()
    held: list[Storage] = []
    if storage_url.startswith("sqlite:"):
        # Held for the process: a step's close then skips the WAL checkpoint of the last handle.
        held.append(open_storage(storage_url, "local-keeper"))
    envelopes = open_envelope_store(settings.envelope_url_or_local())
    deps = HarnessDeps(
        open_storage=lambda session_id: open_storage(storage_url, session_id),
        envelopes=envelopes,
        provider=provider if provider is not None else provider_resolver(settings.model),
        limits=limits_from_settings(settings),
        agent=loaded,
        # The ledger lives where the envelopes do (docs/usage.md, "The ledger").
        ledger=open_ledger(settings.envelope_url_or_local()),
        budgets=settings.budgets(),
    )
    return Runtime(settings, deps, envelopes, storage_url, held)


def open_local_runtime(
    settings: TurnkeepSettings,
    *,
    storage_source: str = "TURNKEEP_STORAGE_URL",
    envelope_source: str = "TURNKEEP_ENVELOPE_URL",
) -> Runtime:
    """`build_runtime(settings)`; a storage or envelope URL it cannot open is a ConfigError.

    `*_source` name where each URL came from (a variable or a command-line flag) for the line.
    """
    from turnkeep.envelope import MetaValidationError
    from turnkeep.runtime.config_errors import ConfigError, config_problem
    from turnkeep.storage import StorageValidationError

    try:
        # The repository, not a session: checking the URL must not create a session.
        open_repository(settings.storage_url_or_local()).close()
    except StorageValidationError as exc:
        raise ConfigError(config_problem(storage_source, settings.storage_url, str(exc))) from None
    try:
        return build_runtime(settings)
    except MetaValidationError as exc:
        raise ConfigError(
            config_problem(envelope_source, settings.envelope_url, str(exc))
        ) from None
