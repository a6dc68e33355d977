"""Which model specs a request may name: the server's default, the agent's `allowed_models`
and TURNKEEP_ALLOWED_MODELS (a turn's `model`, a session's `selectedModel`; docs/api.md)."""

from __future__ import annotations

from turnkeep.api.context import ApiContext
from turnkeep.api.errors import ApiError


def allowed_models(ctx: ApiContext) -> list[str]:
    """The default model first, then every other spec a turn may name (the agent's
    `allowed_models` and TURNKEEP_ALLOWED_MODELS)."""
    default = ctx.runtime.settings.model
    others = [*ctx.runtime.deps.agent.allowed_models, *ctx.settings.allowed_models]
    return [default, *sorted(set(others) - {default})]


def check_model(ctx: ApiContext, model: str | None, field: str = "model") -> None:
    """422 `model_not_allowed` naming `field` unless `model` is None or offered here."""
    if model is None:
        return
    allowed = allowed_models(ctx)
    if model not in allowed:
        raise ApiError(
            422,
            "model_not_allowed",
            f"{field}: {model!r} is not offered by this server; "
            f"allowed: {', '.join(sorted(allowed))}",
            field=field,
        )
