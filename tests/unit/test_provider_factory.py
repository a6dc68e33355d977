"""provider_from_config: the documented spec strings and clear errors for malformed ones."""

from __future__ import annotations

from typing import Any

import boto3
import httpx
import pytest

from turnkeep.plumbing.credentials import CredentialError
from turnkeep.providers.base import FatalModelError
from turnkeep.providers.bedrock import DEFAULT_MAX_TOKENS, BedrockProvider
from turnkeep.providers.factory import ProviderConfigError, provider_from_config
from turnkeep.providers.openai_compat import OpenAICompatProvider


@pytest.fixture
def bedrock_client() -> Any:
    return boto3.client(
        "bedrock-runtime",
        region_name="us-east-1",
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
    )


def test_scripted_options_shape_the_frame_delay_and_the_words_per_frame() -> None:
    from turnkeep.providers.scripted import ScriptedProvider

    provider = provider_from_config("scripted?delay_ms=150&words_per_frame=1")
    assert isinstance(provider, ScriptedProvider)
    assert provider.frame_delay == pytest.approx(0.15)
    assert provider.words_per_frame == 1


def test_every_provider_takes_its_context_window_from_the_context_and_reserve_options(
    bedrock_client: Any,
) -> None:
    scripted = provider_from_config("scripted?context=4000&reserve=300")
    bedrock = provider_from_config(
        "bedrock:anthropic.claude-3-5-haiku-20241022-v1:0?context=50000&max_tokens=1000",
        bedrock_client=bedrock_client,
    )
    openai = provider_from_config("openai:http://h/v1#m?context=16000&reserve=2000", environ={})

    assert (scripted.context.tokens, scripted.context.output_reserve) == (4000, 300)
    assert scripted.context.input_budget == 3700
    # The reply cap is what a round keeps free unless `reserve` says otherwise.
    assert (bedrock.context.tokens, bedrock.context.output_reserve) == (50000, 1000)
    assert (openai.context.tokens, openai.context.output_reserve) == (16000, 2000)


@pytest.mark.parametrize(
    ("spec", "tokens", "reserve"),
    [
        ("scripted", 128_000, 1024),
        ("scripted?context=2000", 2000, 500),
        ("bedrock:anthropic.claude-3-5-haiku-20241022-v1:0", 200_000, DEFAULT_MAX_TOKENS),
        ("bedrock:eu.amazon.nova-lite-v1:0", 300_000, DEFAULT_MAX_TOKENS),
        ("bedrock:amazon.nova-micro-v1:0", 128_000, DEFAULT_MAX_TOKENS),
        ("bedrock:meta.llama3-1-70b-instruct-v1:0", 128_000, DEFAULT_MAX_TOKENS),
        ("bedrock:some.unknown-model", 32_000, DEFAULT_MAX_TOKENS),
        ("openai:https://api.openai.com/v1#gpt-4o-mini", 128_000, 4096),
        ("openai:http://localhost:11434/v1#llama3.1", 8192, 2048),
    ],
)
def test_each_provider_family_has_a_documented_default_context(
    spec: str, tokens: int, reserve: int, bedrock_client: Any
) -> None:
    provider = provider_from_config(spec, bedrock_client=bedrock_client, environ={})

    assert (provider.context.tokens, provider.context.output_reserve) == (tokens, reserve)


def test_scripted_spec_builds_the_scripted_provider() -> None:
    from turnkeep.providers.scripted import ScriptedProvider

    assert isinstance(provider_from_config("scripted"), ScriptedProvider)


def test_bedrock_spec_keeps_colons_of_the_model_id_and_uses_the_injected_client(
    bedrock_client: Any,
) -> None:
    provider = provider_from_config(
        "bedrock:anthropic.claude-3-5-haiku-20241022-v1:0", bedrock_client=bedrock_client
    )

    assert isinstance(provider, BedrockProvider)
    assert provider.model_id == "anthropic.claude-3-5-haiku-20241022-v1:0"
    assert provider.client is bedrock_client
    assert provider.streaming is True
    assert provider.settings.max_tokens == DEFAULT_MAX_TOKENS


