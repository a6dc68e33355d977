"""Pick a model provider from one configuration string (see docs/providers.md).

    scripted[?delay_ms=N&words_per_frame=N&context=N&reserve=N]
    bedrock:<model id>[?region=R&stream=false&context=N&reserve=N&<settings>]
    openai:<base url>#<model>[?key=<reference>&stream=false&timeout=S&native_output=true
                              &context=N&reserve=N&<settings>]

`<settings>` are model settings (turnkeep.providers.settings: max_tokens, temperature, top_p,
stop (repeatable), tool_choice, extra, prompt_cache, guardrail, reasoning_budget); they parse into
the provider's ModelSettings, which a request's own settings override field by field.

`<reference>` is a credential reference (`env:` / `secretsmanager:` / `ssm:`, see
turnkeep.plumbing.credentials); without it the key comes from the environment. Provider modules
are imported lazily so a Lambda that runs the scripted model never imports boto3 or httpx.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl

from turnkeep.plumbing.credentials import CredentialError
from turnkeep.providers.base import FatalModelError, ModelProvider
from turnkeep.providers.capabilities import capabilities_for
from turnkeep.providers.context import (
    DEFAULT_OUTPUT_RESERVE,
    SCRIPTED_CONTEXT,
    ContextWindow,
    bedrock_context_tokens,
    context_window,
    openai_context_tokens,
)
from turnkeep.providers.settings import SETTING_OPTIONS, ModelSettings, settings_from_options

if TYPE_CHECKING:
    import httpx
    from mypy_boto3_bedrock_runtime import BedrockRuntimeClient
    from mypy_boto3_secretsmanager import SecretsManagerClient
    from mypy_boto3_ssm import SSMClient

    from turnkeep.providers.openai_compat import OpenAICompatProvider

SPEC_FORMS = (
    "scripted[?delay_ms=N&words_per_frame=N&context=N&reserve=N]",
    "bedrock:<model id>[?region=R&stream=false&context=N&reserve=N&<model settings>]",
    "openai:<base url>#<model>[?key=<reference>&stream=false&timeout=S&native_output=true"
    "&context=N&reserve=N&<model settings>]",
)
# Every provider's options use one syntax, `kind[:target]?name=value&...`; the scripted model's
# options are how tests and demos shape it (docs/providers.md lists them all).
# `context` (tokens of the model's window) and `reserve` (tokens kept free for the reply) are
# every provider's: the harness budgets each request by them (docs/harness.md).
_CONTEXT_OPTIONS = frozenset({"context", "reserve"})
# `attachments` declares what the model takes besides text (providers/capabilities.py).
_ATTACHMENT_OPTIONS = frozenset({"attachments"})
_SCRIPTED_OPTIONS = frozenset({"delay_ms", "words_per_frame", "price"}) | _CONTEXT_OPTIONS
_BEDROCK_OPTIONS = (
    frozenset({"region", "stream"}) | _CONTEXT_OPTIONS | SETTING_OPTIONS | _ATTACHMENT_OPTIONS
)
_OPENAI_OPTIONS = (
    frozenset({"key", "stream", "timeout", "native_output"})
    | _CONTEXT_OPTIONS
    | SETTING_OPTIONS
    | _ATTACHMENT_OPTIONS
)
_REPEATABLE = frozenset({"stop"})


class ProviderConfigError(FatalModelError, ValueError):
    """A provider configuration string is malformed; the message names the offending part."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="configuration")


class ModelCredentialError(FatalModelError, CredentialError):
    """An endpoint's key reference cannot be resolved: to the harness a fatal model error
    (code `credentials`), to configuration checks the plumbing's CredentialError."""

    def __init__(self, message: str) -> None:
        super().__init__(message, code="credentials")