def test_bedrock_spec_accepts_an_inference_profile_arn_and_options() -> None:
    arn = "arn:aws:bedrock:eu-west-1:123456789012:inference-profile/eu.amazon.nova-lite-v1:0"

    provider = provider_from_config(f"bedrock:{arn}?region=eu-west-1&stream=false&max_tokens=512")

    assert isinstance(provider, BedrockProvider)
    assert provider.model_id == arn
    assert provider.streaming is False
    assert provider.settings.max_tokens == 512


def test_openai_spec_splits_base_url_and_model_with_the_key_from_the_environment() -> None:
    http = httpx.Client()
    provider = provider_from_config(
        "openai:http://localhost:11434/v1#llama3.1:8b",
        http_client=http,
        environ={"OPENAI_API_KEY": "sk-env"},
    )
    http.close()

    assert isinstance(provider, OpenAICompatProvider)
    assert provider.url == "http://localhost:11434/v1/chat/completions"
    assert provider.model == "llama3.1:8b"
    assert provider._api_key == "sk-env"


def test_openai_spec_key_option_is_a_reference_never_a_literal() -> None:
    provider = provider_from_config(
        "openai:https://api.openai.com/v1#gpt-4o-mini?key=env:TEAM_KEY&timeout=30&stream=off",
        environ={"TEAM_KEY": "sk-team"},
    )
    assert isinstance(provider, OpenAICompatProvider)
    assert provider._api_key == "sk-team"
    assert provider.streaming is False

    with pytest.raises(CredentialError, match="literal keys are not accepted"):
        provider_from_config("openai:https://api.openai.com/v1#gpt-4o?key=sk-abc123", environ={})


def test_an_unresolvable_endpoint_key_is_a_fatal_model_error_with_the_credentials_code() -> None:
    with pytest.raises(FatalModelError) as caught:
        provider_from_config("openai:http://127.0.0.1:9/v1#m?key=env:NOPE", environ={})

    assert caught.value.code == "credentials"
    assert isinstance(caught.value, CredentialError)
    assert "NOPE is not set" in str(caught.value)


@pytest.mark.parametrize(
    ("spec", "complaint"),
    [
        ("", "empty provider spec"),
        ("   ", "empty provider spec"),
        ("gpt-4o", "unknown provider spec 'gpt-4o'"),
        ("anthropic:claude", "unknown provider spec 'anthropic'"),
        ("bedrock", "unknown provider spec 'bedrock'"),
        ("bedrock:", "bedrock needs a model id"),
        ("bedrock:my model", "bedrock needs a model id"),
        ("bedrock:m?stream=maybe", "stream='maybe' is not a boolean"),
        ("bedrock:m?max_tokens=0", "max_tokens='0' must be a positive integer"),
        ("bedrock:m?temprature=1", "unknown option 'temprature'"),
        ("bedrock:m?region=a&region=b", "option 'region' given twice"),
        ("scripted:extra", "unknown provider spec 'scripted'"),
        ("scripted?colour=red", "unknown option 'colour'"),
        ("scripted?delay_ms=-5", "delay_ms='-5' must be an integer >= 0"),
        ("scripted?words_per_frame=0", "words_per_frame='0' must be a positive integer"),
        ("openai:http://localhost:11434/v1", "needs '<base url>#<model>'"),
        ("openai:http://localhost:11434/v1#", "model name after '#' is empty"),
        ("openai:localhost:11434/v1#llama3", "must be an absolute http"),
        ("openai:http://#llama3", "must be an absolute http"),
        ("openai:http://h/v1#m?timeout=-1", "timeout='-1' must be a positive number"),
        ("scripted?context=0", "context='0' must be a positive integer"),
        ("scripted?context=lots", "context='lots' must be a positive integer"),
        ("scripted?context=4000&reserve=-1", "reserve='-1' must be an integer >= 0"),
        ("scripted?context=4000&reserve=4000", "must be smaller than the context (4000 tokens)"),
        ("bedrock:m?context=4000&max_tokens=8000", "output reserve (8000 tokens)"),
        ("openai:http://h/v1#m?context=x", "context='x' must be a positive integer"),
        ("bedrock:m?temperature=hot", "option temperature: Input should be a valid number"),
        ("bedrock:m?temperature=3", "option temperature: Input should be less than or equal to 2"),
        ("bedrock:m?top_p=0", "option top_p: Input should be greater than 0"),
        ("bedrock:m?guardrail=gr-1", "guardrail='gr-1' must be <id>:<version>"),
        ("bedrock:m?extra=[1]", "extra='[1]' must be a JSON object"),
        ("bedrock:m?prompt_cache=sometimes", "prompt_cache='sometimes' is not a boolean"),
        ("bedrock:m?reasoning_budget=0", "option reasoning_budget: Input should be greater"),
        ("openai:http://h/v1#m?temperature=1&temperature=2", "option 'temperature' given twice"),
    ],
)
def test_malformed_spec_is_a_clear_error_naming_the_problem(spec: str, complaint: str) -> None:
    with pytest.raises(ProviderConfigError) as caught:
        provider_from_config(spec, environ={})

    assert complaint in str(caught.value)
    assert isinstance(caught.value, ValueError)
    assert caught.value.code == "configuration"


def test_key_reference_keeps_plus_signs_of_secret_names(monkeypatch: pytest.MonkeyPatch) -> None:
    from moto import mock_aws

    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    with mock_aws():
        secrets: Any = boto3.client("secretsmanager")
        secrets.create_secret(Name="team+openai/key", SecretString="sk-plus")

        provider = provider_from_config(
            "openai:https://api.openai.com/v1#gpt-4o-mini?key=secretsmanager:team+openai/key",
            secrets_client=secrets,
            environ={},
        )

    assert isinstance(provider, OpenAICompatProvider)
    assert provider._api_key == "sk-plus"


def test_setting_options_parse_into_the_providers_model_settings(bedrock_client: Any) -> None:
    from turnkeep.providers.settings import GuardrailSettings, ModelSettings

    arn = "arn:aws:bedrock:eu-west-1:123456789012:guardrail/abc"
    provider = provider_from_config(
        "bedrock:anthropic.claude-3-5-haiku-20241022-v1:0?temperature=0.2&top_p=0.9&stop=END"
        f"&stop=STOP&tool_choice=required&prompt_cache=off&guardrail={arn}:DRAFT"
        '&reasoning_budget=2048&max_tokens=8192&extra={"top_k":5}',
        bedrock_client=bedrock_client,
    )

    assert isinstance(provider, BedrockProvider)
    assert provider.settings == ModelSettings(
        max_tokens=8192,
        temperature=0.2,
        top_p=0.9,
        stop=("END", "STOP"),
        tool_choice="required",
        extra={"top_k": 5},
        prompt_cache=False,
        guardrail=GuardrailSettings(identifier=arn, version="DRAFT"),
        reasoning_budget=2048,
    )
    # A request's settings override the spec's field by field.
    merged = provider.settings.merged(ModelSettings(temperature=0.7))
    assert (merged.temperature, merged.top_p) == (0.7, 0.9)


def test_openai_native_output_is_a_spec_option_off_by_default() -> None:
    on = provider_from_config("openai:http://127.0.0.1:9/v1#m?native_output=true")
    off = provider_from_config("openai:http://127.0.0.1:9/v1#m")

    assert isinstance(on, OpenAICompatProvider)
    assert isinstance(off, OpenAICompatProvider)
    assert (on.native_output, off.native_output) == (True, False)
    with pytest.raises(ProviderConfigError, match="native_output"):
        provider_from_config("openai:http://127.0.0.1:9/v1#m?native_output=maybe")