def provider_from_config(
    spec: str,
    *,
    bedrock_client: BedrockRuntimeClient | None = None,
    http_client: httpx.Client | None = None,
    secrets_client: SecretsManagerClient | None = None,
    ssm_client: SSMClient | None = None,
    environ: Mapping[str, str] | None = None,
) -> ModelProvider:
    """The provider `spec` names; injected clients are used instead of default ones."""
    if not isinstance(spec, str) or not spec.strip():
        raise ProviderConfigError(f"empty provider spec; expected one of: {'; '.join(SPEC_FORMS)}")
    spec = spec.strip()
    try:
        capabilities = capabilities_for(spec)
    except ValueError as exc:
        raise ProviderConfigError(f"provider spec {spec!r}: {exc}") from exc
    kind, sep, rest = spec.partition(":")
    if spec == "scripted" or spec.startswith("scripted?"):
        return _scripted(spec, spec[len("scripted") :])
    if kind == "bedrock" and sep:
        return _bedrock(spec, rest, bedrock_client)
    if kind == "openai" and sep:
        provider = _openai(
            spec,
            rest,
            http_client=http_client,
            secrets_client=secrets_client,
            ssm_client=ssm_client,
            environ=environ,
        )
        provider.capabilities = capabilities
        return provider
    raise ProviderConfigError(
        f"unknown provider spec {kind!r} in {spec!r}; expected one of: {'; '.join(SPEC_FORMS)}"
    )


def _scripted(spec: str, rest: str) -> ModelProvider:
    head, options, _ = _split_options(spec, rest, _SCRIPTED_OPTIONS)
    if head:
        raise ProviderConfigError(
            f"provider spec {spec!r}: 'scripted' takes only options, "
            "e.g. scripted?delay_ms=200&words_per_frame=1"
        )
    from turnkeep.providers.scripted import ScriptedProvider

    delay_ms = _int(spec, options, "delay_ms", default=0, minimum=0)
    window = _context(
        spec,
        options,
        default_tokens=SCRIPTED_CONTEXT.tokens,
        max_tokens=None,
        default_reserve=SCRIPTED_CONTEXT.output_reserve,
    )
    provider = ScriptedProvider(
        words_per_frame=_int(spec, options, "words_per_frame", default=2),
        frame_delay=delay_ms / 1000,
        context=window,
    )
    if "price" in options:
        # Free unless priced, like a local server; a price lets demos and tests show cost.
        provider.settings = _settings(spec, {"price": options["price"]}, [])
    return provider


def _bedrock(spec: str, rest: str, client: BedrockRuntimeClient | None) -> ModelProvider:
    model_id, options, stops = _split_options(spec, rest, _BEDROCK_OPTIONS)
    if not model_id or any(c.isspace() for c in model_id):
        raise ProviderConfigError(
            f"provider spec {spec!r}: bedrock needs a model id without spaces, "
            "e.g. bedrock:anthropic.claude-3-5-haiku-20241022-v1:0"
        )
    from turnkeep.providers.bedrock import DEFAULT_MAX_TOKENS, BedrockProvider

    max_tokens = _int(spec, options, "max_tokens", default=DEFAULT_MAX_TOKENS)
    window = _context(
        spec, options, default_tokens=bedrock_context_tokens(model_id), max_tokens=max_tokens
    )
    provider = BedrockProvider(
        model_id,
        client,
        stream=_bool(spec, options, "stream", default=True),
        max_tokens=max_tokens,
        region_name=options.get("region"),
        settings=_settings(spec, options, stops),
    )
    provider.context = window
    return provider


def _openai(
    spec: str,
    rest: str,
    *,
    http_client: httpx.Client | None,
    secrets_client: SecretsManagerClient | None,
    ssm_client: SSMClient | None,
    environ: Mapping[str, str] | None,
) -> OpenAICompatProvider:
    base_url, hash_sign, model_part = rest.partition("#")
    if not hash_sign:
        raise ProviderConfigError(
            f"provider spec {spec!r}: openai needs '<base url>#<model>', "
            "e.g. openai:http://localhost:11434/v1#llama3.1"
        )
    model, options, stops = _split_options(spec, model_part, _OPENAI_OPTIONS)
    if not model:
        raise ProviderConfigError(f"provider spec {spec!r}: the model name after '#' is empty")
    if not base_url.startswith(("http://", "https://")):
        raise ProviderConfigError(
            f"provider spec {spec!r}: base url {base_url!r} must be an absolute http(s) URL"
        )
    from turnkeep.plumbing.credentials import resolve_api_key
    from turnkeep.providers.openai_compat import DEFAULT_TIMEOUT, OpenAICompatProvider

    max_tokens = _int(spec, options, "max_tokens", default=0) or None
    timeout = _float(spec, options, "timeout", default=DEFAULT_TIMEOUT)
    stream = _bool(spec, options, "stream", default=True)
    native_output = _bool(spec, options, "native_output", default=False)
    settings = _settings(spec, options, stops)
    window = _context(
        spec, options, default_tokens=openai_context_tokens(model), max_tokens=max_tokens
    )
    # Options are checked before the key is fetched: a typo costs no Secrets Manager call.
    try:
        api_key = resolve_api_key(
            options.get("key"),
            environ=environ,
            secrets_client=secrets_client,
            ssm_client=ssm_client,
        )
    except CredentialError as exc:
        raise ModelCredentialError(str(exc)) from exc
    try:
        provider = OpenAICompatProvider(
            base_url,
            model,
            api_key,
            http_client,
            timeout,
            stream=stream,
            max_tokens=max_tokens,
            settings=settings,
            native_output=native_output,
        )
    except ValueError as exc:
        raise ProviderConfigError(f"provider spec {spec!r}: {exc}") from exc
    provider.context = window
    return provider


# -- options ------------------------------------------------------------------------------------


def _split_options(
    spec: str, text: str, allowed: frozenset[str]
) -> tuple[str, dict[str, str], list[str]]:
    """The head before `?`, the options (each at most once) and the repeatable `stop` values."""
    head, question, query = text.partition("?")
    if not question:
        return head.strip(), {}, []
    options: dict[str, str] = {}
    stops: list[str] = []
    try:
        # A literal "+" stays a plus (secret and parameter names may contain one), not a space.
        pairs = parse_qsl(query.replace("+", "%2B"), keep_blank_values=True, strict_parsing=True)
    except ValueError as exc:
        raise ProviderConfigError(f"provider spec {spec!r}: malformed options {query!r}") from exc
    for name, value in pairs:
        if name not in allowed:
            raise ProviderConfigError(
                f"provider spec {spec!r}: unknown option {name!r} "
                f"(allowed: {', '.join(sorted(allowed))})"
            )
        if name in _REPEATABLE:
            stops.append(value)
            continue
        if name in options:
            raise ProviderConfigError(f"provider spec {spec!r}: option {name!r} given twice")
        options[name] = value
    return head.strip(), options, stops


def _settings(spec: str, options: Mapping[str, str], stops: list[str]) -> ModelSettings:
    values = {name: [value] for name, value in options.items() if name in SETTING_OPTIONS}
    if stops:
        values["stop"] = stops
    try:
        return settings_from_options(values)
    except ValueError as exc:
        raise ProviderConfigError(f"provider spec {spec!r}: {exc}") from exc


def _context(
    spec: str,
    options: Mapping[str, str],
    *,
    default_tokens: int,
    max_tokens: int | None,
    default_reserve: int = DEFAULT_OUTPUT_RESERVE,
) -> ContextWindow:
    tokens = _int(spec, options, "context", default=default_tokens)
    reserve = _int(spec, options, "reserve", default=0, minimum=0) if "reserve" in options else None
    try:
        return context_window(
            tokens=tokens,
            reserve=reserve,
            max_tokens=max_tokens,
            default_reserve=default_reserve,
        )
    except ValueError as exc:
        raise ProviderConfigError(f"provider spec {spec!r}: {exc}") from exc


def _bool(spec: str, options: Mapping[str, str], name: str, *, default: bool) -> bool:
    if name not in options:
        return default
    value = options[name].lower()
    if value in ("true", "1", "yes", "on"):
        return True
    if value in ("false", "0", "no", "off"):
        return False
    raise ProviderConfigError(f"provider spec {spec!r}: option {name}={value!r} is not a boolean")


def _int(
    spec: str, options: Mapping[str, str], name: str, *, default: int, minimum: int = 1
) -> int:
    if name not in options:
        return default
    try:
        value = int(options[name])
    except ValueError:
        value = minimum - 1
    if value < minimum:
        kind = "a positive integer" if minimum == 1 else f"an integer >= {minimum}"
        raise ProviderConfigError(
            f"provider spec {spec!r}: option {name}={options[name]!r} must be {kind}"
        )
    return value


def _float(spec: str, options: Mapping[str, str], name: str, *, default: float) -> float:
    if name not in options:
        return default
    try:
        value = float(options[name])
    except ValueError:
        value = 0.0
    if not value > 0 or value == float("inf"):
        raise ProviderConfigError(
            f"provider spec {spec!r}: option {name}={options[name]!r} must be a positive number"
        )
    return value
